package train

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Collective is the process group data-parallel training runs over: *collective.Group is the one to
// use (collective.Init under torchrun, Slurm or flags). Every rank must make the same calls in the same
// order; the trainer does.
type Collective interface {
	Rank() int
	Size() int
	// AllReduce reduces buf in place across the ranks; every rank ends with the same bits.
	AllReduce(ctx context.Context, buf []float32, op collective.Op) error
	// AllReduceBF16 is AllReduce on bfloat16 values (the gradients of a bf16 run).
	AllReduceBF16(ctx context.Context, buf []uint16, op collective.Op) error
	// AllReduceFP16 is AllReduce on IEEE half values (the gradients of an fp16 run).
	AllReduceFP16(ctx context.Context, buf []uint16, op collective.Op) error
	// Broadcast copies root's buf into every other rank's.
	Broadcast(ctx context.Context, buf []byte, root int) error
	// Agree fails on every rank, naming the values, unless all ranks pass the same value.
	Agree(ctx context.Context, what, value string) error
}

// DeviceReducer all-reduces a tensor over the ranks in device memory, enqueued on s: NCCL's
// all-reduce (collective/nccl's Comm, under the cuda tag, behind a one-method adapter: cmd/stoke has
// one). With Config.DeviceReduce set, a data-parallel step enqueues each bucket's all-reduce
// (collective.Avg) on the compute stream as soon as backward has enqueued the layers that produce it,
// with no copy to the host; the device overlaps them with the rest of the backward pass. A
// synchronized BatchNorm (Config.SyncBatchNorm) sums its statistics with it (collective.Sum). In a bf16
// run the buckets travel as bfloat16 (AllReduceBF16OnDevice, 2 bytes per value of v, collective.Avg),
// in an fp16 run as IEEE half (AllReduceFP16OnDevice, 2 bytes per value, collective.Sum of values
// already divided by the world size).
type DeviceReducer interface {
	AllReduceOnDevice(s gpu.Stream, v kernels.F32, op collective.Op) error
	AllReduceBF16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error
	AllReduceFP16OnDevice(s gpu.Stream, v kernels.U8, op collective.Op) error
}

// defaultBucketBytes is DistributedDataParallel's bucket_cap_mb (25 MiB), and firstBucketBytes
// its first bucket's (1 MiB): small, so that the first all-reduce starts early in the backward pass.
const (
	defaultBucketBytes = 25 << 20
	firstBucketBytes   = 1 << 20
)

// ddp is a trainer's data-parallel state, PyTorch's DistributedDataParallel in its default
// configuration: parameters and buffers broadcast from rank 0 before training, gradients
// averaged over the ranks in buckets, each bucket's all-reduce started as soon as the backward
// pass has completed its gradients and those of the buckets before it (nn.Graph.OnGradient), so
// that communication overlaps the rest of the pass.
//
// A step's buckets are reduced in one fixed order (the order the backward pass completes the
// gradients, found from the model's trace: Model.order; a bucket complete before an earlier one
// waits for it, as PyTorch's Reducer does) by one communication goroutine per step, which the step joins
// before it enqueues the update. Every rank's gradients are then the same bits (the collective
// guarantees it), so the updates, and the weights after them, are the same bits on every rank.
// The model's gradients lie end to end in that order (Model.bind), so a bucket is one range of
// them: one all-reduce, in place where device memory is host memory (the CPU backend), and
// otherwise through host, a staging copy of every gradient.
//
// Training in bf16, the buckets travel as bf16, as DDP's bf16_compress_hook sends them: rounded
// to bfloat16, averaged (each partial sum rounded to bf16, as NCCL and collective do), widened back
// into the fp32 gradients, which the fp32 master weights are updated from: half the bytes.
// Training in fp16 they travel as IEEE half, like DDP's fp16_compress_hook but in another order:
// multiplied by 1/world in fp32 first (the hook rounds to fp16 first and divides in fp16; this way
// values up to 65504*world stay in range and are rounded once), rounded to fp16, summed (each partial sum rounded to fp16), widened back. A sum past 65504 becomes
// Inf, which the loss scaler's check of the gradients, after the all-reduce, finds on every rank
// alike: the step is skipped and the scale halved, as GradScaler does after DDP's all-reduce.
type ddp struct {
	g       Collective
	buckets []bucket
	// bucketOf is each trained tensor's bucket; pending, during a step, counts each bucket's
	// tensors whose gradients the backward pass has yet to complete.
	bucketOf map[*Param]int
	pending  []int
	// host stages the gradients (bucket b in host[b.lo:b.hi]) where they are not host memory;
	// scratch stages a synchronized BatchNorm's sums.
	host, scratch []float32
	// wire is the format the buckets travel in: FP32, or BF16 or FP16, through half on the host
	// route, halfDev (2 bytes per gradient, bucket b at bytes [2*b.lo, 2*b.hi)) on the device
	// route.
	wire    Precision
	half    []uint16
	halfDev kernels.U8
	// dev, if set, reduces on the device (Config.DeviceReduce).
	dev DeviceReducer
	// synced is set once the weights have been broadcast from rank 0 (at the first Fit).
	synced bool
	// comm is the time the all-reduces took, exposed the part of it the steps waited for after
	// their backward pass had run.
	comm, exposed time.Duration
}

