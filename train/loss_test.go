package train

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/optim"
)

// floatData is an in-memory Data source of 1x8x8 images with float targets [n][dim], shuffled
// per epoch.
type floatData struct {
	dev     gpu.Device
	s       gpu.Stream
	images  []uint8
	targets []float32
	dim     int
	kind    TargetKind
	batch   int
	buf     gpu.Buffer
}

var _ Targeted = (*floatData)(nil)

func newFloatData(t testing.TB, dev gpu.Device, images []uint8, targets []float32, dim int, kind TargetKind) *floatData {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	d := &floatData{dev: dev, s: s, images: images, targets: targets, dim: dim, kind: kind, batch: 32}
	t.Cleanup(func() {
		if d.buf != nil {
			d.buf.Free()
		}
		s.Close()
	})
	return d
}

func (d *floatData) TargetKind() TargetKind               { return d.kind }
func (d *floatData) Steps() int                           { return (len(d.images)/64 + d.batch - 1) / d.batch }
func (d *floatData) Normalization() (mean, std []float32) { return []float32{0.3}, []float32{0.3} }

func (d *floatData) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		n := len(d.images) / 64
		order := rng.Epoch(7, epoch).Perm(n)
		host := make([]byte, 64*n+4*n*d.dim)
		tg := unsafe.Slice((*float32)(unsafe.Pointer(&host[64*n])), n*d.dim)
		for k, i := range order {
			copy(host[64*k:], d.images[64*i:64*(i+1)])
			copy(tg[k*d.dim:], d.targets[i*d.dim:(i+1)*d.dim])
		}
		if d.buf != nil {
			d.buf.Free()
		}
		var err error
		if d.buf, err = d.dev.Alloc(len(host)); err == nil {
			if err = d.s.CopyH2D(d.buf, 0, host); err == nil {
				err = d.s.Synchronize(ctx)
			}
		}
		if err != nil {
			yield(Batch{}, err)
			return
		}
		for lo := 0; lo < n; lo += d.batch {
			hi := min(lo+d.batch, n)
			b := Batch{Images: kernels.U8{Buf: d.buf, Off: 64 * lo, Len: 64 * (hi - lo)},
				Targets: kernels.F32{Buf: d.buf, Off: 16*n + lo*d.dim, Len: (hi - lo) * d.dim}, N: hi - lo, Shape: img8}
			if !yield(b, nil) {
				return
			}
		}
	}
}

// multiLabel makes n images with 4 labels, each present with probability 1/2 and lighting a
// 2x2 square of its own over noise: the answer is known, per label.
func multiLabel(n int, seed uint64) ([]uint8, []float32) {
	r := rand.New(rand.NewPCG(seed, 5))
	imgs, tg := make([]uint8, 64*n), make([]float32, 4*n)
	for i := range n {
		img := imgs[64*i : 64*(i+1)]
		for j := range img {
			img[j] = uint8(r.IntN(90))
		}
		for c := range 4 {
			if r.IntN(2) == 0 {
				continue
			}
			tg[4*i+c] = 1
			y, x := (c/2)*4+1, (c%2)*4+1
			for dy := range 2 {
				for dx := range 2 {
					img[(y+dy)*8+x+dx] = 200 + uint8(r.IntN(56))
				}
			}
		}
	}
	return imgs, tg
}

// brightness makes n noise images whose 2 targets are the mean pixel of the left and the right
// half, on the [0,1] scale: a linear function of the pixels.
func brightness(n int, seed uint64) ([]uint8, []float32) {
	r := rand.New(rand.NewPCG(seed, 6))
	imgs, tg := make([]uint8, 64*n), make([]float32, 2*n)
	for i := range n {
		lo, hi := r.IntN(128), 128+r.IntN(128)
		for j := range 64 {
			imgs[64*i+j] = uint8(lo + r.IntN(hi-lo))
			tg[2*i+j%8/4] += float32(imgs[64*i+j]) / 255 / 32
		}
	}
	return imgs, tg
}

