package pipeline_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/pipeline"
)

// TestWorkerIndex checks that every call of a Map's function sees a worker index in [0, n) that
// no concurrent call shares, so per-worker state needs no lock, ordered or not.
func TestWorkerIndex(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		const n = 4
		var inUse [n]atomic.Bool
		var used [n]atomic.Int64
		p := pipeline.New()
		src := pipeline.FromSlice(p, "src", make([]int, 2000))
		out := pipeline.Map(p, "map", src, func(ctx context.Context, v int) (int, error) {
			w := pipeline.WorkerIndex(ctx)
			if w < 0 || w >= n {
				t.Errorf("worker %d; want 0..%d", w, n-1)
				return 0, nil
			}
			if inUse[w].Swap(true) {
				t.Errorf("worker %d runs two calls at once", w)
			}
			used[w].Add(1)
			time.Sleep(10 * time.Microsecond)
			inUse[w].Store(false)
			return v, nil
		}, pipeline.Workers(n), pipeline.Ordered(ordered))
		count := 0
		for _, err := range pipeline.Iter(context.Background(), p, out) {
			if err != nil {
				t.Fatal(err)
			}
			count++
		}
		if count != 2000 {
			t.Fatalf("%d items; want 2000", count)
		}
		busy := 0
		for i := range used {
			if used[i].Load() > 0 {
				busy++
			}
		}
		if busy < 2 {
			t.Errorf("ordered=%v: %d of %d workers used", ordered, busy, n)
		}
	}
	if w := pipeline.WorkerIndex(context.Background()); w != -1 {
		t.Errorf("Worker outside a stage = %d; want -1", w)
	}
}

// waitingSource is a source "src" of n items that waits d before each ("for a free slot", as a
// Loader's sampler does) and reports the wait through Blocked.
func waitingSource(p *pipeline.Pipeline, n int, d time.Duration) *pipeline.Queue[int] {
	i := 0
	return pipeline.FromFunc(p, "src", func(ctx context.Context) (int, bool, error) {
		if i == n {
			return 0, false, nil
		}
		i++
		start := time.Now()
		time.Sleep(d)
		pipeline.Blocked(ctx, time.Since(start))
		return i, true, nil
	})
}

// TestBlockedIsNotBusy checks that the time a source reports through Blocked (waiting for a free
// slot, in a Loader) is accounted as blocked, not busy.
func TestBlockedIsNotBusy(t *testing.T) {
	p := pipeline.New()
	src := waitingSource(p, 5, 20*time.Millisecond)
	pipeline.Sink(p, "sink", src, func(context.Context, int) error { return nil })
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()[0]
	if st.Blocked < 100*time.Millisecond {
		t.Errorf("blocked %v; want >= 100ms (5 waits of 20ms)", st.Blocked)
	}
	if st.Busy >= st.Blocked/2 {
		t.Errorf("busy %v, blocked %v: the waits were counted as busy", st.Busy, st.Blocked)
	}
}

// TestStatsNeverGoBack samples Stats while a pipeline runs: a stage's busy, starved and blocked
// times only grow (stoke profile draws its timeline from their differences), including around
// waits a function reports through Blocked after the fact.
func TestStatsNeverGoBack(t *testing.T) {
	p := pipeline.New()
	src := waitingSource(p, 20, 3*time.Millisecond)
	m := pipeline.Map(p, "work", src, func(_ context.Context, x int) (int, error) {
		time.Sleep(time.Millisecond)
		return x, nil
	}, pipeline.Workers(2), pipeline.Ordered(true))
	pipeline.Sink(p, "sink", m, func(context.Context, int) error { return nil })
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	prev := map[string]pipeline.StageStats{}
	check := func() {
		for _, s := range p.Stats() {
			q := prev[s.Name]
			if s.Busy < q.Busy || s.Starved < q.Starved || s.Blocked < q.Blocked || s.In < q.In || s.Out < q.Out {
				t.Fatalf("stage %s went back: %+v after %+v", s.Name, s, q)
			}
			prev[s.Name] = s
		}
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			check()
			if s := prev["src"]; s.Busy >= s.Blocked/2 {
				t.Errorf("src busy %v, blocked %v: the reported waits were counted as busy", s.Busy, s.Blocked)
			}
			return
		case <-time.After(100 * time.Microsecond):
			check()
		}
	}
}