// bucket is a run of parameters whose gradients are all-reduced together: elements [lo, hi) of
// the gradients in backward order (grad, once the model is bound).
type bucket struct {
	params []*Param
	lo, hi int
	grad   kernels.F32
}

// newDDP lays the model's gradients out in buckets in the order backward completes them
// (Model.order), closing a bucket at the first tensor past min(1 MiB, capBytes) for the first
// bucket and past capBytes for the others (the last may be smaller).
func newDDP(g Collective, m *Model, capBytes int) *ddp {
	if capBytes <= 0 {
		capBytes = defaultBucketBytes
	}
	d := &ddp{g: g, bucketOf: map[*Param]int{}, wire: FP32}
	var cur bucket
	n := 0
	closeBucket := func() {
		cur.hi = n
		if p := cur.params[0]; p.G.Len > 0 { // bound: the bucket's range of the gradients
			cur.grad = kernels.F32{Buf: p.G.Buf, Off: p.G.Off, Len: cur.hi - cur.lo}
		}
		for _, p := range cur.params {
			d.bucketOf[p] = len(d.buckets)
		}
		d.buckets = append(d.buckets, cur)
		cur = bucket{lo: n}
	}
	for _, p := range m.order {
		if p.frozen || prod(p.Shape) == 0 { // no gradient to reduce (Config.FreezeBackbone), or an empty one
			continue
		}
		cur.params = append(cur.params, p)
		n += prod(p.Shape)
		limit := capBytes
		if len(d.buckets) == 0 {
			limit = min(capBytes, firstBucketBytes)
		}
		if 4*(n-cur.lo) >= limit {
			closeBucket()
		}
	}
	if len(cur.params) > 0 {
		closeBucket()
	}
	d.pending = make([]int, len(d.buckets))
	if len(d.buckets) > 0 {
		if _, inPlace := hostF32(d.buckets[0].grad); !inPlace {
			d.host = make([]float32, n)
		}
	}
	return d
}

// hook returns the backward pass's gradDone for a step: it calls reduce with each bucket, in
// order, once the gradients of all its tensors and of the buckets before it are enqueued, so that
// every rank's all-reduces come in the same order whatever order the pass completes them in.
func (d *ddp) hook(reduce func(bi int) error) func(p *Param) error {
	for i, b := range d.buckets {
		d.pending[i] = len(b.params)
	}
	next := 0 // the first bucket not reduced yet
	return func(p *Param) error {
		bi, ok := d.bucketOf[p]
		if !ok {
			return nil
		}
		d.pending[bi]--
		for ; next < len(d.buckets) && d.pending[next] == 0; next++ {
			if err := reduce(next); err != nil {
				return err
			}
		}
		return nil
	}
}