// TestMultiLabel: on MultiHot targets the trainer picks BCEWithLogits (Auto) and a small CNN
// learns every label: macro F1 and mAP above 0.95 on held-out images; pos_weight trains too.
func TestMultiLabel(t *testing.T) {
	dev := openCPU(t)
	imgs, tg := multiLabel(1500, 1)
	timgs, ttg := multiLabel(400, 2)
	train, test := newFloatData(t, dev, imgs, tg, 4, MultiHot), newFloatData(t, dev, timgs, ttg, 4, MultiHot)
	for _, loss := range []Loss{{}, {Kind: BCEWithLogits, PosWeight: []float32{2, 1, 1, 0.5}}} {
		m, err := tSequential("ml", img8, 4, tConv(1, 8, 3, 1), tReLU(), tMaxPool(2), tFlatten(), tLinear(128, 4))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Epochs: 3, Seed: 1, Loss: loss})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Fit(t.Context(), train, test)
		if err != nil {
			t.Fatal(err)
		}
		met, err := tr.Metrics(t.Context(), test)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: loss %.6f, F1 %.3f, mAP %.3f", tr.loss.Kind, res.FinalLoss, met.F1, met.MAP)
		if tr.loss.Kind != BCEWithLogits || res.TestAcc != met.F1 || met.F1 < 0.95 || met.MAP < 0.95 {
			t.Errorf("%+v: loss %v, F1 %.3f (Fit's %.3f), mAP %.3f; want BCEWithLogits and both above 0.95", loss, tr.loss.Kind, met.F1, res.TestAcc, met.MAP)
		}
	}
}

// TestSoftLabels: Vector targets holding label-smoothed class distributions train with
// SoftCrossEntropy to the accuracy class ids reach, and Evaluate reports that accuracy.
func TestSoftLabels(t *testing.T) {
	dev := openCPU(t)
	soft := func(labels []int32) []float32 {
		out := make([]float32, 10*len(labels))
		for i, l := range labels {
			for j := range 10 {
				out[10*i+j] = 0.01
			}
			out[10*i+int(l)] = 0.91
		}
		return out
	}
	imgs, labels := synthetic(1000, 1)
	timgs, tlabels := synthetic(300, 2)
	train, test := newFloatData(t, dev, imgs, soft(labels), 10, Vector), newFloatData(t, dev, timgs, soft(tlabels), 10, Vector)
	m, err := tSequential("soft", img8, 10, tFlatten(), tLinear(64, 32), tReLU(), tLinear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 1, Loss: Loss{Kind: SoftCrossEntropy}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Fit(t.Context(), train, test)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("soft labels: test accuracy %.3f", res.TestAcc)
	if res.TestAcc < 0.9 {
		t.Errorf("test accuracy %.3f with soft labels; want >= 0.9", res.TestAcc)
	}
}

// TestRegression: on Vector targets the trainer picks MSE (Auto) and a linear model learns the
// halves' brightness to a test MSE below 2% of the targets' variance; SmoothL1 gets there too; a
// class loss for vectors is refused.
func TestRegression(t *testing.T) {
	dev := openCPU(t)
	imgs, tg := brightness(1500, 1)
	timgs, ttg := brightness(400, 2)
	train, test := newFloatData(t, dev, imgs, tg, 2, Vector), newFloatData(t, dev, timgs, ttg, 2, Vector)
	var mean, variance float64
	for _, v := range ttg {
		mean += float64(v) / float64(len(ttg))
	}
	for _, v := range ttg {
		variance += (float64(v) - mean) * (float64(v) - mean) / float64(len(ttg))
	}
	for _, loss := range []Loss{{}, {Kind: SmoothL1, Beta: 0.1}} {
		m, err := tSequential("reg", img8, 2, tFlatten(), tLinear(64, 2))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(context.Background(), m, dev, optim.AdamW{LR: 0.02}, Config{Epochs: 8, Seed: 1, Loss: loss})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Fit(t.Context(), train, test)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: test MSE %.5f, targets' variance %.5f", tr.loss.Kind, res.TestAcc, variance)
		if want := map[LossKind]LossKind{Auto: MSE, SmoothL1: SmoothL1}[loss.Kind]; tr.loss.Kind != want || !(res.TestAcc < 0.02*variance) {
			t.Errorf("%+v: loss %v, test MSE %.5f; want %v and below %.5f", loss, tr.loss.Kind, res.TestAcc, want, 0.02*variance)
		}
	}
	m, _ := tSequential("reg", img8, 2, tFlatten(), tLinear(64, 2))
	tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.01}, Config{Loss: Loss{Kind: CrossEntropy}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(t.Context(), train, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("cross-entropy on vectors: %v; want ErrConfig", err)
	}
}
