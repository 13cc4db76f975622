package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

var (
	// ErrUnconsumed is returned by Run when a queue was declared but no stage reads it: its
	// producer would block forever.
	ErrUnconsumed = errors.New("queue has no consumer")
	// ErrReused is returned by Run when a queue feeds more than one stage, or by a second Run.
	ErrReused = errors.New("used twice")
	// ErrOption is returned by Run when a stage was given an option it does not take (Window to
	// a source, DropLast to a Map) or a value out of range (Workers(0)).
	ErrOption = errors.New("bad stage option")
)

// StageError is the error a pipeline returns when a stage fails: it names the stage and the index
// of the item the stage was processing (the position of the item in its source, or of the batch in
// a batch stage; -1 when the failure is not about one item).
type StageError struct {
	Stage string
	Index int64
	Err   error
}

func (e *StageError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("pipeline: stage %q: %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("pipeline: stage %q: item %d: %v", e.Stage, e.Index, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

// PanicError is the cause inside a StageError when a user function panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// Pipeline is a set of stages run together. Declare stages with the package functions (FromSlice,
// Map, Batch, ...), then call Run or Iter once. A Pipeline must not be declared from several
// goroutines at once; Stats is safe at any time.
type Pipeline struct {
	mu      sync.Mutex
	stages  []*stage
	runs    []func(context.Context) error
	queues  []consumable
	err     error // first declaration error, reported by Run
	started bool
	tracer  Tracer
	t0      atomic.Int64 // now() when Run began; 0 before
	t1      atomic.Int64 // now() when Run ended; 0 while running
}

type consumable interface {
	consumers() int
	producer() string
	abandon() // closes the queue of a pipeline that will not run, so a reader (Iter) ends
}

// Option configures New.
type Option func(*Pipeline)

// WithTracer makes every stage report each item it processes to t (see Tracer).
func WithTracer(t Tracer) Option { return func(p *Pipeline) { p.tracer = t } }

// Tracer receives one call per item a worker processed: stage name, worker number (0-based within
// the stage), item index, and when the work began and ended. It is called from the workers'
// goroutines concurrently and must be fast; stoke profile uses it to draw timelines.
type Tracer interface {
	Span(stage string, worker int, index int64, start, end time.Time)
}

// New returns an empty pipeline.
func New(opts ...Option) *Pipeline {
	p := &Pipeline{}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (p *Pipeline) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// Run runs every stage until the sinks have consumed everything, the first error, or ctx is
// cancelled, and returns only after all of the pipeline's goroutines have exited. The error is the
// first stage's *StageError, or ctx.Err() when the caller cancelled.
func (p *Pipeline) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("pipeline: %w: Run called twice", ErrReused)
	}
	p.started = true
	err := p.err
	p.mu.Unlock()
	for _, s := range p.queues {
		if err == nil && s.consumers() == 0 {
			err = fmt.Errorf("pipeline: %w: output of stage %q", ErrUnconsumed, s.producer())
		}
	}
	if err != nil {
		for _, s := range p.queues {
			s.abandon()
		}
		return err
	}
	p.t0.Store(now())
	defer func() { p.t1.Store(now()) }()
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range p.runs {
		g.Go(func() error { return r(gctx) })
	}
	err = g.Wait()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return ctx.Err()
	}
	return err
}

// Queue is the output of a stage: a bounded queue of T values with their item indices. It is
// consumed by exactly one later stage or by Iter.
type Queue[T any] struct {
	p     *Pipeline
	ch    chan item[T]
	owner *stage
	used  int
}

type item[T any] struct {
	idx int64
	v   T
}

func (s *Queue[T]) consumers() int   { return s.used }
func (s *Queue[T]) producer() string { return s.owner.name }
func (s *Queue[T]) abandon()         { close(s.ch) }