// reduceAll calls gradDone for every bucket's tensors: a step's gradients all complete (foldAll).
func (d *ddp) reduceAll(gradDone func(p *Param) error) error {
	for _, b := range d.buckets {
		for _, p := range b.params {
			if err := gradDone(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// halfPrecision makes the buckets travel as p (BF16 or FP16), staged on the device (the device
// route) or the host.
func (d *ddp) halfPrecision(m *Model, p Precision) error {
	d.wire = p
	n := 0
	if len(d.buckets) > 0 {
		n = d.buckets[len(d.buckets)-1].hi
	}
	if d.dev == nil {
		d.half = make([]uint16, n)
		return nil
	}
	v, err := m.weights.f32((n + 1) / 2)
	d.halfDev = kernels.U8{Buf: v.Buf, Len: 2 * n}
	return err
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// hostF32 is v's memory where device memory is host memory (the CPU backend's buffers).
func hostF32(v kernels.F32) ([]float32, bool) {
	b, ok := gpu.HostBytes(v.Buf)
	if !ok || v.Len == 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[4*v.Off])), v.Len), true
}

// stepReducer runs one step's collectives through the host on its own goroutine, in the order the
// step hands them over (the same on every rank): the gradient buckets as backward completes them,
// and a synchronized BatchNorm's sums, which the step waits for.
type stepReducer struct {
	d    *ddp
	t    *Trainer
	next chan hostJob
	// synced answers a job that the step waits for (a BatchNorm's sums).
	synced chan error
	done   chan error
	comm   time.Duration // written by the goroutine, read after done
	// grads records that gradient buckets were sent (a batch that only synchronizes BatchNorm,
	// one of an accumulated step but the last, sends none and has nothing to copy back).
	grads bool
}

// hostJob is an all-reduce of buf, once ready has completed: bucket index of the gradients, or
// (bucket -1) a BatchNorm's sums, answered on synced.
type hostJob struct {
	bucket int
	ready  gpu.Event
	buf    []float32
}

// deviceRun is the step's collectives on the device path: each bucket, once complete, is
// averaged on the compute stream, after the kernels that produced it, and a synchronized
// BatchNorm's sums are summed there.
func (d *ddp) deviceRun(s gpu.Stream, r *run, syncBN bool) {
	r.gradDone = d.hook(func(bi int) error {
		b := d.buckets[bi]
		if err := d.reduceOnDevice(s, r.ops, b); err != nil {
			return fmt.Errorf("train: all-reduce of gradient bucket %d (%s ...) on the device: %w", bi, b.params[0].Name, err)
		}
		return nil
	})
	if syncBN {
		r.sync = &syncRun{rank: d.g.Rank(), sum: func(v kernels.F32) error { return d.dev.AllReduceOnDevice(s, v, collective.Sum) }}
	}
}

// reduceOnDevice enqueues the average of bucket b's gradients over the ranks on s.
func (d *ddp) reduceOnDevice(s gpu.Stream, ops kernels.Ops, b bucket) error {
	to, from, reduce, op := ops.ToBF16, ops.FromBF16, d.dev.AllReduceBF16OnDevice, collective.Avg
	switch d.wire {
	case FP32:
		return d.dev.AllReduceOnDevice(s, b.grad, collective.Avg)
	case FP16:
		if err := ops.Scale(s, b.grad, d.preDivide()); err != nil {
			return err
		}
		to, from, reduce, op = ops.ToFP16, ops.FromFP16, d.dev.AllReduceFP16OnDevice, collective.Sum
	}
	half := d.halfDev.Slice(2*b.lo, 2*b.hi)
	if err := to(s, half, b.grad); err != nil {
		return err
	}
	if err := reduce(s, half, op); err != nil {
		return err
	}
	return from(s, b.grad, half)
}

// preDivide is what an fp16 run multiplies its gradients by before it rounds them to fp16: 1/world
// (in fp32, as the device route's Scale multiplies, so that both routes give the same bits).
func (d *ddp) preDivide() float32 { return 1 / float32(d.g.Size()) }

// reduceOnHost averages a bucket's gradients, buf, over the ranks: as fp32, or (bf16, fp16)
// rounded into half and widened back.
func (d *ddp) reduceOnHost(ctx context.Context, buf []float32, half []uint16) error {
	var err error
	switch d.wire {
	case FP32:
		return d.g.AllReduce(ctx, buf, collective.Avg)
	case BF16:
		for i, f := range buf {
			half[i] = collective.F32ToBF16(f)
		}
		if err = d.g.AllReduceBF16(ctx, half, collective.Avg); err == nil {
			for i, h := range half {
				buf[i] = collective.BF16ToF32(h)
			}
		}
	case FP16:
		inv := d.preDivide()
		for i, f := range buf {
			half[i] = collective.F32ToFP16(f * inv)
		}
		if err = d.g.AllReduceFP16(ctx, half, collective.Sum); err == nil {
			for i, h := range half {
				buf[i] = collective.FP16ToF32(h)
			}
		}
	}
	return err
}

// halfOf is bucket b's part of half (nil for fp32).
func (d *ddp) halfOf(b bucket) []uint16 {
	if d.wire == FP32 {
		return nil
	}
	return d.half[b.lo:b.hi]
}

// startStep starts the step's communication goroutine, sets r's hooks to use it, and returns it;
// finish joins it.
func (d *ddp) startStep(ctx context.Context, t *Trainer, r *run, syncBN bool) *stepReducer {
	sr := &stepReducer{d: d, t: t, next: make(chan hostJob, len(d.buckets)+1), synced: make(chan error, 1), done: make(chan error, 1)}
	r.gradDone = d.hook(sr.reduce)
	if syncBN {
		r.sync = &syncRun{rank: d.g.Rank(), sum: sr.sum}
	}
	go func() {
		var err error
		for j := range sr.next {
			if err == nil {
				if err = j.ready.Synchronize(ctx); err == nil {
					if j.bucket < 0 {
						err = d.g.AllReduce(ctx, j.buf, collective.Sum)
					} else {
						t0 := time.Now() // comm counts the gradients' all-reduces (Result.AllReduceSeconds)
						err = d.reduceOnHost(ctx, j.buf, d.halfOf(d.buckets[j.bucket]))
						sr.comm += time.Since(t0)
					}
				}
				if err != nil && j.bucket >= 0 {
					b := d.buckets[j.bucket]
					err = fmt.Errorf("train: all-reduce of gradient bucket %d (%s ...): %w", j.bucket, b.params[0].Name, err)
				} else if err != nil {
					err = fmt.Errorf("train: all-reduce of batch norm sums: %w", err)
				}
			}
			// After an error the jobs are drained; the step fails with the first error.
			if j.bucket < 0 {
				sr.synced <- err
			}
		}
		sr.done <- err
	}()
	return sr
}

// stage returns the host memory job's all-reduce works on for v: v's own where device memory is
// host memory, else buf, with the copy to it enqueued.
func (sr *stepReducer) stage(v kernels.F32, buf []float32) ([]float32, bool, error) {
	if h, ok := hostF32(v); ok {
		return h, true, nil
	}
	return buf, false, sr.t.s.CopyD2H(f32Bytes(buf), v.Buf, 4*v.Off)
}

// reduce hands bucket bi, complete, to the communication goroutine (after its copy to the host,
// where one is needed).
func (sr *stepReducer) reduce(bi int) error {
	b := sr.d.buckets[bi]
	var staging []float32
	if sr.d.host != nil {
		staging = sr.d.host[b.lo:b.hi]
	}
	buf, _, err := sr.stage(b.grad, staging)
	if err != nil {
		return err
	}
	ev, err := sr.t.s.Record()
	if err != nil {
		return err
	}
	sr.next <- hostJob{bi, ev, buf}
	sr.grads = true
	return nil
}

// sum is a synchronized BatchNorm's all-reduce: it waits for the goroutine to sum v (after the
// jobs before it) and enqueues the copy back, where one is needed.
func (sr *stepReducer) sum(v kernels.F32) error {
	if len(sr.d.scratch) < v.Len {
		// The stream has run every copy from the old scratch: each sum waits for its all-reduce,
		// which waits for the stream.
		sr.d.scratch = make([]float32, v.Len)
	}
	buf, inPlace, err := sr.stage(v, sr.d.scratch[:v.Len])
	if err != nil {
		return err
	}
	ev, err := sr.t.s.Record()
	if err != nil {
		return err
	}
	sr.next <- hostJob{-1, ev, buf}
	if err := <-sr.synced; err != nil {
		return err
	}
	if inPlace {
		return nil
	}
	return sr.t.s.CopyH2D(v.Buf, 4*v.Off, f32Bytes(buf))
}

// finish waits for every bucket's all-reduce and enqueues the averaged gradients' copies back to
// the device where they were staged. It must be called once, whatever happened to the step.
func (sr *stepReducer) finish(ctx context.Context, stepErr error) error {
	close(sr.next)
	var err error
	if stepErr == nil {
		// What the step waits for once its backward pass has run is the communication the
		// backward pass did not hide.
		var end gpu.Event
		if end, err = sr.t.s.Record(); err == nil {
			err = end.Synchronize(ctx)
		}
	}
	t0 := time.Now()
	err = errors.Join(err, <-sr.done)
	sr.d.exposed += time.Since(t0)
	sr.d.comm += sr.comm
	if stepErr != nil || err != nil || sr.d.host == nil || !sr.grads {
		return errors.Join(stepErr, err)
	}
	for _, b := range sr.d.buckets {
		if err := sr.t.s.CopyH2D(b.grad.Buf, 4*b.grad.Off, f32Bytes(sr.d.host[b.lo:b.hi])); err != nil {
			return err
		}
	}
	return nil
}

// agreement is one value the ranks of a data-parallel run must share, and the Config fields it
// covers (none for what is not a field: the model, the data).
type agreement struct {
	what   string
	fields []string
	value  string
}

// rankLocalConfig are the Config fields each rank may set alone, and why; every other field is
// covered by an agreement (TestConfigAgreement keeps the lists complete).
var rankLocalConfig = map[string]string{
	"Checkpoint":      "only rank 0 writes it",
	"KeepBest":        "only rank 0 writes it",
	"CheckpointEvery": "only rank 0 writes the checkpoint",
	"Resume":          "rank 0's state is broadcast; the completed epochs and steps are agreed",
	"Progress":        "each rank's own reports",
	"Preprocess":      "what rank 0's checkpoints record of the data; it changes no weight",
	"Collective":      "each rank's own handle of the one group",
	// The gradients with and without are the same, bit for bit: a rank short of memory may
	// checkpoint alone.
	"GradCheckpointing": "it changes the memory a step takes, not its gradients",
}

// agreements lists what the ranks check at start, in order: everything that changes the weights
// (the model, the optimizer and its recipe, the schedule over this run's steps, every setting of
// the loop, the loss, the precision, the freezing, the init file's contents), the run's position,
// and the training data's identity.
func (t *Trainer) agreements(trainData Data) ([]agreement, error) {
	// The model: its identity and a digest of its tensors' names and shapes.
	h := sha256.New()
	for _, p := range t.m.all {
		fmt.Fprintf(h, "%s %v\n", p.Name, p.Shape)
	}
	model := fmt.Sprintf("%d tensors, %d parameters, tensors sha256 %x", len(t.m.all), t.m.NumParams(), h.Sum(nil)[:8])
	if id := t.m.String(); len("model")+len(id)+2+len(model) <= collective.MaxAgree {
		model = id + ", " + model
	} else {
		sum := sha256.Sum256([]byte(id))
		model = fmt.Sprintf("%s... sha256 %x, %s", id[:64], sum[:8], model)
	}
	init := "none"
	switch {
	case t.cfg.Init != "" && t.cfg.Resume != "":
		init = "not read (a resumed run)"
	case t.cfg.Init != "":
		var err error
		if init, err = fileDigest(t.cfg.Init); err != nil {
			return nil, fmt.Errorf("train: data-parallel start: init %s: %w", t.cfg.Init, err)
		}
	}
	cfg := t.cfg
	buckets := 0
	if t.dist != nil {
		buckets = len(t.dist.buckets)
	}
	as := []agreement{
		{"model", nil, model},
		{"optimizer", nil, t.opt.String()},
		{"seed", []string{"Seed"}, fmt.Sprint(cfg.Seed)},
		{"epochs", []string{"Epochs"}, fmt.Sprint(cfg.Epochs)},
		{"schedule", []string{"Schedule"}, t.scheduleDigest(trainData.Steps())},
		{"precision", []string{"Precision"}, string(cfg.Precision)},
		{"label smoothing", []string{"LabelSmoothing"}, fmt.Sprint(cfg.LabelSmoothing)},
		{"loss", []string{"Loss"}, fmt.Sprintf("%+v", cfg.Loss)},
		{"init", []string{"Init", "AllowNonFinite"}, fmt.Sprintf("%s, non-finite allowed %v", init, cfg.AllowNonFinite)},
		{"freezing", []string{"FreezeBackbone", "FreezeUpTo", "BackboneLRScale", "LayerDecay"},
			fmt.Sprintf("backbone %v, up to %q, backbone rate x%g, layer decay %g", cfg.FreezeBackbone, cfg.FreezeUpTo, cfg.BackboneLRScale, cfg.LayerDecay)},
		{"steps per epoch", nil, fmt.Sprint(trainData.Steps())},
		{"completed epochs", nil, fmt.Sprint(t.epochs)},
		{"completed steps", nil, fmt.Sprint(t.step)},
		{"accumulation, clipping, EMA", []string{"Accumulate", "ClipGradNorm", "EMA", "EMAWarmup"},
			fmt.Sprint(t.accumulate(), cfg.ClipGradNorm, cfg.EMA, cfg.EMAWarmup)},
		{"plateau, early stop, max steps", []string{"Plateau", "EarlyStop", "MaxSteps"}, fmt.Sprintf("%+v %d %d", cfg.Plateau, cfg.EarlyStop, cfg.MaxSteps)},
		{"sync batch norm", []string{"SyncBatchNorm"}, fmt.Sprint(cfg.SyncBatchNorm)},
		{"gradient buckets", []string{"BucketBytes", "DeviceReduce"},
			fmt.Sprintf("%d buckets of %d bytes at most, on the device %v", buckets, cfg.BucketBytes, cfg.DeviceReduce != nil)},
	}
	if id, ok := trainData.(interface{ identity() string }); ok {
		as = append(as, agreement{"training data", nil, id.identity()})
	}
	return as, nil
}

// scheduleDigest describes the schedule's factor at every optimizer step of this run (a nominal
// 100 steps per epoch when the data does not say): a few of them, and the digest of all.
func (t *Trainer) scheduleDigest(batches int) string {
	perEpoch := t.optSteps(batches)
	if perEpoch <= 0 {
		perEpoch = 100
	}
	total := t.totalSteps(perEpoch)
	h := sha256.New()
	var b [8]byte
	for s := range total {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(t.cfg.Schedule(s, perEpoch, total)))
		h.Write(b[:])
	}
	var some []string
	for _, s := range []int{0, 1, total / 4, total / 2, 3 * total / 4, total - 1} {
		some = append(some, fmt.Sprintf("%.4g", t.cfg.Schedule(min(max(s, 0), total-1), perEpoch, total)))
	}
	return fmt.Sprintf("x%s at steps 0, 1, 1/4, 1/2, 3/4 and the last of %d; sha256 %x", strings.Join(some, " x"), total, h.Sum(nil)[:8])
}

// fileDigest is the SHA-256 of the file at path, shortened.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("sha256 %x", h.Sum(nil)[:12]), nil
}

