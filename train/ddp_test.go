package train

import (
	"context"
	"errors"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/internal/grouptest"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// rankMem is rank's part of an in-memory data set split for world ranks the way the loaders split
// one: each global batch of `global` samples (in (seed, epoch) order) is cut into world parts of
// global/world, rank taking part rank; the last global batch may be short, and a rank whose part
// is empty is padded with the batch's first samples (as DistributedSampler pads).
type rankMem struct {
	dev         gpu.Device
	s           gpu.Stream
	images      []uint8
	labels      []int32
	shape       Shape
	global      int
	rank, world int
	shuffle     bool
	seed        uint64
	buf         gpu.Buffer
	// std, if not 0, is the normalization's standard deviation (0.3 otherwise).
	std float32
}

func newRankMem(t testing.TB, dev gpu.Device, images []uint8, labels []int32, global, rank, world int, shuffle bool, seed uint64) *rankMem {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	d := &rankMem{dev: dev, s: s, images: images, labels: labels, shape: img8, global: global, rank: rank, world: world, shuffle: shuffle, seed: seed}
	t.Cleanup(func() {
		if d.buf != nil {
			d.buf.Free()
		}
		d.s.Close()
	})
	return d
}

func (d *rankMem) Steps() int { return (len(d.labels) + d.global - 1) / d.global }
func (d *rankMem) Normalization() (mean, std []float32) {
	if d.std != 0 {
		return []float32{0.3}, []float32{d.std}
	}
	return []float32{0.3}, []float32{0.3}
}
func (d *rankMem) split() (int, int) { return d.rank, d.world }

// part is the rank's positions in the epoch's order.
func (d *rankMem) parts() [][]int {
	n := len(d.labels)
	var out [][]int
	per := d.global / d.world
	for lo := 0; lo < n; lo += d.global {
		hi := min(lo+d.global, n)
		a, b := min(lo+d.rank*per, hi), min(lo+(d.rank+1)*per, hi)
		if d.rank == d.world-1 {
			b = hi
		}
		var pos []int
		for k := a; k < b; k++ {
			pos = append(pos, k)
		}
		if len(pos) == 0 {
			pos = []int{lo}
		}
		out = append(out, pos)
	}
	return out
}

func (d *rankMem) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		n, per := len(d.labels), d.shape.Len()
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		if d.shuffle {
			r := rng.Epoch(d.seed, epoch)
			r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		parts := d.parts()
		total := 0
		for _, p := range parts {
			total += len(p)
		}
		host := make([]byte, total*per+4*total)
		k := 0
		for _, p := range parts {
			for _, pos := range p {
				i := order[pos]
				copy(host[k*per:], d.images[i*per:(i+1)*per])
				*(*int32)(unsafe.Pointer(&host[total*per+4*k])) = d.labels[i]
				k++
			}
		}
		var err error
		if d.buf, err = uploadEpoch(ctx, d.dev, d.s, d.buf, host); err != nil {
			yield(Batch{}, err)
			return
		}
		lo := 0
		for _, p := range parts {
			idx := make([]int, len(p))
			for j, pos := range p {
				idx[j] = order[pos]
			}
			b := Batch{
				Images:  kernels.U8{Buf: d.buf, Off: lo * per, Len: len(p) * per},
				Labels:  kernels.I32{Buf: d.buf, Off: total*per/4 + lo, Len: len(p)},
				N:       len(p),
				Shape:   d.shape,
				Indices: idx,
			}
			lo += len(p)
			if !yield(b, nil) {
				return
			}
		}
	}
}

// ddpOpts are a data-parallel test run's settings: the bucket size, whether the gradients are
// all-reduced on the device (streamReducer), whether the BatchNorms are synchronized.
type ddpOpts struct {
	bucket, accumulate         int
	onDevice, syncBN, ckBlocks bool // ckBlocks: Config.GradCheckpointing
	precision                  Precision
	// wire, if set, counts the bytes each rank's gradient all-reduces send per step; grads, if
	// set, records rank 0's gradients after each step.
	wire  *[]int64
	grads *[][][]float32
	// scales, if set, records rank 0's loss scaler after each step (fp16); init rank 0's weights
	// before the first.
	scales *[]lossScale
	init   *[][]float32
	// std is the data's normalization std (0: 0.3); fp32Wire all-reduces a reduced-precision
	// run's gradients in fp32, as Stoke did before the 16-bit buckets.
	std      float32
	fp32Wire bool
}

