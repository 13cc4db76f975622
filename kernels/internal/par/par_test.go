package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counts is a Job that counts the calls of each part.
type counts struct {
	hits []atomic.Int32
	body func(i int)
}

func (c *counts) Part(i int) {
	c.hits[i].Add(1)
	if c.body != nil {
		c.body(i)
	}
}

func check(t *testing.T, c *counts) {
	t.Helper()
	for i := range c.hits {
		if h := c.hits[i].Load(); h != 1 {
			t.Fatalf("part %d of %d ran %d times; want 1", i, len(c.hits), h)
		}
	}
}

// TestRunEachPartOnce: every part runs once, whatever the number of parts, back to back (the
// workers spinning) and after the workers parked.
func TestRunEachPartOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 16, 1000} {
		for range 50 {
			c := &counts{hits: make([]atomic.Int32, n)}
			Run(c, n)
			check(t, c)
		}
	}
	time.Sleep(3 * spin)
	c := &counts{hits: make([]atomic.Int32, 16)}
	Run(c, 16)
	check(t, c)
}

// TestRunConcurrentAndNested: Runs from many goroutines at once, and Runs inside parts, each
// run every part once and return only after all of them.
func TestRunConcurrentAndNested(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for r := range 20 {
				var inner atomic.Int32
				c := &counts{hits: make([]atomic.Int32, 4+g+r%5)}
				c.body = func(int) {
					in := &counts{hits: make([]atomic.Int32, 3)}
					Run(in, 3)
					for i := range in.hits {
						inner.Add(in.hits[i].Load())
					}
				}
				Run(c, len(c.hits))
				check(t, c)
				if got, want := inner.Load(), int32(3*len(c.hits)); got != want {
					t.Errorf("nested parts ran %d times; want %d", got, want)
				}
			}
		})
	}
	wg.Wait()
}

// TestRunUsesWorkers: with two procs, a Run of parts that wait for each other completes: the
// parts run on two goroutines at once (a serial Run would deadlock, which the timeout reports).
func TestRunUsesWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for range 20 {
		var arrived atomic.Int32
		c := &counts{hits: make([]atomic.Int32, 2)}
		c.body = func(int) {
			arrived.Add(1)
			deadline := time.Now().Add(10 * time.Second)
			for arrived.Load() < 2 {
				if time.Now().After(deadline) {
					t.Error("the two parts never ran at once")
					return
				}
				runtime.Gosched()
			}
		}
		Run(c, 2)
		check(t, c)
	}
}

// TestRunSerialOnOneProc: with one proc, every part runs on the caller, in order.
func TestRunSerialOnOneProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var order []int
	c := &counts{hits: make([]atomic.Int32, 10)}
	c.body = func(i int) { order = append(order, i) }
	Run(c, 10)
	check(t, c)
	for i, v := range order {
		if v != i {
			t.Fatalf("parts ran in order %v; want 0..9", order)
		}
	}
}

func BenchmarkRun(b *testing.B) {
	c := &counts{hits: make([]atomic.Int32, 16)}
	for b.Loop() {
		Run(c, 16)
	}
}

// TestWorkersExitWhenIdle: the workers are gone linger after the last Run, so that an idle
// process holds no goroutines (the goleak checks of the packages that compute rely on it).
func TestWorkersExitWhenIdle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	c := &counts{hits: make([]atomic.Int32, 16)}
	Run(c, 16)
	check(t, c)
	deadline := time.Now().Add(10 * time.Second)
	for pool.count.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers left 10 s after the last Run; want 0 after %v", pool.count.Load(), spin+linger)
		}
		time.Sleep(time.Millisecond)
	}
}
