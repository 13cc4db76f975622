package train

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/stoke-ml/stoke/dist"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Collective is the process group data-parallel training runs over: *dist.Group is the one to
// use (dist.Init under torchrun, Slurm or flags). Every rank must make the same calls in the same
// order; the trainer does.
type Collective interface {
	Rank() int
	Size() int
	// AllReduce reduces buf in place across the ranks; every rank ends with the same bits.
	AllReduce(ctx context.Context, buf []float32, op dist.Op) error
	// Broadcast copies root's buf into every other rank's.
	Broadcast(ctx context.Context, buf []byte, root int) error
	// Agree fails on every rank, naming the values, unless all ranks pass the same value.
	Agree(ctx context.Context, what, value string) error
}

// DeviceReducer averages a tensor over the ranks in device memory, enqueued on s: NCCL's
// all-reduce (dist/nccl's Comm, under the cuda tag, behind a one-method adapter: cmd/stoke has
// one). With Config.DeviceReduce set, a data-parallel step enqueues each bucket's all-reduces on
// the compute stream as soon as backward has enqueued the layers that produce it, with no copy to
// the host; the device overlaps them with the rest of the backward pass.
type DeviceReducer interface {
	AverageOnDevice(s gpu.Stream, v kernels.F32) error
}

// defaultBucketBytes is DistributedDataParallel's bucket_cap_mb (25 MiB), and firstBucketBytes
// its first bucket's (1 MiB): small, so that the first all-reduce starts early in the backward pass.
const (
	defaultBucketBytes = 25 << 20
	firstBucketBytes   = 1 << 20
)

// ddp is a trainer's data-parallel state, PyTorch's DistributedDataParallel in its default
// configuration: parameters and buffers broadcast from rank 0 before training, gradients
// averaged over the ranks in buckets, each bucket's all-reduce started as soon as the layers that
// produce it have finished their backward pass, so that communication overlaps the rest of it.
//
// A step's buckets are reduced in one fixed order (the reverse of the parameters' order, which is
// the order backward produces them) by one communication goroutine per step, which the step joins
// before it enqueues the update. Every rank's gradients are then the same bits (the collective
// guarantees it), so the updates, and the weights after them, are the same bits on every rank.
type ddp struct {
	g       Collective
	buckets []bucket
	// afterLayer[i] lists the buckets complete once layer i's backward has been enqueued.
	afterLayer map[int][]int
	// host stages every gradient, bucket after bucket: copied from the device, all-reduced, copied
	// back.
	host []float32
	// dev, if set, reduces on the device (Config.DeviceReduce).
	dev DeviceReducer
	// synced is set once the weights have been broadcast from rank 0 (at the first Fit).
	synced bool
	// comm is the time the all-reduces took, exposed the part of it the steps waited for after
	// their backward pass had run.
	comm, exposed time.Duration
}

// bucket is a run of parameters whose gradients are all-reduced together: host[lo:hi].
type bucket struct {
	params []*Param
	lo, hi int
}

