package loaders

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/pipeline"
)

// slotBatch is one batch being filled in a host slot.
type slotBatch struct {
	seq     int
	slot    pinned.Slot
	mem     []byte
	indices []int // dataset indices, in batch order
}

// job is one sample to load into its place in a slot.
type job struct {
	sb  *slotBatch
	pos int
}

// result is a loaded sample; err is set when the Skip policy let a bad sample through.
type result struct {
	job
	err error
}

// epochRun is the state of one epoch's iteration.
type epochRun struct {
	l       *Loader
	epoch   int
	indices []int
	next    int // next batch to issue
	end     int // batches in the epoch

	// cur and pos belong to the source goroutine.
	cur *slotBatch
	pos int
	// skipped counts this epoch's skipped samples; it belongs to the copy stage, which sees them
	// in order.
	skipped int

	// copies takes each fed batch's copy events to traceCopies; nil without Config.Tracer.
	copies chan copyTrace

	mu       sync.Mutex
	open     map[*slotBatch]bool       // slots acquired and not yet handed to the feeder
	produced map[*gpu.DeviceBatch]bool // batches on the device not yet yielded
}

// Epoch returns the batches of epoch, in order. It starts at batch 0, or where Restore said. The
// iteration stops at the first error (which names the sample and its cause: see SampleError),
// when ctx ends, or when the loop breaks; every goroutine it started has exited when it returns.
// Release every batch.
func (l *Loader) Epoch(ctx context.Context, epoch int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		start, err := l.begin(epoch)
		if err != nil {
			yield(nil, err)
			return
		}
		e := &epochRun{l: l, epoch: epoch, indices: l.sampler.Indices(epoch), next: start, end: l.BatchesPerEpoch(),
			open: map[*slotBatch]bool{}, produced: map[*gpu.DeviceBatch]bool{}}
		completed := e.run(ctx, yield)
		// The pipeline has stopped: give back what it held. The feeder returns the slots of
		// enqueued copies once they complete.
		var errs []error
		for sb := range e.open {
			errs = append(errs, sb.slot.Release())
		}
		for db := range e.produced {
			errs = append(errs, db.Release())
		}
		l.mu.Lock()
		l.running = false
		l.stages = l.pl.Stats()
		l.pl = nil
		l.stats.Elapsed += time.Since(l.epochStart)
		if completed {
			l.state = l.position(epoch+1, 0)
		}
		l.mu.Unlock()
		if err := errors.Join(errs...); err != nil && completed {
			yield(nil, fmt.Errorf("loaders: %s epoch %d: %w", l.info.Name, epoch, err))
		}
	}
}

func (l *Loader) begin(epoch int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return 0, fmt.Errorf("loaders: epoch %d: %w", epoch, ErrClosed)
	case l.running:
		return 0, fmt.Errorf("loaders: epoch %d: %w", epoch, ErrBusy)
	}
	start := 0
	if l.restored && l.state.Epoch == epoch {
		start = l.state.Batch
	}
	l.restored = false
	l.running = true
	l.epochStart = time.Now()
	l.pl = pipeline.New(pipeline.WithTracer(l.cfg.Tracer))
	return start, nil
}

// run builds and iterates the epoch's pipeline; it reports whether the epoch ran to its end.
func (e *epochRun) run(ctx context.Context, yield func(*Batch, error) bool) bool {
	l := e.l
	p := l.pl
	src := pipeline.FromFunc(p, "sampler", e.issue)
	loaded := pipeline.Map(p, "transform", src, e.load, pipeline.Workers(l.cfg.Workers), pipeline.Ordered(true))
	batches := pipeline.Batch(p, "collate", loaded, l.cfg.Batch, false)
	copied := pipeline.Map(p, "copy", batches, e.copyBatch, pipeline.Ordered(true), pipeline.Buffer(l.cfg.Prefetch))
	if l.copies != nil {
		// At most Prefetch+2 copies are enqueued at once (the feeder's ring), so sends rarely wait.
		e.copies = make(chan copyTrace, l.cfg.Prefetch+2)
		var wg sync.WaitGroup
		wg.Go(func() { e.traceCopies(ctx) })
		// Deferred after the pipeline, which Iter has stopped by then: nothing sends any more.
		defer func() {
			close(e.copies)
			wg.Wait()
		}()
	}
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
		l.stats.Batches++
		l.stats.Samples += int64(b.N)
		waited := time.Since(waitFrom)
		l.stats.Wait += waited
		l.mu.Unlock()
		l.feeder.Waited(waited)
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
		yield(nil, fmt.Errorf("loaders: %s epoch %d: every one of its %d samples was skipped: %w (last: %w)", l.info.Name, e.epoch, e.skipped, ErrTooManySkipped, last))
		return false
	}
	return true
}

// cause unwraps a pipeline error down to the sample error when there is one, so that the message
// leads with the dataset and the sample rather than the stage and item number.
func cause(err error) error {
	var ps *pipeline.StageError
	var se *SampleError
	if errors.As(err, &ps) && (errors.As(ps.Err, &se) || errors.Is(ps.Err, ErrTooManySkipped)) {
		return ps.Err
	}
	return err
}

