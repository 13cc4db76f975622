package loaders

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/pipeline"
)

// slotBatch is one batch being filled in a host slot.
type slotBatch struct {
	seq  int
	slot pinned.Slot
	mem  []byte
	// read and buffer are a stream reader's position after the batch's last sample (see State).
	read   int
	buffer []int
}

// job is one sample to load into its place in a slot.
type job struct {
	sb    *slotBatch
	pos   int
	index int     // dataset index, or position in a stream
	smp   *Sample // the sample, read already from a stream; nil for a dataset
}

// result is a loaded sample; err is set when the Skip policy let a bad sample through. With a
// device decode, kind is the sample's (kindRecord or kindPixels) and n its bytes in its place.
type result struct {
	job
	err  error
	kind int
	n    int
}

// epochRun is the state of one epoch's iteration.
type epochRun struct {
	l       *Loader
	epoch   int
	indices []int // this rank's indices (dataset loader)
	k       int   // next entry of indices to issue
	limit   int   // entries of indices the epoch issues
	stream  *streamReader
	next    int // next batch to issue

	// cur and pos belong to the source goroutine.
	cur *slotBatch
	pos int
	// skipped counts this epoch's skipped samples; it belongs to the copy stage, which sees them
	// in order.
	skipped int

	mu       sync.Mutex
	open     map[*slotBatch]bool       // slots acquired and not yet handed to the feeder
	produced map[*gpu.DeviceBatch]bool // batches on the device not yet yielded
}

// Epoch returns the batches of epoch, in order. It starts at batch 0, or where Restore said. The
// iteration stops at the first error (which names the sample and its cause: see SampleError),
// when ctx ends, or when the loop breaks; every goroutine it started has exited when it returns.
// Release every batch.
func (l *Loader) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return func(userYield func(*Batch, error) bool) {
		yield := func(b *Batch, err error) bool { return userYield(b, closedErr(err)) }
		start, from, err := l.begin(epoch)
		if err != nil {
			yield(nil, err)
			return
		}
		e := &epochRun{l: l, epoch: epoch, next: start, open: map[*slotBatch]bool{}, produced: map[*gpu.DeviceBatch]bool{}}
		finished := false
		defer func() {
			// The consumer's loop panicked (the pipeline has stopped: pipeline.Iter waits for it):
			// give back what the epoch holds, so that the Loader is not left busy.
			if !finished {
				e.finish(ctx, false)
			}
		}()
		completed := false
		if err := e.prepare(ctx, start, from); err != nil {
			yield(nil, err)
		} else {
			completed = e.run(ctx, yield)
		}
		finished = true
		if err := e.finish(ctx, completed); err != nil {
			yield(nil, err)
		}
	}
}

// finish ends an epoch whose pipeline has stopped: it closes the stream, gives back the slots and
// batches the pipeline held (the feeder returns the slots of enqueued copies once they complete),
// waits for the copies, and frees the Loader for the next epoch, at the next position when the
// epoch completed. It returns the error to report, if the epoch completed.
func (e *epochRun) finish(ctx context.Context, completed bool) error {
	l := e.l
	var failed error
	if e.stream != nil {
		if err := e.stream.close(); err != nil && completed {
			completed, failed = false, err
		}
	}
	var errs []error
	for sb := range e.open {
		errs = append(errs, sb.slot.Release())
	}
	for db := range e.produced {
		errs = append(errs, db.Release())
	}
	// Every copy the epoch made is accounted (and traced) before its iterator returns, so that
	// Stats read then are complete. A context that ended stops the wait, not the copies.
	if err := l.feeder.Flush(ctx); err != nil && ctx.Err() == nil {
		errs = append(errs, err)
	}
	l.mu.Lock()
	l.running = false
	l.stages = l.pl.Stats()
	l.pl = nil
	l.stats.Elapsed += time.Since(l.epochStart)
	if completed {
		l.state = l.position(e.epoch+1, 0)
	}
	l.mu.Unlock()
	if failed != nil {
		return failed
	}
	if err := errors.Join(errs...); err != nil && completed {
		return fmt.Errorf("loaders: %s epoch %d: %w", l.info.Name, e.epoch, err)
	}
	return nil
}