// newDDP lays the model's gradients out in buckets in the order backward produces them, closing a
// bucket at the first layer boundary past min(1 MiB, capBytes) for the first bucket and past
// capBytes for the others (the last may be smaller).
func newDDP(g Collective, m *Model, capBytes int) *ddp {
	if capBytes <= 0 {
		capBytes = defaultBucketBytes
	}
	d := &ddp{g: g, afterLayer: map[int][]int{}}
	var cur bucket
	n, last := 0, -1 // last: the layer that added cur's latest parameters
	closeBucket := func() {
		cur.hi = n
		d.afterLayer[last] = append(d.afterLayer[last], len(d.buckets))
		d.buckets = append(d.buckets, cur)
		cur = bucket{lo: n}
	}
	for k := len(m.order) - 1; k >= 0; k-- {
		i := m.order[k]
		for _, p := range m.layerParams[i] {
			if p.buffer() || p.frozen { // frozen: no gradient to reduce (Config.FreezeBackbone)
				continue
			}
			cur.params = append(cur.params, p)
			n += prod(p.Shape)
			last = i
		}
		limit := capBytes
		if len(d.buckets) == 0 {
			limit = min(capBytes, firstBucketBytes)
		}
		if len(cur.params) > 0 && 4*(n-cur.lo) >= limit {
			closeBucket()
		}
	}
	if len(cur.params) > 0 {
		closeBucket()
	}
	d.host = make([]float32, n)
	return d
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// stepReducer all-reduces one step's buckets on its own goroutine as backward hands them over.
type stepReducer struct {
	d    *ddp
	t    *Trainer
	next chan readyBucket
	done chan error
	comm time.Duration // written by the goroutine, read after done
}

// readyBucket is a bucket whose gradients are on their way to the host: ready completes once
// they are there.
type readyBucket struct {
	index int
	ready gpu.Event
}

// deviceLayerDone is backward's hook on the device path: the buckets layer i completes are
// all-reduced on the compute stream, after the kernels that produced them.
func (d *ddp) deviceLayerDone(s gpu.Stream) func(int) error {
	return func(i int) error {
		for _, bi := range d.afterLayer[i] {
			for _, p := range d.buckets[bi].params {
				if err := d.dev.AverageOnDevice(s, p.G); err != nil {
					return fmt.Errorf("train: all-reduce of %s on the device: %w", p.Name, err)
				}
			}
		}
		return nil
	}
}

// startStep starts the step's communication goroutine; finish joins it.
func (d *ddp) startStep(ctx context.Context, t *Trainer) *stepReducer {
	sr := &stepReducer{d: d, t: t, next: make(chan readyBucket, len(d.buckets)), done: make(chan error, 1)}
	go func() {
		var err error
		for rb := range sr.next {
			if err != nil {
				continue // drain: the step fails with the first error
			}
			bi, b := rb.index, d.buckets[rb.index]
			if err = rb.ready.Synchronize(ctx); err != nil {
				continue
			}
			t0 := time.Now()
			err = d.g.AllReduce(ctx, d.host[b.lo:b.hi], dist.Avg)
			sr.comm += time.Since(t0)
			if err != nil {
				err = fmt.Errorf("train: all-reduce of gradient bucket %d (%s ...): %w", bi, b.params[0].Name, err)
			}
		}
		sr.done <- err
	}()
	return sr
}

// layerDone is backward's hook: once layer i's backward is enqueued, the buckets it completes are
// copied to the host and handed to the communication goroutine.
func (sr *stepReducer) layerDone(i int) error {
	for _, bi := range sr.d.afterLayer[i] {
		b := sr.d.buckets[bi]
		off := b.lo
		for _, p := range b.params {
			if err := sr.t.s.CopyD2H(f32Bytes(sr.d.host[off:off+p.Len()]), p.G.Buf, 4*p.G.Off); err != nil {
				return err
			}
			off += p.Len()
		}
		ev, err := sr.t.s.Record()
		if err != nil {
			return err
		}
		sr.next <- readyBucket{bi, ev}
	}
	return nil
}

// finish waits for every bucket's all-reduce and enqueues the averaged gradients' copies back to
// the device. It must be called once, whatever happened to the step.
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
	if stepErr != nil || err != nil {
		return errors.Join(stepErr, err)
	}
	for _, b := range sr.d.buckets {
		off := b.lo
		for _, p := range b.params {
			if err := sr.t.s.CopyH2D(p.G.Buf, 4*p.G.Off, f32Bytes(sr.d.host[off:off+p.Len()])); err != nil {
				return err
			}
			off += p.Len()
		}
	}
	return nil
}

// distStart runs before a data-parallel Fit trains: the ranks check that they run the same
// configuration, and rank 0's weights and buffers (and, on a resumed run, optimizer state) are
// broadcast to the others.
func (t *Trainer) distStart(ctx context.Context, trainData Data) error {
	d := t.dist
	checks := []struct{ what, value string }{
		{"model", t.m.String()},
		{"optimizer", t.opt.String()},
		{"seed", fmt.Sprint(t.seed)},
		{"epochs", fmt.Sprint(t.cfg.Epochs)},
		{"precision", string(t.cfg.Precision)},
		{"label smoothing", fmt.Sprint(t.cfg.LabelSmoothing)},
		{"steps per epoch", fmt.Sprint(trainData.Steps())},
		{"completed epochs", fmt.Sprint(t.epochs)},
		{"completed steps", fmt.Sprint(t.step)},
		{"accumulation, clipping, EMA", fmt.Sprint(t.accumulate(), t.cfg.ClipGradNorm, t.cfg.EMA, t.cfg.EMAWarmup)},
		{"plateau, early stop", fmt.Sprintf("%+v %d", t.cfg.Plateau, t.cfg.EarlyStop)},
	}
	if id, ok := trainData.(interface{ identity() string }); ok {
		checks = append(checks, struct{ what, value string }{"training data", id.identity()})
	}
	for _, c := range checks {
		if err := d.g.Agree(ctx, c.what, c.value); err != nil {
			return fmt.Errorf("train: data-parallel start: %w", err)
		}
	}
	if d.synced {
		return nil
	}
	var vs []kernels.F32
	for _, p := range t.m.tensors() {
		vs = append(vs, p.W)
		vs = append(vs, p.slots...)
		if t.hasEMA {
			vs = append(vs, p.ema)
		}
	}
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
	for _, p := range t.m.buffers {
		vs = append(vs, p.W)
		if t.hasEMA {
			vs = append(vs, p.ema)
		}
	}
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
	if err := t.dist.g.AllReduce(ctx, buf, dist.Sum); err != nil {
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
