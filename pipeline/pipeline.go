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
	ErrUnconsumed = errors.New("pipeline: queue has no consumer")
	// ErrReused is returned by Run when a queue feeds more than one stage, or by a second Run.
	ErrReused = errors.New("pipeline: used twice")
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
	t0      atomic.Int64 // unix nanos when Run began
	t1      atomic.Int64 // unix nanos when Run ended; 0 while running
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
		return fmt.Errorf("%w: Run called twice", ErrReused)
	}
	p.started = true
	err := p.err
	p.mu.Unlock()
	for _, s := range p.queues {
		if err == nil && s.consumers() == 0 {
			err = fmt.Errorf("%w: output of stage %q", ErrUnconsumed, s.producer())
		}
	}
	if err != nil {
		for _, s := range p.queues {
			s.abandon()
		}
		return err
	}
	p.t0.Store(time.Now().UnixNano())
	defer func() { p.t1.Store(time.Now().UnixNano()) }()
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
		p.fail(fmt.Errorf("%w: output of stage %q feeds a second stage %q", ErrReused, s.owner.name, by))
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

// send delivers v downstream, accounting the wait as blocked time. It returns false when ctx ends.
func send[T any](ctx context.Context, st *stage, ch chan item[T], it item[T]) bool {
	select {
	case ch <- it:
		st.sent(len(ch))
		return true
	default:
	}
	t := time.Now()
	select {
	case ch <- it:
		st.blocked.Add(int64(time.Since(t)))
		st.sent(len(ch))
		return true
	case <-ctx.Done():
		st.blocked.Add(int64(time.Since(t)))
		return false
	}
}

// recv takes the next input, accounting the wait as starved time. ok is false when the input is
// closed or ctx ends.
func recv[T any](ctx context.Context, st *stage, ch chan item[T]) (it item[T], ok bool) {
	select {
	case it, ok = <-ch:
		if ok {
			st.in.Add(1)
		}
		return it, ok
	default:
	}
	t := time.Now()
	select {
	case it, ok = <-ch:
		st.starved.Add(int64(time.Since(t)))
		if ok {
			st.in.Add(1)
		}
		return it, ok
	case <-ctx.Done():
		st.starved.Add(int64(time.Since(t)))
		return it, false
	}
}

// workerKey is the context key under which a stage function finds its worker.
type workerKey struct{}

// worker is one goroutine of a stage, as its function's context carries it.
type worker struct {
	st     *stage
	index  int
	waited atomic.Int64 // nanoseconds reported through Blocked
}

// newWorker returns worker index of st and the context its function calls get. It is made once
// per goroutine, so the context costs nothing per item.
func newWorker(ctx context.Context, st *stage, index int) (context.Context, *worker) {
	w := &worker{st: st, index: index}
	return context.WithValue(ctx, workerKey{}, w), w
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
		w.waited.Add(int64(d))
	}
}

// call runs a user function on worker w (whose context ctx is), turning a panic into a
// *PanicError and accounting busy time, less what the function reported through Blocked.
func call[In, Out any](ctx context.Context, w *worker, idx int64, fn func(context.Context, In) (Out, error), v In) (out Out, err error) {
	st := w.st
	t := time.Now()
	waited0 := w.waited.Load()
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: stack()}
		}
		end := time.Now()
		waited := w.waited.Load() - waited0
		st.busy.Add(int64(end.Sub(t)) - waited)
		st.blocked.Add(waited)
		if tr := st.p.tracer; tr != nil {
			tr.Span(st.name, w.index, idx, t, end)
		}
		if err != nil {
			err = &StageError{Stage: st.name, Index: idx, Err: err}
		}
	}()
	return fn(ctx, v)
}

func stack() []byte { return debug.Stack() }