func (l *Loader) begin(epoch int) (start int, from State, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return 0, from, fmt.Errorf("loaders: epoch %d: %w", epoch, ErrClosed)
	case l.running:
		return 0, from, fmt.Errorf("loaders: epoch %d: %w", epoch, ErrBusy)
	}
	if l.restored && l.state.Epoch == epoch {
		start, from = l.state.Batch, l.state
	}
	l.restored = false
	l.running = true
	l.epochStart = time.Now()
	l.pl = pipeline.New(pipeline.WithTracer(l.cfg.Tracer))
	return start, from, nil
}

// prepare computes this rank's indices for a dataset, or opens the stream and reads it up to the
// restored position from.
func (e *epochRun) prepare(ctx context.Context, start int, from State) error {
	l := e.l
	if l.src != nil {
		e.stream = l.newStreamReader(e.epoch)
		if start == 0 {
			return nil
		}
		return e.stream.restore(ctx, from)
	}
	if l.split.ranks != nil {
		e.indices = l.split.indices(l.cfg.Rank, l.cfg.Shuffle, l.cfg.Seed, e.epoch)
	} else {
		order := l.sampler.Indices(l.cfg.Seed, e.epoch)
		if len(order) != l.sampler.Len() {
			return fmt.Errorf("loaders: %s epoch %d: the sampler gave %d indices; its Len is %d: %w", l.info.Name, e.epoch, len(order), l.sampler.Len(), ErrConfig)
		}
		for _, i := range order {
			if err := CheckIndex(l.info.Name, i, l.ds.Len()); err != nil {
				return fmt.Errorf("loaders: epoch %d: sampler: %w", e.epoch, err)
			}
		}
		e.indices = rankPart(order, l.cfg.Rank, max(l.cfg.WorldSize, 1))
	}
	e.k, e.limit = start*l.cfg.Batch, min(l.BatchesPerEpoch()*l.cfg.Batch, len(e.indices))
	if p, ok := l.ds.(ReadPlanner); ok {
		p.PlanReads(e.indices[min(e.k, e.limit):e.limit])
	}
	return nil
}

// run builds and iterates the epoch's pipeline; it reports whether the epoch ran to its end.
func (e *epochRun) run(ctx context.Context, yield func(*Batch, error) bool) bool {
	l := e.l
	p := l.pl
	src := pipeline.FromFunc(p, SamplerStage, e.issue)
	loaded := pipeline.Map(p, TransformStage, src, e.load, pipeline.Workers(l.cfg.Workers), pipeline.Ordered(true))
	batches := pipeline.Batch(p, CollateStage, loaded, l.cfg.Batch)
	copied := pipeline.Map(p, FeedStage, batches, e.copyBatch, pipeline.Ordered(true), pipeline.Buffer(l.cfg.Prefetch))
	waitFrom := time.Now()
	yielded := 0
	for b, err := range pipeline.Iter(ctx, p, copied) {
		if err != nil {
			yield(nil, cause(err))
			return false
		}
		if b == nil { // every sample of the batch was skipped
			continue
		}
		// The consumer's stream waits for the copy, enqueued from the consumer's goroutine so that
		// it lands after the work the consumer queued for the previous batch.
		var err error
		if l.cfg.Stream != nil {
			err = b.dev.Deliver()
		} else {
			err = b.Ready.Synchronize(ctx)
		}
		if err != nil {
			yield(nil, fmt.Errorf("loaders: %s epoch %d batch %d: copy: %w", l.info.Name, e.epoch, b.Seq, err))
			return false
		}
		e.mu.Lock()
		delete(e.produced, b.dev)
		e.mu.Unlock()
		l.mu.Lock()
		l.held++
		l.state = l.position(e.epoch, b.Seq+1)
		l.state.Read, l.state.Buffer = b.read, b.buffer
		l.stats.Batches++
		l.stats.Samples += int64(b.N)
		waited := time.Since(waitFrom)
		l.stats.Wait += waited
		l.mu.Unlock()
		yielded++
		if !yield(b, nil) {
			return false
		}
		waitFrom = time.Now()
	}
	if ctx.Err() != nil {
		return false
	}
	if yielded == 0 && e.skipped > 0 {
		// However large MaxSkipped is, an epoch of nothing but bad samples is no epoch.
		l.mu.Lock()
		last := l.stats.LastSkipped
		l.mu.Unlock()
		yield(nil, fmt.Errorf("loaders: %s epoch %d: every one of its %d samples was skipped: %w (last: %w)",
			l.info.Name, e.epoch, e.skipped, ErrTooManySkipped, last))
		return false
	}
	return true
}