// issue is the source: it hands out the epoch's samples in order, acquiring a host slot for each
// batch before its first sample (the pool's size is the pipeline's backpressure).
func (e *epochRun) issue(ctx context.Context) (job, bool, error) {
	l := e.l
	if e.cur == nil || e.pos == len(e.cur.indices) {
		if e.next >= e.end {
			return job{}, false, nil
		}
		slot, err := l.pool.Acquire(ctx)
		if err != nil {
			return job{}, false, err
		}
		lo := e.next * l.cfg.Batch
		hi := min(lo+l.cfg.Batch, len(e.indices))
		e.cur = &slotBatch{seq: e.next, slot: slot, mem: slot.Bytes(), indices: e.indices[lo:hi]}
		e.pos = 0
		e.next++
		e.mu.Lock()
		e.open[e.cur] = true
		e.mu.Unlock()
	}
	e.pos++
	return job{sb: e.cur, pos: e.pos - 1}, true, nil
}

// load reads, decodes and augments one sample into its place in the slot.
func (e *epochRun) load(ctx context.Context, j job) (result, error) {
	l := e.l
	ws := <-l.workers // never waits: there are as many as the stage has workers
	defer func() { l.workers <- ws }()
	i := j.sb.indices[j.pos]
	s, err := l.ds.Sample(ctx, i)
	if err == nil {
		if err = checkLabel(l.info.Name, i, s.Key, s.Label, l.info.NumClasses); err == nil {
			ws.r.Reset(l.cfg.Seed, e.epoch, i)
			dst := j.sb.mem[j.pos*l.sample : (j.pos+1)*l.sample]
			if err = ws.w.Apply(dst, s.Input, ws.r); err != nil {
				err = &SampleError{l.info.Name, i, s.Key, err}
			}
		}
	} else if ctx.Err() != nil {
		return result{}, ctx.Err()
	}
	if err != nil {
		var se *SampleError
		if !errors.As(err, &se) {
			err = &SampleError{l.info.Name, i, s.Key, err}
		}
		if l.cfg.OnError == FailFast {
			return result{}, err
		}
		return result{job: j, err: err}, nil
	}
	binary.LittleEndian.PutUint32(j.sb.mem[l.labOff+4*j.pos:], uint32(int32(s.Label)))
	return result{job: j}, nil
}

// copyBatch takes a full slot, counts and compacts away skipped samples, and hands the slot to the
// feeder, which copies it into a free set of device buffers. It returns nil when nothing is left of
// the batch.
func (e *epochRun) copyBatch(ctx context.Context, rs []result) (*Batch, error) {
	l := e.l
	sb := rs[0].sb
	b := &Batch{Shape: l.shape, Epoch: e.epoch, Seq: sb.seq, l: l, Indices: make([]int, 0, len(rs))}
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
				return nil, fmt.Errorf("loaders: %s epoch %d: %d samples skipped, more than %d: %w (last: %w)", l.info.Name, e.epoch, e.skipped, l.cfg.MaxSkipped, ErrTooManySkipped, r.err)
			}
			continue
		}
		if k := len(b.Indices); k != r.pos {
			copy(sb.mem[k*l.sample:(k+1)*l.sample], sb.mem[r.pos*l.sample:(r.pos+1)*l.sample])
			copy(sb.mem[l.labOff+4*k:l.labOff+4*k+4], sb.mem[l.labOff+4*r.pos:])
		}
		b.Indices = append(b.Indices, sb.indices[r.pos])
	}
	b.N = len(b.Indices)
	if b.N == 0 {
		e.releaseOpen(sb)
		return nil, sb.slot.Release()
	}
	e.releaseOpen(sb) // the feeder takes the slot over, whatever the outcome
	if err := sb.slot.Ready(); err != nil {
		return nil, errors.Join(err, sb.slot.Release())
	}
	db, err := l.feeder.Feed(ctx, sb.slot, gpu.Region{Off: 0, Len: b.N * l.sample}, gpu.Region{Off: l.labOff, Len: 4 * b.N})
	if err != nil {
		return nil, fmt.Errorf("loaders: %s epoch %d batch %d: %w", l.info.Name, e.epoch, sb.seq, err)
	}
	e.mu.Lock()
	e.produced[db] = true
	e.mu.Unlock()
	if e.copies != nil {
		start, done := l.copies.latest()
		select {
		case e.copies <- copyTrace{seq: sb.seq, start: start, done: done}:
		case <-ctx.Done(): // the epoch is ending: the copy goes untraced
		}
	}
	b.dev, b.Images, b.Labels, b.Ready = db, db.Buffers[0], db.Buffers[1], db.Ready
	return b, nil
}

func (e *epochRun) releaseOpen(sb *slotBatch) {
	e.mu.Lock()
	delete(e.open, sb)
	e.mu.Unlock()
}