// distStart runs before a data-parallel Fit trains: the ranks check that they run the same
// configuration (agreements), and rank 0's weights and buffers (and, on a resumed run, optimizer
// state) are broadcast to the others.
func (t *Trainer) distStart(ctx context.Context, trainData Data) error {
	d := t.dist
	as, err := t.agreements(trainData)
	if err != nil {
		return err
	}
	for _, a := range as {
		if err := d.g.Agree(ctx, a.what, a.value); err != nil {
			return fmt.Errorf("train: data-parallel start: %w", err)
		}
	}
	if d.synced {
		return nil
	}
	var vs []kernels.F32
	for i, p := range t.m.tensors() {
		vs = append(vs, p.W)
		vs = append(vs, t.OptimizerState(p)...)
		if t.hasEMA {
			vs = append(vs, t.ema[i])
		}
	}
	t.m.thaw()
	if err := t.broadcast(ctx, vs); err != nil {
		return fmt.Errorf("train: data-parallel start: broadcast of rank 0's weights: %w", err)
	}
	d.synced = true
	return nil
}

// syncBuffers broadcasts rank 0's BatchNorm running statistics (and their EMA) to every rank,
// before an evaluation or a checkpoint: the ranks' batches differ, and so do their running
// statistics.
// (PyTorch's DDP broadcasts them before every forward pass; rank 0's evolve the same either way,
// and only evaluation reads them.)
func (t *Trainer) syncBuffers(ctx context.Context) error {
	if t.dist == nil || len(t.m.buffers) == 0 {
		return nil
	}
	var vs []kernels.F32
	first := len(t.m.params) + len(t.m.frozen) // the buffers are the last of Model.tensors
	for j, p := range t.m.buffers {
		vs = append(vs, p.W)
		if t.hasEMA {
			vs = append(vs, t.ema[first+j])
		}
	}
	t.m.thaw()
	if err := t.broadcast(ctx, vs); err != nil {
		return fmt.Errorf("train: broadcast of rank 0's running statistics: %w", err)
	}
	return nil
}