// cause unwraps a pipeline error down to the sample error when there is one, or a stream's error
// (which names the stream and the position), so that the message leads with the dataset and the
// sample rather than the stage and item number.
func cause(err error) error {
	var ps *pipeline.StageError
	var se *SampleError
	if errors.As(err, &ps) && (errors.As(ps.Err, &se) || errors.Is(ps.Err, ErrTooManySkipped) || ps.Stage == SamplerStage) {
		return ps.Err
	}
	return err
}

// issue is the source: it hands out the epoch's samples in order (a stream's are read here, on this
// one goroutine), acquiring a host slot for each batch before its first sample (the pool's size is
// the pipeline's backpressure).
func (e *epochRun) issue(ctx context.Context) (job, bool, error) {
	l := e.l
	if e.stream != nil {
		if ok, err := e.stream.peek(ctx); !ok || err != nil {
			return job{}, false, err
		}
	} else if e.k >= e.limit {
		return job{}, false, nil
	}
	if e.cur == nil || e.pos == l.cfg.Batch {
		// Waiting for a free slot is waiting for downstream to hand one back, not the sampler's work.
		t := time.Now()
		slot, err := l.pool.Acquire(ctx)
		pipeline.Blocked(ctx, time.Since(t))
		if err != nil {
			return job{}, false, err
		}
		e.cur = &slotBatch{seq: e.next, slot: slot, mem: slot.Bytes()}
		e.pos = 0
		e.next++
		e.mu.Lock()
		e.open[e.cur] = true
		e.mu.Unlock()
	}
	j := job{sb: e.cur, pos: e.pos}
	e.pos++
	if e.stream == nil {
		j.index = e.indices[e.k]
		e.k++
		return j, true, nil
	}
	it := e.stream.take()
	j.index, j.smp = it.ord, &it.s
	// The state after this batch is the reader's position after its last sample: this one when it
	// fills the batch or ends the stream.
	last := e.pos == l.cfg.Batch
	if !last {
		more, err := e.stream.peek(ctx)
		if err != nil {
			return job{}, false, err
		}
		last = !more
	}
	if last {
		e.cur.read, e.cur.buffer = e.stream.snapshot()
	}
	return j, true, nil
}

// load reads, decodes and augments one sample into its place in the slot.
func (e *epochRun) load(ctx context.Context, j job) (result, error) {
	defer e.l.stopHostCPU(startHostCPU())
	return e.loadSample(ctx, j)
}

