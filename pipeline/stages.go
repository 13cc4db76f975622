package pipeline

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// StageOption configures one stage. Each stage takes some options only: a source takes Buffer; a
// Map takes Workers, Ordered, Window (with Ordered(true) only) and Buffer; a Batch takes Buffer
// and DropLast. An option a stage does not take, or a value out of range, fails the pipeline: Run
// returns an error wrapping ErrOption that names the stage and the option.
type StageOption func(*stageOptions)

// optionSet says which options were given, for the check that a stage takes them.
type optionSet uint8

const (
	optWorkers optionSet = 1 << iota
	optOrdered
	optWindow
	optBuffer
	optDropLast
)

var optionNames = []string{"Workers", "Ordered", "Window", "Buffer", "DropLast"}

// Which options each kind of stage takes.
const (
	sourceOptions = optBuffer
	mapOptions    = optWorkers | optOrdered | optWindow | optBuffer
	batchOptions  = optBuffer | optDropLast
)

type stageOptions struct {
	workers, buffer, window int
	ordered, dropLast       bool
	set                     optionSet
	err                     error // the first bad value
}

func (o *stageOptions) bad(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// Workers sets how many goroutines run a Map's function (default 1; n must be at least 1).
func Workers(n int) StageOption {
	return func(o *stageOptions) {
		o.set |= optWorkers
		if n < 1 {
			o.bad("Workers(%d); want >= 1", n)
		}
		o.workers = n
	}
}

// Ordered makes a Map emit results in the order its input arrived (default false: as they finish).
func Ordered(on bool) StageOption {
	return func(o *stageOptions) { o.set |= optOrdered; o.ordered = on }
}

// Window bounds how many items an ordered Map may hold between the one it must emit next and the
// newest one it has started (default 4 x Workers, at least 32; n must be at least 1). A slow item
// stalls the stage once the window is full, so memory stays bounded. It applies with
// Ordered(true) only.
func Window(n int) StageOption {
	return func(o *stageOptions) {
		o.set |= optWindow
		if n < 1 {
			o.bad("Window(%d); want >= 1", n)
		}
		o.window = n
	}
}

// Buffer sets the capacity of the stage's output queue (default 2 x Workers, at least 16): deep
// enough that handing items over rarely parks a goroutine. 0 keeps the default; n must not be
// negative.
func Buffer(n int) StageOption {
	return func(o *stageOptions) {
		o.set |= optBuffer
		if n < 0 {
			o.bad("Buffer(%d); want >= 0", n)
		}
		o.buffer = n
	}
}

// DropLast makes a Batch drop a last batch shorter than its size (default: emit it).
func DropLast() StageOption {
	return func(o *stageOptions) { o.set |= optDropLast; o.dropLast = true }
}

// resolve applies opts for stage name of the given kind, which takes the options in takes, and
// fills in the defaults. An option the stage does not take, or a bad value, fails p (Run returns
// the error) and resolve reports false: the caller returns its queue without running.
func resolve(p *Pipeline, name, kind string, takes optionSet, opts []StageOption) (stageOptions, bool) {
	o := stageOptions{workers: 1}
	for _, f := range opts {
		f(&o)
	}
	if extra := o.set &^ takes; extra != 0 {
		var names []string
		for i, n := range optionNames {
			if extra&(1<<i) != 0 {
				names = append(names, n)
			}
		}
		o.err = fmt.Errorf("%s does not apply to a %s stage", strings.Join(names, ", "), kind)
	} else if o.set&optWindow != 0 && !o.ordered {
		o.err = fmt.Errorf("Window applies to an ordered Map only (Ordered(true))")
	}
	if o.err != nil {
		p.fail(fmt.Errorf("pipeline: stage %q: %w: %w", name, ErrOption, o.err))
		return stageOptions{workers: 1, buffer: 1, window: 1}, false // the stage never runs
	}
	if o.buffer == 0 {
		o.buffer = max(2*o.workers, 16)
	}
	if o.window == 0 {
		o.window = max(4*o.workers, 32)
	}
	return o, true
}

// FromSlice is a source that emits the elements of xs in order; item i has index i.
func FromSlice[T any](p *Pipeline, name string, xs []T, opts ...StageOption) *Queue[T] {
	i := 0
	return FromFunc(p, name, func(context.Context) (T, bool, error) {
		if i == len(xs) {
			var zero T
			return zero, false, nil
		}
		i++
		return xs[i-1], true, nil
	}, opts...)
}

// FromSeq is a source that emits the values of seq in order. seq runs on the source's goroutine;
// it is stopped early (its yield returns false) when the pipeline stops.
func FromSeq[T any](p *Pipeline, name string, seq iter.Seq[T], opts ...StageOption) *Queue[T] {
	o, ok := resolve(p, name, "source", sourceOptions, opts)
	st := &stage{p: p, name: name, kind: "source", workers: 1}
	out := newQueue[T](p, st, o.buffer)
	if !ok {
		return out
	}
	p.addRun(func(ctx context.Context) (err error) {
		defer close(out.ch)
		_, w := newWorker(ctx, st, 0)
		defer w.done(&err)
		w.cur = 0
		for v := range seq {
			if !send(ctx, w, out.ch, item[T]{w.cur, v}) {
				return ctx.Err()
			}
			w.cur++
		}
		return nil
	})
	return out
}

// FromFunc is a source that calls next until it reports ok == false or an error. next runs on one
// goroutine; the n-th value it returns has index n.
func FromFunc[T any](p *Pipeline, name string, next func(ctx context.Context) (v T, ok bool, err error), opts ...StageOption) *Queue[T] {
	o, ok := resolve(p, name, "source", sourceOptions, opts)
	st := &stage{p: p, name: name, kind: "source", workers: 1}
	out := newQueue[T](p, st, o.buffer)
	if !ok {
		return out
	}
	p.addRun(func(ctx context.Context) (err error) {
		defer close(out.ch)
		type result struct {
			v  T
			ok bool
		}
		gen := func(ctx context.Context, _ struct{}) (result, error) {
			v, ok, err := next(ctx)
			return result{v, ok}, err
		}
		wctx, w := newWorker(ctx, st, 0)
		defer w.done(&err)
		for idx := int64(0); ; idx++ {
			r, err := call(wctx, w, idx, gen, struct{}{})
			if err != nil {
				return err
			}
			if !r.ok {
				return nil
			}
			if !send(ctx, w, out.ch, item[T]{idx, r.v}) {
				return ctx.Err()
			}
		}
	})
	return out
}

// Map applies fn to every item of in with Workers goroutines. With Ordered(true) the results leave
// in input order (holding at most Window items); otherwise as they finish. An error or panic in fn
// stops the pipeline with a *StageError carrying the item's index. fn must honour ctx if it blocks.
// WorkerIndex(ctx) tells fn which of the stage's workers runs it, for per-worker state.
func Map[In, Out any](p *Pipeline, name string, in *Queue[In], fn func(ctx context.Context, v In) (Out, error), opts ...StageOption) *Queue[Out] {
	o, ok := resolve(p, name, "map", mapOptions, opts)
	st := &stage{p: p, name: name, kind: "map", workers: o.workers, ordered: o.ordered}
	out := newQueue[Out](p, st, o.buffer)
	if !ok || !in.take(p, name) {
		return out
	}
	if o.ordered {
		p.addRun(func(ctx context.Context) error {
			defer close(out.ch)
			return orderedMap(ctx, st, in.ch, out.ch, fn, o)
		})
		return out
	}
	p.addRun(func(ctx context.Context) error {
		defer close(out.ch)
		g, ctx := errgroup.WithContext(ctx)
		for i := range o.workers {
			g.Go(func() (err error) {
				wctx, w := newWorker(ctx, st, i)
				defer w.done(&err)
				for {
					it, ok := recv(ctx, w, in.ch)
					if !ok {
						return ctx.Err()
					}
					v, err := call(wctx, w, it.idx, fn, it.v)
					if err != nil {
						return err
					}
					if !send(ctx, w, out.ch, item[Out]{it.idx, v}) {
						return ctx.Err()
					}
				}
			})
		}
		return g.Wait()
	})
	return out
}

// orderedMap keeps input order with a ring of window results. A worker takes a token from space
// before it takes an item, so at most window items are between "taken" and "emitted": that bounds
// memory, and it guarantees ring slot seq%window is free when item seq is taken. Items are numbered
// in the order they were taken (under a lock), so order is the input's arrival order.
//
// There is no emitter goroutine: the worker that completes the item due next sends it, and any
// results that were waiting behind it, itself; while it sends, others only deposit. This avoids a
// goroutine hand-off per item.
func orderedMap[In, Out any](
	ctx context.Context, st *stage, in chan item[In], out chan item[Out], fn func(context.Context, In) (Out, error), o stageOptions,
) error {
	type slot struct {
		it    item[Out]
		ready bool
	}
	ring := make([]slot, o.window)
	space := make(chan struct{}, o.window)
	for range o.window {
		space <- struct{}{}
	}
	var (
		takeMu   sync.Mutex
		next     int64 // sequence number of the next item taken, under takeMu
		emitMu   sync.Mutex
		due      int64 // sequence number of the next item to send, under emitMu
		emitting bool  // a worker is sending, under emitMu
	)
	// emit deposits the result of item seq and, if it is due and nobody is sending, sends it and
	// every consecutive result that is ready, on behalf of worker w.
	emit := func(w *worker, seq int64, it item[Out]) bool {
		emitMu.Lock()
		ring[seq%int64(len(ring))] = slot{it, true}
		if emitting || seq != due {
			emitMu.Unlock()
			return true
		}
		emitting = true
		for {
			s := &ring[due%int64(len(ring))]
			if !s.ready {
				break
			}
			it := s.it
			*s = slot{}
			due++
			emitMu.Unlock()
			ok := send(ctx, w, out, it)
			space <- struct{}{}
			emitMu.Lock()
			if !ok {
				emitting = false
				emitMu.Unlock()
				return false
			}
		}
		emitting = false
		emitMu.Unlock()
		return true
	}
	g, ctx := errgroup.WithContext(ctx)
	for i := range o.workers {
		g.Go(func() (err error) {
			wctx, w := newWorker(ctx, st, i)
			defer w.done(&err)
			done := ctx.Done()
			for {
				// A window token; waiting for one is blocked time.
				select {
				case <-space:
				default:
					t := w.waitStart()
					select {
					case <-space:
					case <-done:
						w.waitEnd(t, &w.blocked)
						return ctx.Err()
					}
					w.waitEnd(t, &w.blocked)
				}
				// Taking the item and numbering it happen under one lock, so the numbering is the
				// input's arrival order; waiting for the lock counts as starved time too.
				if !takeMu.TryLock() {
					t := w.waitStart()
					takeMu.Lock()
					w.waitEnd(t, &w.starved)
				}
				it, ok := recv(ctx, w, in)
				seq := next
				if ok {
					next++
				}
				takeMu.Unlock()
				if !ok {
					space <- struct{}{} // pass the token on, so the other workers see the end too
					return ctx.Err()
				}
				v, err := call(wctx, w, it.idx, fn, it.v)
				if err != nil {
					return err
				}
				if !emit(w, seq, item[Out]{it.idx, v}) {
					return ctx.Err()
				}
			}
		})
	}
	return g.Wait()
}

// Batch groups consecutive items of in into slices of n (the last one shorter, or dropped with
// DropLast()). Batch k has index k. Each batch is a new slice owned by the receiver.
func Batch[T any](p *Pipeline, name string, in *Queue[T], n int, opts ...StageOption) *Queue[[]T] {
	o, ok := resolve(p, name, "batch", batchOptions, opts)
	st := &stage{p: p, name: name, kind: "batch", workers: 1}
	out := newQueue[[]T](p, st, o.buffer)
	if !ok {
		return out
	}
	dropLast := o.dropLast
	if n < 1 {
		p.fail(fmt.Errorf("pipeline: stage %q: batch size %d; want >= 1", name, n))
		return out
	}
	if !in.take(p, name) {
		return out
	}
	p.addRun(func(ctx context.Context) (err error) {
		defer close(out.ch)
		_, w := newWorker(ctx, st, 0)
		defer w.done(&err)
		var idx int64
		b := make([]T, 0, n)
		for {
			it, ok := recv(ctx, w, in.ch)
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				if len(b) > 0 && !dropLast {
					if !send(ctx, w, out.ch, item[[]T]{idx, b}) {
						return ctx.Err()
					}
				}
				return nil
			}
			b = append(b, it.v)
			if len(b) == n {
				if !send(ctx, w, out.ch, item[[]T]{idx, b}) {
					return ctx.Err()
				}
				idx++
				b = make([]T, 0, n)
			}
		}
	})
	return out
}