// take marks s as consumed by one more reader and reports misuse through p.err.
func (s *Queue[T]) take(p *Pipeline, by string) bool {
	if s == nil || s.p != p {
		p.fail(fmt.Errorf("pipeline: stage %q: input queue belongs to another pipeline or is nil", by))
		return false
	}
	s.used++
	if s.used > 1 {
		p.fail(fmt.Errorf("pipeline: %w: output of stage %q feeds a second stage %q", ErrReused, s.owner.name, by))
		return false
	}
	return true
}

// newQueue registers a stage and its output queue.
func newQueue[T any](p *Pipeline, st *stage, capacity int) *Queue[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		p.fail(fmt.Errorf("pipeline: stage %q declared after Run", st.name))
	}
	s := &Queue[T]{p: p, ch: make(chan item[T], capacity), owner: st}
	st.queue = func() (int, int) { return len(s.ch), cap(s.ch) }
	p.stages = append(p.stages, st)
	p.queues = append(p.queues, s)
	return s
}

// addStage registers a stage that has no output queue (a sink).
func (p *Pipeline) addStage(st *stage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		p.fail(fmt.Errorf("pipeline: stage %q declared after Run", st.name))
	}
	p.stages = append(p.stages, st)
}

func (p *Pipeline) addRun(f func(context.Context) error) {
	p.mu.Lock()
	p.runs = append(p.runs, f)
	p.mu.Unlock()
}

// epoch is the origin of now.
var epoch = time.Now()

// now is the monotonic clock in nanoseconds since epoch, plus 1 so that it is never 0 (which
// means "not yet" in Pipeline.t0 and t1). time.Since reads only the monotonic clock, about half
// the cost of time.Now, which reads the wall clock too.
func now() int64 { return int64(time.Since(epoch)) + 1 }

// send delivers it downstream, accounting a wait as blocked time. It returns false when ctx ends.
func send[T any](ctx context.Context, w *worker, ch chan item[T], it item[T]) bool {
	select {
	case ch <- it:
		w.sent(len(ch))
		return true
	default:
	}
	t := w.waitStart()
	select {
	case ch <- it:
		w.waitEnd(t, &w.blocked)
		w.sent(len(ch))
		return true
	case <-ctx.Done():
		w.waitEnd(t, &w.blocked)
		return false
	}
}

// recv takes the next input, accounting a wait as starved time. ok is false when the input is
// closed or ctx ends. A cancelled ctx wins over a ready input, so that a stage whose input and
// output never make it wait still stops.
func recv[T any](ctx context.Context, w *worker, ch chan item[T]) (it item[T], ok bool) {
	done := ctx.Done()
	select {
	case <-done:
		return it, false
	default:
	}
	select {
	case it, ok = <-ch:
		if ok {
			w.in.Add(1)
		}
		return it, ok
	default:
	}
	t := w.waitStart()
	select {
	case it, ok = <-ch:
		w.waitEnd(t, &w.starved)
		if ok {
			w.in.Add(1)
		}
		return it, ok
	case <-done:
		w.waitEnd(t, &w.starved)
		return it, false
	}
}

// workerKey is the context key under which a stage function finds its worker.
type workerKey struct{}

// worker is one goroutine of a stage and its counters. Only that goroutine writes them (atomically,
// so that Stats may read them at any time); a stage sums its workers'. The worker's time is cut
// into stretches at checkpoints: the end of each call of the stage function, and the start and
// end of each wait (for input, for downstream, for a window token or the ordered map's lock). A
// wait is starved or blocked time; the rest is busy, less what the function reported through
// Blocked. So the engine reads the clock once per item, and twice more only where a goroutine is
// about to park anyway, and every counter only grows.
type worker struct {
	st    *stage
	index int
	cur   int64 // index of the item the worker's function is processing, for a panic's error
	mark  int64 // now() at the last checkpoint
	in    atomic.Int64
	out   atomic.Int64 // items (batches for a batch stage) sent, or consumed by a sink
	// queued is the sum over sends of the output queue's length right after it.
	queued atomic.Int64
	// busy, starved and blocked are nanoseconds; pending is what Blocked reported since the last
	// checkpoint, to be taken out of the stretch's busy time.
	busy, starved, blocked, pending atomic.Int64
	_                               [64]byte // keeps workers of one stage off each other's cache lines
}