func (e *epochRun) loadSample(ctx context.Context, j job) (result, error) {
	l := e.l
	w := pipeline.WorkerIndex(ctx)
	ws := &l.workers[w]
	i := j.index
	var s Sample
	var err error
	if j.smp != nil {
		s = *j.smp
	} else {
		start := time.Now()
		s, err = l.ds.Sample(ctx, i)
		end := time.Now()
		l.read.Add(int64(end.Sub(start)))
		if tr := l.cfg.Tracer; tr != nil {
			tr.Span(ReadStage, w, int64(i), start, end)
		}
	}
	kind, n := kindPixels, l.sample
	if err == nil {
		tgt := j.sb.mem[l.labOff+l.tsize*j.pos : l.labOff+l.tsize*(j.pos+1)]
		if err = l.cfg.Target.Put(tgt, s); err == nil {
			ws.r.Reset(l.cfg.Seed, e.epoch, i)
			dst := j.sb.mem[j.pos*l.sample : (j.pos+1)*l.sample]
			if l.dd != nil {
				kind, n, err = l.applyDevice(ws, dst, s.Input, e.epoch, i)
			} else {
				err = ws.w.Apply(dst, s.Input, ws.r.Rand)
			}
		}
		if err != nil {
			err = &SampleError{l.info.Name, i, s.Key, err}
		}
	} else if ctx.Err() != nil {
		return result{}, ctx.Err()
	}
	if err != nil {
		var se *SampleError
		if !errors.As(err, &se) {
			err = &SampleError{l.info.Name, i, s.Key, err}
		}
		// A sample that the store failed to deliver is an outage, not a bad sample: skipping it
		// would make a partial run look complete.
		if l.cfg.OnError == FailFast || errors.Is(err, ErrStorage) {
			return result{}, err
		}
		return result{job: j, err: err}, nil
	}
	return result{job: j, kind: kind, n: n}, nil
}

// copyBatch takes a full slot, counts and compacts away skipped samples, and hands the slot to the
// feeder, which copies it into a free set of device buffers. It returns nil when nothing is left of
// the batch.
func (e *epochRun) copyBatch(ctx context.Context, rs []result) (*Batch, error) {
	defer e.l.stopHostCPU(startHostCPU())
	l := e.l
	sb := rs[0].sb
	b := &Batch{Shape: l.shape, Epoch: e.epoch, Seq: sb.seq, l: l, Indices: make([]int, 0, len(rs)), read: sb.read, buffer: sb.buffer}
	if e.stream != nil && l.cfg.DropLast && len(rs) < l.cfg.Batch {
		// The stream's short last batch: its length was known only once it was read.
		e.releaseOpen(sb)
		return nil, sb.slot.Release()
	}
	kept := rs[:0:0]
	for _, r := range rs {
		if r.sb != sb {
			return nil, fmt.Errorf("loaders: internal error: batch %d mixes slots", sb.seq)
		}
		if r.err != nil {
			e.skipped++
			l.mu.Lock()
			l.stats.Skipped++
			l.stats.LastSkipped = r.err
			l.mu.Unlock()
			if l.cfg.MaxSkipped > 0 && e.skipped > l.cfg.MaxSkipped {
				return nil, fmt.Errorf("loaders: %s epoch %d: %d samples skipped, more than %d: %w (last: %w)",
					l.info.Name, e.epoch, e.skipped, l.cfg.MaxSkipped, ErrTooManySkipped, r.err)
			}
			continue
		}
		if k := len(b.Indices); k != r.pos {
			if l.dd == nil { // packDevice moves a device decode's samples
				copy(sb.mem[k*l.sample:(k+1)*l.sample], sb.mem[r.pos*l.sample:(r.pos+1)*l.sample])
			}
			copy(sb.mem[l.labOff+l.tsize*k:l.labOff+l.tsize*(k+1)], sb.mem[l.labOff+l.tsize*r.pos:])
		}
		b.Indices = append(b.Indices, r.index)
		if l.dd != nil {
			kept = append(kept, r)
		}
	}
	b.N = len(b.Indices)
	if b.N == 0 {
		e.releaseOpen(sb)
		return nil, sb.slot.Release()
	}
	if l.cfg.Mix.Enabled() {
		m := l.cfg.Mix
		m.Seed = mixSeed(l.cfg)
		var err error
		if b.Mix, err = m.Apply(sb.mem[:b.N*l.sample], b.N, l.shape, e.epoch, sb.seq); err != nil {
			e.releaseOpen(sb)
			return nil, errors.Join(fmt.Errorf("loaders: %s epoch %d batch %d: %w", l.info.Name, e.epoch, sb.seq, err), sb.slot.Release())
		}
	}
	if l.cfg.Collate != nil {
		hb := &HostBatch{Images: sb.mem[:b.N*l.sample], Targets: sb.mem[l.labOff : l.labOff+b.N*l.tsize], N: b.N,
			Shape: l.shape, Indices: b.Indices, Epoch: e.epoch, Seq: sb.seq}
		if err := l.cfg.Collate(hb); err != nil {
			e.releaseOpen(sb)
			return nil, errors.Join(fmt.Errorf("loaders: %s epoch %d batch %d: collate: %w", l.info.Name, e.epoch, sb.seq, err), sb.slot.Release())
		}
	}
	e.releaseOpen(sb) // the feeder takes the slot over, whatever the outcome
	l.fed(sb.seq)
	if l.dd != nil {
		return e.feedDevice(ctx, b, sb, kept)
	}
	db, err := l.feeder.Feed(ctx, sb.slot, gpu.Region{Off: 0, Len: b.N * l.sample}, gpu.Region{Off: l.labOff, Len: l.tsize * b.N})
	if err != nil {
		return nil, fmt.Errorf("loaders: %s epoch %d batch %d: %w", l.info.Name, e.epoch, sb.seq, err)
	}
	e.mu.Lock()
	e.produced[db] = true
	e.mu.Unlock()
	b.dev, b.Images, b.Labels, b.Ready = db, db.Buffers[0], db.Buffers[1], db.Ready
	return b, nil
}