// Prefetch lets up to n items of in wait, ready, ahead of the consumer: a bounded look-ahead that
// absorbs jitter between the two sides. n below 1 means 1.
func Prefetch[T any](p *Pipeline, name string, in *Queue[T], n int) *Queue[T] {
	st := &stage{p: p, name: name, kind: "prefetch", workers: 1}
	out := newQueue[T](p, st, max(n, 1))
	if !in.take(p, name) {
		return out
	}
	p.addRun(func(ctx context.Context) (err error) {
		defer close(out.ch)
		_, w := newWorker(ctx, st, 0)
		defer w.done(&err)
		for {
			it, ok := recv(ctx, w, in.ch)
			if !ok {
				return ctx.Err()
			}
			if !send(ctx, w, out.ch, it) {
				return ctx.Err()
			}
		}
	})
	return out
}

// Sink consumes in with fn on one goroutine. An error or panic in fn stops the pipeline.
func Sink[T any](p *Pipeline, name string, in *Queue[T], fn func(ctx context.Context, v T) error) {
	st := &stage{p: p, name: name, kind: "sink", workers: 1}
	p.addStage(st)
	if !in.take(p, name) {
		return
	}
	p.addRun(func(ctx context.Context) (err error) {
		f := func(ctx context.Context, v T) (struct{}, error) { return struct{}{}, fn(ctx, v) }
		wctx, w := newWorker(ctx, st, 0)
		defer w.done(&err)
		for {
			it, ok := recv(ctx, w, in.ch)
			if !ok {
				return ctx.Err()
			}
			if _, err := call(wctx, w, it.idx, f, it.v); err != nil {
				return err
			}
			w.out.Add(1)
		}
	})
}

// Iter runs p and yields the values of s, its final queue, in the order s delivers them. If the
// pipeline fails, Iter yields (zero, err) once and stops. Breaking out of the loop cancels the
// pipeline; either way Iter returns only after every goroutine of p has exited. s must not be
// consumed by any stage.
func Iter[T any](ctx context.Context, p *Pipeline, s *Queue[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		if !s.take(p, "iter") {
			_ = yield(zero, p.Run(ctx))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		ran := false
		// A loop that breaks, and one whose body panics, stop the pipeline and wait for it.
		defer func() {
			if !ran {
				cancel()
				for range s.ch { // let the producer see the cancellation and close
				}
				<-done
			}
		}()
		for it := range s.ch {
			if !yield(it.v, nil) {
				return
			}
		}
		ran = true
		if err := <-done; err != nil {
			yield(zero, err)
		}
	}
}