// ddpRun trains model (built by mk) with SGD on world ranks, each with its own CPU device and
// trainer, per-rank batch global/world (the last rank takes the remainder), and returns every
// rank's weights and buffers after each step.
func ddpRun(t *testing.T, mk func(testing.TB) *Model, world, global, steps int, o ddpOpts) (perStep [][][][]float32, acc []float64) {
	t.Helper()
	imgs, labels := synthetic(global*steps, 1)
	timgs, tlabels := synthetic(203, 2)
	groups := testGroups(t, world)
	perStep = make([][][][]float32, world)
	acc = make([]float64, world)
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		dev := openCPU(t)
		data := newRankMem(t, dev, imgs, labels, global, r, world, true, 7)
		data.std = o.std
		test := newRankMem(t, dev, timgs, tlabels, 50, r, world, false, 0)
		cfg := Config{Epochs: 1, Seed: 3, BucketBytes: o.bucket, SyncBatchNorm: o.syncBN, Precision: o.precision, Accumulate: o.accumulate,
			GradCheckpointing: o.ckBlocks}
		var sent atomic.Int64
		if world > 1 {
			g := countingGroup{groups[r], &sent}
			cfg.Collective = g
			if o.onDevice {
				cfg.DeviceReduce = streamReducer{g}
			}
		}
		var tr *Trainer
		last := int64(0)
		cfg.Progress = func(p *Progress) {
			if p.Done {
				return
			}
			perStep[r] = append(perStep[r], modelWeights(t, tr))
			if r == 0 && o.wire != nil {
				*o.wire = append(*o.wire, sent.Load()-last)
				last = sent.Load()
			}
			if r == 0 && o.grads != nil {
				*o.grads = append(*o.grads, gradients(t, tr))
			}
			if r == 0 && o.scales != nil {
				*o.scales = append(*o.scales, *tr.scaler)
			}
		}
		tr, err := New(context.Background(), mk(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if o.fp32Wire && tr.dist != nil {
			tr.dist.wire = FP32
		}
		if r == 0 && o.init != nil {
			*o.init = modelWeights(t, tr)
		}
		t.Cleanup(func() { tr.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := tr.Fit(context.Background(), data, test)
			errs[r], acc[r] = err, res.TestAcc
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return perStep, acc
}

// TestDataParallelEquivalence: W ranks with a per-rank batch of B/W train the same model as one
// process with batch B: after each of the first steps every rank holds the same bits, and those
// agree with the single process's weights within float32 rounding of a reordered sum; the
// evaluation, split between the ranks and padded, counts every test sample once.
func TestDataParallelEquivalence(t *testing.T) {
	const global, steps = 48, 20
	for _, tc := range []struct {
		name   string
		mk     func(testing.TB) *Model
		bucket int
	}{
		{"mlp", plainMLP, 0},
		{"mlp/small-buckets", plainMLP, 1024},
		{"cnn/small-buckets", smallCNN, 512},
		{"cnn/on-device", smallCNN, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, acc1 := ddpRun(t, tc.mk, 1, global, steps, ddpOpts{bucket: max(tc.bucket, 0)})
			for _, world := range []int{2, 3} {
				many, accW := ddpRun(t, tc.mk, world, global, steps, ddpOpts{bucket: max(tc.bucket, 512), onDevice: tc.bucket < 0})
				worst := 0.0
				for s := range steps {
					for r := 1; r < world; r++ {
						if !sameTensors(many[0][s], many[r][s]) {
							t.Fatalf("world %d step %d: rank %d's weights differ from rank 0's", world, s+1, r)
						}
					}
					worst = max(worst, relDiff(one[0][s], many[0][s]))
				}
				// Measured: about 1e-6 after 20 steps; float32's epsilon is 1.2e-7.
				t.Logf("world %d: largest weight difference to one process over %d steps: %.2g of the largest weight", world, steps, worst)
				if worst > 1e-4 {
					t.Errorf("world %d: weights drift from one process's by %.2g of the largest weight; want < 1e-4", world, worst)
				}
				for r := range world {
					if math.Abs(accW[r]-acc1[0]) > 1.0/203 {
						t.Errorf("world %d rank %d: test accuracy %v; one process %v", world, r, accW[r], acc1[0])
					}
				}
			}
		})
	}
}

// TestSyncBatchNormEquivalence: with SyncBatchNorm, W ranks with per-rank batches of B/W train a
// model with BatchNorm as one process with batch B does: after each step every rank holds the same bits, weights and running statistics
// alike, and they agree with the single process's within float32 rounding, through the host and
// on the device. Without SyncBatchNorm (each rank's own statistics) they differ by orders more.
// The batch norms are the package's layers (modules of nn) and an nn module's own (Net).
func TestSyncBatchNormEquivalence(t *testing.T) {
	const global, steps = 48, 15
	for _, tc := range []struct {
		name string
		mk   func(testing.TB) *Model
	}{{"bn-cnn", bnCNN}, {"resnet8", func(t testing.TB) *Model {
		m, err := NewModel("resnet8", img8, 10)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}}, {"nn-module", bnNet}} {
		t.Run(tc.name, func(t *testing.T) {
			// worst is the largest difference over the first steps to one process's tensors, each
			// relative to the tensor's largest value; every rank must hold rank 0's bits.
			worst := func(one [][][][]float32, many [][][][]float32, world, steps int) float64 {
				w := 0.0
				for s := range steps {
					for r := 1; r < world; r++ {
						if !sameTensors(many[0][s], many[r][s]) {
							t.Fatalf("world %d step %d: rank %d's weights or running statistics differ from rank 0's", world, s+1, r)
						}
					}
					for i := range one[0][s] {
						w = max(w, relDiff(one[0][s][i:i+1], many[0][s][i:i+1]))
					}
				}
				return w
			}
			one, _ := ddpRun(t, tc.mk, 1, global, steps, ddpOpts{})
			for _, o := range []ddpOpts{{syncBN: true}, {syncBN: true, bucket: 512}, {syncBN: true, onDevice: true}} {
				for _, world := range []int{2, 4} {
					w := worst(one, first(ddpRun(t, tc.mk, world, global, steps, o)), world, steps)
					// Measured: at most 6e-7 of a tensor's largest value over the 15 steps.
					t.Logf("world %d %+v: largest difference to one process over %d steps: %.2g of the tensor's largest value", world, o, steps, w)
					if w > 1e-5 {
						t.Errorf("world %d %+v: synchronized BatchNorm drifts from one process's by %.2g; want < 1e-5", world, o, w)
					}
				}
			}
			// Accumulating 2 batches a step: every batch's statistics are still the global batch's
			// (the batches before the last send no gradients, but sum their BatchNorms' sums).
			oneAcc, _ := ddpRun(t, tc.mk, 1, global, steps, ddpOpts{accumulate: 2})
			for _, o := range []ddpOpts{{syncBN: true, accumulate: 2}, {syncBN: true, accumulate: 2, onDevice: true}} {
				w := worst(oneAcc, first(ddpRun(t, tc.mk, 2, global, steps, o)), 2, len(oneAcc[0]))
				t.Logf("world 2 %+v: largest difference to one process accumulating alike: %.2g", o, w)
				if w > 1e-5 {
					t.Errorf("world 2 %+v: synchronized BatchNorm drifts from one process accumulating alike by %.2g; want < 1e-5", o, w)
				}
			}
			// Unequal batches (17, 17 and 18 of 52 on 3 ranks): DDP averages the ranks' mean
			// gradients with equal weights, so only the first step's statistics can match the
			// single process's, and they do, since they weigh each rank by its count.
			oneU, _ := ddpRun(t, tc.mk, 1, 52, 1, ddpOpts{})
			manyU, _ := ddpRun(t, tc.mk, 3, 52, 1, ddpOpts{syncBN: true})
			nb := len(oneU[0][0]) - len(tc.mk(t).buffers)
			u := worst(stepBuffers(oneU, nb), stepBuffers(manyU, nb), 3, 1)
			t.Logf("world 3, unequal batches: running statistics after step 1 within %.2g", u)
			if u > 1e-6 {
				t.Errorf("world 3, unequal batches: running statistics after step 1 differ by %.2g from one process's", u)
			}
			// Without SyncBatchNorm each rank normalizes with its own batch: rank 0's weights leave
			// the single process's at once.
			many, _ := ddpRun(t, tc.mk, 2, global, steps, ddpOpts{})
			w := 0.0
			for s := range steps {
				w = max(w, relDiff(one[0][s], many[0][s]))
			}
			t.Logf("world 2 without SyncBatchNorm: %.2g", w)
			if w < 1e-3 {
				t.Errorf("world 2 without SyncBatchNorm: %.2g from one process; per-rank statistics should differ more", w)
			}
		})
	}
}

func first[A, B any](a A, _ B) A { return a }

// bnNet is a model of one module of package nn (Net) holding two batch norms: conv 3x3 - batch
// norm - relu - conv 3x3 stride 2 - batch norm - relu - average pooling - linear, over 8x8 images.
func bnNet(t testing.TB) *Model {
	t.Helper()
	conv := func(i, o, s int) nn.Module {
		return nn.NewConv2d(i, o, 3, nn.ConvOptions{Stride: s, Padding: 1}, false)
	}
	m, err := Net("bn-net", img8, 10, nn.Sequential{conv(1, 4, 1), nn.NewBatchNorm2d(4), nn.Fn(nn.ReLU),
		conv(4, 8, 2), nn.NewBatchNorm2d(8), nn.Fn(nn.ReLU), nn.Fn(nn.GlobalAvgPool), nn.Fn(nn.Flatten), nn.NewLinear(8, 10, true)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stepBuffers keeps the tensors from index from on (a model's buffers follow its parameters).
func stepBuffers(perStep [][][][]float32, from int) [][][][]float32 {
	out := make([][][][]float32, len(perStep))
	for r, steps := range perStep {
		for _, ts := range steps {
			out[r] = append(out[r], ts[from:])
		}
	}
	return out
}

// bnCNN is a convolution, BatchNorm and ReLU, then a linear head.
func bnCNN(t testing.TB) *Model {
	t.Helper()
	m, err := tSequential("bn-cnn", img8, 10, tConv(1, 4, 3, 1, tNoBias()), tBatchNorm(4), tReLU(), tMaxPool(2), tFlatten(), tLinear(64, 10))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// plainMLP is smallMLP without its dropout, whose masks follow each sample's place in its batch.
func plainMLP(t testing.TB) *Model {
	t.Helper()
	m, err := tSequential("plain-mlp", img8, 10, tFlatten(), tLinear(64, 32), tReLU(), tLinear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameTensors(a, b [][]float32) bool {
	for i := range a {
		if !sameBits(a[i], b[i]) {
			return false
		}
	}
	return true
}

// relDiff is the largest |a-b| over the largest |a|.
func relDiff(a, b [][]float32) float64 {
	var d, m float64
	for i := range a {
		for j := range a[i] {
			d = max(d, math.Abs(float64(a[i][j])-float64(b[i][j])))
			m = max(m, math.Abs(float64(a[i][j])))
		}
	}
	return d / m
}

// TestBucketLayout: buckets hold every trainable tensor once, in the order backward completes
// their gradients (which a backward pass is checked to follow), each at least the cap but the
// last.
func TestBucketLayout(t *testing.T) {
	m, err := NewModel("resnet8", Shape{C: 3, H: 16, W: 16}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, capBytes := range []int{0, 1, 4096, 40000} {
		d := newDDP(nil, m, capBytes)
		var got []*Param
		for bi, b := range d.buckets {
			got = append(got, b.params...)
			n := 0
			for _, p := range b.params {
				n += prod(p.Shape)
			}
			if n != b.hi-b.lo {
				t.Fatalf("cap %d bucket %d: %d values in [%d,%d)", capBytes, bi, n, b.lo, b.hi)
			}
			c := capBytes
			if c == 0 {
				c = defaultBucketBytes
			}
			if bi == 0 {
				c = min(c, firstBucketBytes)
			}
			if bi < len(d.buckets)-1 && 4*n < c {
				t.Errorf("cap %d bucket %d: %d bytes; want at least %d", capBytes, bi, 4*n, c)
			}
		}
		if len(got) != len(m.params) {
			t.Fatalf("cap %d: buckets hold %d tensors; model has %d", capBytes, len(got), len(m.params))
		}
		if !slices.Equal(got, m.order) {
			t.Fatalf("cap %d: buckets hold the tensors in another order than the model's backward order", capBytes)
		}
		if capBytes == 0 && len(d.buckets) != 1 || capBytes == 1 && len(d.buckets) != len(m.params) {
			t.Errorf("cap %d: %d buckets", capBytes, len(d.buckets))
		}
	}
	// The backward pass completes the gradients in that order, each once.
	tr, err := New(t.Context(), m, openCPU(t), optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.reserve(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r := &run{ops: tr.ops, s: tr.s, train: true}
	if _, err := m.forward(r, 2, 1); err != nil {
		t.Fatal(err)
	}
	var done []*Param
	r.gradDone = func(p *Param) error { done = append(done, p); return nil }
	if err := m.backward(r, 2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, m.order) {
		var names []string
		for _, p := range done {
			names = append(names, p.Name)
		}
		t.Fatalf("backward completed the gradients in the order %v; the layout's differs", names)
	}
}

// TestBucketLayoutResNet18: at the default caps, resnet18's 45 MB of gradients go in a first
// bucket of at least 1 MiB (the head and the last block) and later ones of at least 25 MiB.
func TestBucketLayoutResNet18(t *testing.T) {
	m, err := NewModel("resnet18", Shape{C: 3, H: 64, W: 64}, 10)
	if err != nil {
		t.Fatal(err)
	}
	d := newDDP(nil, m, 0)
	if len(d.buckets) < 2 {
		t.Fatalf("%d buckets for %d MB of gradients", len(d.buckets), 4*len(d.host)>>20)
	}
	for bi, b := range d.buckets[:len(d.buckets)-1] {
		want := defaultBucketBytes
		if bi == 0 {
			want = firstBucketBytes
		}
		if 4*(b.hi-b.lo) < want {
			t.Errorf("bucket %d: %d bytes; want at least %d", bi, 4*(b.hi-b.lo), want)
		}
	}
}

// TestFitRankSplitNeedsDist: a rank's part of the data with no collective is refused, not trained
// into a model of its own.
func TestFitRankSplitNeedsDist(t *testing.T) {
	dev := openCPU(t)
	imgs, labels := synthetic(64, 1)
	data := newRankMem(t, dev, imgs, labels, 32, 1, 2, true, 7)
	tr, err := New(context.Background(), smallMLP(t), dev, optim.SGD{LR: 0.05}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background(), data, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("Fit on rank 1 of 2 without Collective = %v; want ErrConfig", err)
	}
}

// TestDataParallelMismatch: ranks that disagree on the model are refused at start, naming it.
func TestDataParallelMismatch(t *testing.T) {
	imgs, labels := synthetic(64, 1)
	groups := testGroups(t, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		dev := openCPU(t)
		m := smallMLP(t)
		if r == 1 {
			m = smallCNN(t)
		}
		tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.05}, Config{Collective: groups[r]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		data := newRankMem(t, dev, imgs, labels, 32, r, 2, true, 7)
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[r] = tr.Fit(context.Background(), data, nil) }()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d trained a model the other rank does not have", r)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

// TestDataParallelBF16: training in bf16, the gradient buckets travel as bf16 (DDP's
// bf16_compress_hook): half the bytes of an fp32 run's per step, every averaged gradient a bf16
// value widened to fp32, every rank with the same bits after each step, the host route and the
// device route with the same bits too (both round as collective.F32ToBF16 and reduce on one ring), and
// the weights near one process's in bf16, which all-reduces nothing.
func TestDataParallelBF16(t *testing.T) {
	const global, steps = 48, 20
	one, _ := ddpRun(t, smallCNN, 1, global, steps, ddpOpts{precision: BF16})
	var wire32 []int64
	ddpRun(t, smallCNN, 2, global, steps, ddpOpts{bucket: 512, precision: FP32, wire: &wire32})
	var runs [2][][][][]float32
	for i, onDevice := range []bool{false, true} {
		var wire []int64
		var grads [][][]float32
		many, _ := ddpRun(t, smallCNN, 2, global, steps, ddpOpts{bucket: 512, onDevice: onDevice, precision: BF16, wire: &wire, grads: &grads})
		runs[i] = many
		worst := 0.0
		for s := range steps {
			if !sameTensors(many[0][s], many[1][s]) {
				t.Fatalf("device %v step %d: rank 1's weights differ from rank 0's", onDevice, s+1)
			}
			if 2*wire[s] != wire32[s] {
				t.Errorf("device %v step %d: the gradients' all-reduces sent %d bytes; the fp32 run's %d", onDevice, s+1, wire[s], wire32[s])
			}
			for _, g := range grads[s] {
				for _, v := range g {
					if math.Float32bits(v)&0xffff != 0 {
						t.Fatalf("device %v step %d: averaged gradient %v is not a bf16 value", onDevice, s+1, v)
					}
				}
			}
			worst = max(worst, relDiff(one[0][s], many[0][s]))
		}
		t.Logf("device %v: %d bytes per step sent (fp32: %d); largest weight difference to one bf16 process over %d steps: %.2g of the largest weight",
			onDevice, wire[0], wire32[0], steps, worst)
		if worst > 1e-2 {
			t.Errorf("device %v: weights drift from one process's by %.2g of the largest weight; want < 1e-2", onDevice, worst)
		}
	}
	for s := range steps {
		if !sameTensors(runs[0][0][s], runs[1][0][s]) {
			t.Fatalf("step %d: the host route's weights differ from the device route's", s+1)
		}
	}
}

// TestDataParallelFP16: training in fp16, the gradient buckets travel as fp16 (DDP's
// fp16_compress_hook): half the bytes of an fp32 run's per step, every averaged gradient of an
// applied step an fp16 value (times the loss scale it was computed with), every rank with the
// same bits after each step, the host and device routes with the same bits (both divide by the
// world size in fp32, round as collective.F32ToFP16 and sum on one ring), and the weights near those of
// the same run all-reducing in fp32 and of one fp16 process.
func TestDataParallelFP16(t *testing.T) {
	const global, steps = 48, 20
	one, _ := ddpRun(t, smallCNN, 1, global, steps, ddpOpts{precision: FP16})
	var wire32 []int64
	ddpRun(t, smallCNN, 2, global, steps, ddpOpts{bucket: 512, precision: FP32, wire: &wire32})
	ref, _ := ddpRun(t, smallCNN, 2, global, steps, ddpOpts{bucket: 512, precision: FP16, fp32Wire: true})
	var runs [2][][][][]float32
	for i, onDevice := range []bool{false, true} {
		var wire []int64
		var grads [][][]float32
		var scales []lossScale
		many, _ := ddpRun(t, smallCNN, 2, global, steps, ddpOpts{bucket: 512, onDevice: onDevice, precision: FP16, wire: &wire, grads: &grads, scales: &scales})
		runs[i] = many
		worst, worst32, checked := 0.0, 0.0, 0
		for s := range steps {
			if !sameTensors(many[0][s], many[1][s]) {
				t.Fatalf("device %v step %d: rank 1's weights differ from rank 0's", onDevice, s+1)
			}
			if 2*wire[s] != wire32[s] {
				t.Errorf("device %v step %d: the gradients' all-reduces sent %d bytes; the fp32 run's %d", onDevice, s+1, wire[s], wire32[s])
			}
			if s > 0 && scales[s].skipped != scales[s-1].skipped || s == 0 && scales[0].skipped != 0 {
				continue // skipped: the gradients were not unscaled
			}
			for _, g := range grads[s] {
				for _, v := range g {
					if x := v * float32(scales[s].scale); collective.FP16ToF32(collective.F32ToFP16(x)) != x {
						t.Fatalf("device %v step %d: averaged gradient %v (times the scale %v: %v) is not an fp16 value", onDevice, s+1, v, scales[s].scale, x)
					}
					checked++
				}
			}
			worst = max(worst, relDiff(one[0][s], many[0][s]))
			worst32 = max(worst32, relDiff(ref[0][s], many[0][s]))
		}
		if checked == 0 {
			t.Fatalf("device %v: loss scaling skipped every step", onDevice)
		}
		t.Logf("device %v: %d bytes per step sent (fp32: %d), %d steps skipped; largest weight difference over %d steps to the fp16 run all-reducing in fp32: %.2g, to one fp16 process: %.2g of the largest weight",
			onDevice, wire[0], wire32[0], scales[steps-1].skipped, steps, worst32, worst)
		if worst > 1e-3 || worst32 > 1e-3 {
			t.Errorf("device %v: weights drift from the fp32 all-reduce's by %.2g, from one process's by %.2g of the largest weight; want < 1e-3", onDevice, worst32, worst)
		}
	}
	for s := range steps {
		if !sameTensors(runs[0][0][s], runs[1][0][s]) {
			t.Fatalf("step %d: the host route's weights differ from the device route's", s+1)
		}
	}
	// Over 3 ranks 1/3 is inexact: both routes multiply by the same float32 1/3, so the same bits.
	host3, _ := ddpRun(t, smallCNN, 3, global, 5, ddpOpts{bucket: 512, precision: FP16})
	dev3, _ := ddpRun(t, smallCNN, 3, global, 5, ddpOpts{bucket: 512, precision: FP16, onDevice: true})
	for s := range 5 {
		for r := range 3 {
			if !sameTensors(host3[r][s], dev3[r][s]) || !sameTensors(host3[0][s], host3[r][s]) {
				t.Fatalf("world 3 step %d rank %d: the host route's weights differ from the device route's or rank 0's", s+1, r)
			}
		}
	}
}

// TestDataParallelFP16Overflow: gradients whose average overflows fp16 (inputs normalized with a
// tiny std, so the first layer's scaled gradients reach millions, finite in fp32): the fp16
// all-reduce sums them to Inf, and fp16 loss scaling, which checks the gradients after the
// all-reduce, skips the step on every rank alike (weights and momentum untouched, never NaN) and
// halves the scale, until the average fits and a step is applied. The same run all-reducing in
// fp32, and one process, apply the first step: the overflow is the 16-bit all-reduce's alone.
func TestDataParallelFP16Overflow(t *testing.T) {
	const global, steps = 48, 12
	o := ddpOpts{precision: FP16, std: 0.002, bucket: 512}
	for _, onDevice := range []bool{false, true} {
		var scales, scales32, scales1 []lossScale
		var init [][]float32
		var grads32 [][][]float32
		o.onDevice, o.scales, o.init = onDevice, &scales, &init
		many, _ := ddpRun(t, plainMLP, 2, global, steps, o)
		o.fp32Wire, o.scales, o.grads, o.init = true, &scales32, &grads32, nil
		ddpRun(t, plainMLP, 2, global, steps, o)
		o.fp32Wire, o.scales, o.grads = false, &scales1, nil
		ddpRun(t, plainMLP, 1, global, steps, o)
		if scales32[0].skipped != 0 || scales1[0].skipped != 0 {
			t.Fatalf("device %v: the fp32 all-reduce's run skipped %d of the first step, one process %d; the test wants finite fp32 gradients",
				onDevice, scales32[0].skipped, scales1[0].skipped)
		}
		// The fp32 average, times the loss scale of the first step, is past fp16's range.
		peak := 0.0
		for _, g := range grads32[0] {
			for _, v := range g {
				peak = max(peak, math.Abs(float64(v))*lossScaleInit)
			}
		}
		if peak < 65520 {
			t.Fatalf("device %v: the largest scaled average gradient of the first step is %g, within fp16's range", onDevice, peak)
		}
		skipped := scales[steps-1].skipped
		t.Logf("device %v: the scaled average gradient reaches %.3g; %d of %d steps skipped (scale %g after them)", onDevice, peak, skipped, steps, scales[steps-1].scale)
		if scales[0].skipped != 1 || scales[0].scale != lossScaleInit/2 {
			t.Fatalf("device %v: after the overflowing first step: %d skipped, scale %v; want 1 skipped and the scale halved to %v",
				onDevice, scales[0].skipped, scales[0].scale, lossScaleInit/2)
		}
		if skipped >= steps {
			t.Fatalf("device %v: every step skipped; the scale never came down far enough", onDevice)
		}
		prev, prevScale := init, float64(lossScaleInit)
		for s := range steps {
			if !sameTensors(many[0][s], many[1][s]) {
				t.Fatalf("device %v step %d: rank 1's weights differ from rank 0's", onDevice, s+1)
			}
			for _, w := range many[0][s] {
				for _, v := range w {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("device %v step %d: weight %v", onDevice, s+1, v)
					}
				}
			}
			skip := s == 0 && scales[0].skipped == 1 || s > 0 && scales[s].skipped == scales[s-1].skipped+1
			if same := sameTensors(prev, many[0][s]); same != skip {
				t.Errorf("device %v step %d: skipped %v, weights unchanged %v", onDevice, s+1, skip, same)
			}
			if skip && scales[s].scale != prevScale/2 {
				t.Errorf("device %v step %d: skipped, scale %v; want %v halved", onDevice, s+1, scales[s].scale, prevScale)
			}
			prev, prevScale = many[0][s], scales[s].scale
		}
	}
}

// countingGroup counts the bytes of the gradient all-reduces it passes on (fp32, bf16 or fp16).
type countingGroup struct {
	Collective
	sent *atomic.Int64
}

func (g countingGroup) AllReduce(ctx context.Context, buf []float32, op collective.Op) error {
	if op == collective.Avg { // the gradients; sums are statistics and tallies
		g.sent.Add(int64(4 * len(buf)))
	}
	return g.Collective.AllReduce(ctx, buf, op)
}

func (g countingGroup) AllReduceBF16(ctx context.Context, buf []uint16, op collective.Op) error {
	g.sent.Add(int64(2 * len(buf)))
	return g.Collective.AllReduceBF16(ctx, buf, op)
}

func (g countingGroup) AllReduceFP16(ctx context.Context, buf []uint16, op collective.Op) error {
	g.sent.Add(int64(2 * len(buf)))
	return g.Collective.AllReduceFP16(ctx, buf, op)
}

// gradients reads every trained parameter's gradient back from the device.
func gradients(t testing.TB, tr *Trainer) [][]float32 {
	t.Helper()
	var vs []kernels.F32
	for _, p := range tr.m.params {
		vs = append(vs, p.G)
	}
	return readBack(t, tr, vs)
}

// streamReducer is a DeviceReducer on the CPU backend, as NCCL is one on CUDA: the all-reduce runs
// in stream order on the compute stream's executor, over the device memory itself (Go memory on
// this backend).
type streamReducer struct{ g Collective }

func (r streamReducer) AllReduceOnDevice(s gpu.Stream, v kernels.F32, op collective.Op) error {
	f, ok := hostF32(v)
	if !ok {
		return errors.New("not a CPU-backend buffer")
	}
	return s.Host(func() error { return r.g.AllReduce(context.Background(), f, op) })
}

func (r streamReducer) AllReduceBF16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error {
	return r.on16(s, v, op, r.g.AllReduceBF16)
}

func (r streamReducer) AllReduceFP16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error {
	return r.on16(s, v, op, r.g.AllReduceFP16)
}

// on16 runs reduce over v's 16-bit values in stream order.
func (r streamReducer) on16(s gpu.Stream, v kernels.U8, op collective.Op, reduce func(context.Context, []uint16, collective.Op) error) error {
	b, ok := gpu.HostBytes(v.Buf)
	if !ok {
		return errors.New("not a CPU-backend buffer")
	}
	h := unsafe.Slice((*uint16)(unsafe.Pointer(&b[v.Off])), v.Len/2)
	return s.Host(func() error { return reduce(context.Background(), h, op) })
}

// testGroups starts a collective group of n ranks as goroutines of this process on 127.0.0.1.
func testGroups(t testing.TB, n int) []Collective {
	t.Helper()
	gs := make([]Collective, n)
	for r, g := range grouptest.Groups(t, n) {
		gs[r] = g
	}
	return gs
}

// TestCheckpointPreparedByRankZeroOnly: only rank 0 writes checkpoints, so only rank 0 checks
// their paths and clears Save's stale temporary files; another rank's New, which may run while
// rank 0 saves, leaves rank 0's temporary file alone.
func TestCheckpointPreparedByRankZeroOnly(t *testing.T) {
	gs := testGroups(t, 2)
	dev := openCPU(t)
	dir := t.TempDir()
	ck, best := filepath.Join(dir, "ck.bin"), filepath.Join(dir, "best.bin")
	var saving []string
	for _, path := range []string{ck, best} {
		fh, err := os.CreateTemp(dir, atomicfile.TempPrefix(path)+"*") // rank 0's Save under way
		if err != nil {
			t.Fatal(err)
		}
		fh.Close()
		saving = append(saving, fh.Name())
	}
	cfg := Config{Collective: gs[1], Checkpoint: ck, KeepBest: best, EarlyStop: 1}
	tr, err := New(context.Background(), plainMLP(t), dev, optim.SGD{LR: 0.1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	for _, name := range saving {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("rank 1's New removed rank 0's temporary file: %v", err)
		}
	}
	cfg.Collective = gs[0]
	tr, err = New(context.Background(), plainMLP(t), dev, optim.SGD{LR: 0.1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	for _, name := range saving {
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Errorf("rank 0's New kept a stale temporary file %s (%v)", name, err)
		}
	}
}

// withEmpty is a linear layer and a tensor of no values (a [1 0 4] parameter).
type withEmpty struct {
	FC    *nn.LinearLayer
	Empty *nn.Tensor
}

func (m *withEmpty) Forward(x *nn.Tensor) *nn.Tensor { return m.FC.Forward(nn.Flatten(x)) }

// TestBucketsLaunchInOrder: a tensor of no values is in no bucket (its gradient never comes), and
// buckets that complete out of order are handed over in order, each once the ones before it are
// complete, so that every rank's all-reduces come in the same order.
func TestBucketsLaunchInOrder(t *testing.T) {
	m, err := Net("with-empty", img8, 10, &withEmpty{FC: nn.NewLinear(64, 10, true), Empty: nn.Param([]int{1, 0, 4}, nn.Weight)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(t.Context(), m, openCPU(t), optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	d := newDDP(nil, m, 1) // a bucket per tensor
	if len(d.buckets) != 2 {
		t.Fatalf("%d buckets; want 2 (fc.weight, fc.bias; none for the empty tensor)", len(d.buckets))
	}
	for i, b := range d.buckets {
		if b.grad.Len == 0 || b.params[0].Name == "empty" {
			t.Errorf("bucket %d holds %s with %d gradient values", i, b.params[0].Name, b.grad.Len)
		}
	}
	var got []int
	done := d.hook(func(bi int) error { got = append(got, bi); return nil })
	if err := done(d.buckets[1].params[0]); err != nil || len(got) != 0 {
		t.Fatalf("bucket 1 complete before bucket 0: handed over %v (%v); want none yet", got, err)
	}
	if err := done(d.buckets[0].params[0]); err != nil || !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("then bucket 0: handed over %v (%v); want [0 1]", got, err)
	}
}

// TestDataParallelGradCheckpointing: 2 ranks training resnet8 with gradient checkpointing hold,
// after every step, the bits they hold without it, with the gradients all-reduced in many small
// buckets (whose order follows the backward pass, which recomputes each block) on the host and
// on the device.
func TestDataParallelGradCheckpointing(t *testing.T) {
	const global, steps = 16, 4
	mk := func(tb testing.TB) *Model {
		m, err := NewModel("resnet8", img8, 10)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	for _, o := range []ddpOpts{{bucket: 512}, {bucket: 512, onDevice: true}, {bucket: 512, accumulate: 2}} {
		plain, _ := ddpRun(t, mk, 2, global, steps, o)
		o.ckBlocks = true
		ck, _ := ddpRun(t, mk, 2, global, steps, o)
		for r := range plain {
			for s := range plain[r] {
				for i := range plain[r][s] {
					if !slices.Equal(plain[r][s][i], ck[r][s][i]) {
						t.Fatalf("%+v: rank %d, step %d, tensor %d differs with gradient checkpointing", o, r, s+1, i)
					}
				}
			}
		}
	}
}