// feedDevice packs a device decode's batch (the kept samples' results, in order), copies it and
// enqueues its rendering into the batch's images.
func (e *epochRun) feedDevice(ctx context.Context, b *Batch, sb *slotBatch, kept []result) (*Batch, error) {
	l := e.l
	used := l.packDevice(sb.mem, kept)
	records, bytes := 0, 0
	for _, r := range kept {
		if r.kind == kindRecord {
			records++
			bytes += r.n
		}
	}
	db, err := l.feeder.Feed(ctx, sb.slot, gpu.Region{Off: 0, Len: used}, gpu.Region{Off: l.offOff, Len: 8 * b.N},
		gpu.Region{Off: l.labOff, Len: l.tsize * b.N}, gpu.Region{})
	if err != nil {
		return nil, fmt.Errorf("loaders: %s epoch %d batch %d: %w", l.info.Name, e.epoch, sb.seq, err)
	}
	e.mu.Lock()
	e.produced[db] = true
	e.mu.Unlock()
	b.dev, b.Images, b.Labels = db, db.Buffers[3], db.Buffers[2]
	if b.Ready, err = l.render(db, b.N); err != nil {
		return nil, fmt.Errorf("loaders: %s epoch %d batch %d: device decode: %w", l.info.Name, e.epoch, sb.seq, err)
	}
	db.Ready = b.Ready // what Deliver has the consumer's stream wait for: the images, not the copy

	l.mu.Lock()
	l.stats.DeviceDecoded += int64(records)
	l.stats.HostPath += int64(b.N - records)
	l.stats.RecordBytes += int64(bytes)
	l.mu.Unlock()
	return b, nil
}

func (e *epochRun) releaseOpen(sb *slotBatch) {
	e.mu.Lock()
	delete(e.open, sb)
	e.mu.Unlock()
}

// mixSeed is the seed of cfg.Mix's draws on cfg.Rank: a function of (Seed, Mix.Seed, Rank), so
// that the ranks of a data-parallel run, which share Seed, mix each batch differently (as each
// torch DDP process draws from its own stream) and a run stays repeatable; rank 0's, a single
// process's, is the seed of a loader without ranks.
func mixSeed(cfg Config) uint64 {
	if cfg.Rank == 0 {
		return rng.Mix(cfg.Seed, cfg.Mix.Seed)
	}
	return rng.Mix(cfg.Seed, cfg.Mix.Seed, uint64(cfg.Rank))
}