func (w *worker) sent(queueLen int) {
	w.out.Add(1)
	w.queued.Add(int64(queueLen))
}

// checkpoint ends the stretch of work since the last checkpoint at t.
func (w *worker) checkpoint(t int64) {
	d := t - w.mark
	if w.pending.Load() != 0 {
		d -= w.pending.Swap(0)
	}
	w.busy.Add(max(d, 0))
	w.mark = t
}

// waitStart is the checkpoint where a wait begins; it returns the time, for waitEnd.
func (w *worker) waitStart() int64 {
	t := now()
	w.checkpoint(t)
	return t
}

// waitEnd ends a wait begun at t, adding it to counter (w.starved or w.blocked).
func (w *worker) waitEnd(t int64, counter *atomic.Int64) {
	e := now()
	counter.Add(e - t)
	w.mark = e
}

// newWorker registers worker index of st and returns it with the context its function calls
// get. It is made once per goroutine, so the context costs nothing per item. The caller defers
// w.done.
func newWorker(ctx context.Context, st *stage, index int) (context.Context, *worker) {
	w := &worker{st: st, index: index, cur: -1, mark: now()}
	st.mu.Lock()
	st.live = append(st.live, w)
	st.mu.Unlock()
	return context.WithValue(ctx, workerKey{}, w), w
}

// done is the last checkpoint of the worker's goroutine, and turns a panic in it (in the stage's
// function, or in a source's sequence) into a *StageError naming the item it was processing;
// deferred by every stage goroutine, with its named result.
func (w *worker) done(err *error) {
	w.checkpoint(now())
	if r := recover(); r != nil {
		*err = &StageError{Stage: w.st.name, Index: w.cur, Err: &PanicError{Value: r, Stack: stack()}}
	}
}

// WorkerIndex returns the index of the worker goroutine that runs the stage function ctx was given:
// 0 to n-1 in a Map with Workers(n), 0 in the other stages. A worker calls its function for one
// item at a time, so state that must not be shared (scratch buffers, decoders) can live in a
// slice indexed by it. It returns -1 for a context that did not come from a stage.
func WorkerIndex(ctx context.Context) int {
	if w, ok := ctx.Value(workerKey{}).(*worker); ok {
		return w.index
	}
	return -1
}

// Blocked tells the stage whose function was given ctx that the function spent d waiting for
// downstream to hand back a resource (a buffer or slot that a later stage frees): d counts as
// the stage's blocked time instead of busy time, as the stage's own waits to send do. It does
// nothing for a context that did not come from a stage.
func Blocked(ctx context.Context, d time.Duration) {
	if w, ok := ctx.Value(workerKey{}).(*worker); ok && d > 0 {
		w.blocked.Add(int64(d))
		w.pending.Add(int64(d))
	}
}

// call runs a user function on worker w (whose context ctx is) for item idx, wrapping its error
// in a *StageError, and reports the span to the pipeline's Tracer if it has one. Its end is a
// checkpoint. A panic is turned into an error by w.done.
func call[In, Out any](ctx context.Context, w *worker, idx int64, fn func(context.Context, In) (Out, error), v In) (Out, error) {
	w.cur = idx
	var out Out
	var err error
	if tr := w.st.p.tracer; tr != nil {
		t := time.Now()
		out, err = fn(ctx, v)
		tr.Span(w.st.name, w.index, idx, t, time.Now())
	} else {
		out, err = fn(ctx, v)
	}
	w.checkpoint(now())
	if err != nil {
		return out, &StageError{Stage: w.st.name, Index: idx, Err: err}
	}
	return out, nil
}

func stack() []byte { return debug.Stack() }