// broadcast replaces vs on every rank by rank 0's values.
func (t *Trainer) broadcast(ctx context.Context, vs []kernels.F32) error {
	n := 0
	for _, v := range vs {
		n += v.Len
	}
	host := make([]float32, n)
	off := 0
	for _, v := range vs {
		if err := t.s.CopyD2H(f32Bytes(host[off:off+v.Len]), v.Buf, 4*v.Off); err != nil {
			return err
		}
		off += v.Len
	}
	if err := t.s.Synchronize(ctx); err != nil {
		return err
	}
	if err := t.dist.g.Broadcast(ctx, f32Bytes(host), 0); err != nil {
		return err
	}
	off = 0
	for _, v := range vs {
		if err := t.s.CopyH2D(v.Buf, 4*v.Off, f32Bytes(host[off:off+v.Len])); err != nil {
			return err
		}
		off += v.Len
	}
	return t.s.Synchronize(ctx)
}

// sumOverRanks adds vs up over the ranks (exactly, for counts below 2^24).
func (t *Trainer) sumOverRanks(ctx context.Context, vs ...*float64) error {
	if t.dist == nil {
		return nil
	}
	buf := make([]float32, len(vs))
	for i, v := range vs {
		buf[i] = float32(*v)
	}
	if err := t.dist.g.AllReduce(ctx, buf, collective.Sum); err != nil {
		return err
	}
	for i, v := range vs {
		*v = float64(buf[i])
	}
	return nil
}

// rankSplit is implemented by Data that is one rank's part of a data-parallel split (FromLoader's
// over a Loader with WorldSize above 1).
type rankSplit interface {
	split() (rank, world int)
}

// dataWorld is the world size data is split for (1 when it is not split).
func dataWorld(data Data) int {
	if s, ok := data.(rankSplit); ok {
		_, w := s.split()
		return max(w, 1)
	}
	return 1
}

func dataRank(data Data) int {
	if s, ok := data.(rankSplit); ok {
		r, _ := s.split()
		return r
	}
	return 0
}
