// Package par runs the parts of the CPU kernels' parallel loops (cpu.For, gemm's bands) on the
// calling goroutine and on a pool of worker goroutines that stay awake between loops, as
// OpenMP's and onnxruntime's thread pools do.
//
// A forward pass at batch 1 is hundreds of parallel loops of tens of microseconds each. Starting a
// goroutine per loop woke a parked thread for each (tens of microseconds on a virtual machine),
// and the caller then waited for a helper that had not yet started: resnet18's inference ran no
// faster on two cores than on one. The workers here spin for a while (spin) after each loop,
// yielding to other goroutines as they do, and only then park until the next Run (or exit, after
// linger).
//
// Which goroutine runs which part never changes a result: the callers' parts are fixed by the
// problem alone and write disjoint memory.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Job is the work of one Run: Part(i) for each i in [0, n), in any order, on any goroutine, each
// part once.
type Job interface {
	Part(i int)
}

// spin is how long an idle worker keeps looking for the next Run before it parks: longer than
// the gaps between the loops of a pass, short enough that an idle process stops burning a core
// at once. A worker parked for linger exits (the next Run starts another), so that a process
// that stopped computing holds no goroutines.
const (
	spin   = 200 * time.Microsecond
	linger = 50 * time.Millisecond
)

// Run calls job.Part(i) for every i in [0, n) on the caller and the workers, and returns when all
// have returned. Runs may be concurrent (streams of their own, ranks in one process): one at a
// time has the workers, the others start goroutines of their own, as many as the cores allow.
func Run(job Job, n int) {
	procs := min(runtime.GOMAXPROCS(0), n)
	if procs <= 1 {
		for i := range n {
			job.Part(i)
		}
		return
	}
	t := tasks.Get().(*task)
	t.job, t.n = job, int32(n)
	t.next.Store(0)
	t.left.Store(int32(n))
	t.gen = pool.gen.Add(1)
	if pool.cur.CompareAndSwap(nil, t) {
		pool.start(procs - 1)
		pool.wake(procs - 1)
	} else {
		t.spawn(procs - 1)
	}
	t.work()
	t.wait()
	if pool.cur.Load() == t {
		pool.cur.Store(nil)
	}
	// A worker that joined t may still be leaving it; t is reused only after.
	for t.refs.Load() > 0 {
		runtime.Gosched()
	}
	t.job = nil
	tasks.Put(t)
}

// task is one Run.
type task struct {
	job  Job
	n    int32
	gen  uint64
	next atomic.Int32 // the next part to take
	left atomic.Int32 // the parts not finished
	refs atomic.Int32 // the workers inside work
	done chan struct{}
	wg   sync.WaitGroup
}

var tasks = sync.Pool{New: func() any { return &task{done: make(chan struct{}, 1)} }}

// work takes t's parts in turn until none is left; the goroutine that finishes the last part
// signals done.
func (t *task) work() {
	for i := t.next.Add(1) - 1; i < t.n; i = t.next.Add(1) - 1 {
		t.job.Part(int(i))
		if t.left.Add(-1) == 0 {
			t.done <- struct{}{}
		}
	}
}

// wait returns when every part of t has finished: at once when the caller finished the last
// one, else after a short spin (the last part is usually a worker's, finishing about when the
// caller's did), then on done.
func (t *task) wait() {
	for range 1 << 10 {
		if t.left.Load() == 0 {
			break
		}
		runtime.Gosched()
	}
	<-t.done
}

// spawn starts k goroutines on t for a Run that found the workers taken.
func (t *task) spawn(k int) {
	t.refs.Add(int32(k))
	for range k {
		go func() {
			t.work()
			t.refs.Add(-1)
		}()
	}
}

// workers is the pool of worker goroutines and the Run they serve.
type workers struct {
	cur      atomic.Pointer[task] // the Run the workers serve, nil between Runs
	gen      atomic.Uint64        // Runs started
	sleeping atomic.Int32         // workers parked on wakeup
	wakeup   chan struct{}
	mu       sync.Mutex
	count    atomic.Int32 // workers started
}

var pool = workers{wakeup: make(chan struct{}, 256)}

// start makes sure that k workers exist.
func (p *workers) start(k int) {
	if int(p.count.Load()) >= k {
		return
	}
	p.mu.Lock()
	for n := int(p.count.Load()); n < k; n++ {
		go p.worker()
		p.count.Add(1)
	}
	p.mu.Unlock()
}

// wake unparks up to k parked workers.
func (p *workers) wake(k int) {
	for s := min(int(p.sleeping.Load()), k); s > 0; s-- {
		select {
		case p.wakeup <- struct{}{}:
		default:
			return
		}
	}
}

// worker serves the Runs that publish themselves in cur, spinning between them, parked when
// none came for spin, gone when none came for linger more.
func (p *workers) worker() {
	var last uint64 // the Run this worker served last
	var timer *time.Timer
	for {
		seen, idle := p.gen.Load(), time.Now()
		for i := 1; ; i++ {
			if p.gen.Load() == last {
				// The last Run begun is the one served: nothing to join.
			} else if t := p.cur.Load(); t != nil {
				// t's fields are read only while counted in refs and published: its Run
				// reuses t only after unpublishing it and seeing refs at zero.
				t.refs.Add(1)
				if p.cur.Load() == t && t.gen != last {
					last = t.gen
					t.work()
					t.refs.Add(-1)
					break
				}
				t.refs.Add(-1)
			}
			if i%32 != 0 {
				continue // a load of gen, again: cheaper than yielding, which takes the scheduler's lock
			}
			if time.Since(idle) > spin {
				p.sleeping.Add(1)
				if p.gen.Load() == seen { // no Run began since: park (Run wakes after counting)
					if timer == nil {
						timer = time.NewTimer(linger)
					} else {
						timer.Reset(linger)
					}
					select {
					case <-p.wakeup:
						timer.Stop()
					case <-timer.C:
						p.sleeping.Add(-1)
						p.mu.Lock()
						p.count.Add(-1)
						p.mu.Unlock()
						return
					}
				}
				p.sleeping.Add(-1)
				break
			}
			runtime.Gosched()
		}
	}
}
