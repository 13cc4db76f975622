package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func seq(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	return xs
}

// collect runs p through Iter and returns every value it yields, and the error.
func collect[T any](ctx context.Context, p *Pipeline, s *Queue[T]) ([]T, error) {
	var out []T
	for v, err := range Iter(ctx, p, s) {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func TestOrderedMapKeepsOrderUnderRandomDelays(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8, 16} {
		for _, window := range []int{0, 1, 5} { // 0 means the default
			t.Run(fmt.Sprintf("workers=%d/window=%d", workers, window), func(t *testing.T) {
				const n = 300
				p := New()
				src := FromSlice(p, "src", seq(n))
				opts := []StageOption{Workers(workers), Ordered(true)}
				if window > 0 {
					opts = append(opts, Window(window))
				}
				sq := Map(p, "square", src, func(_ context.Context, x int) (int, error) {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
					return x * x, nil
				}, opts...)
				got, err := collect(t.Context(), p, sq)
				if err != nil {
					t.Fatalf("Run = %v; want nil", err)
				}
				if len(got) != n {
					t.Fatalf("got %d items; want %d", len(got), n)
				}
				for i, v := range got {
					if v != i*i {
						t.Fatalf("item %d = %d; want %d", i, v, i*i)
					}
				}
			})
		}
	}
}

func TestUnorderedMapDeliversEveryItemOnce(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p := New()
			src := FromSlice(p, "src", seq(200))
			m := Map(p, "id", src, func(_ context.Context, x int) (int, error) {
				time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
				return x, nil
			}, Workers(workers))
			got, err := collect(t.Context(), p, m)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, seq(200)) {
				t.Errorf("sorted output = %v...; want 0..199 once each", got[:min(10, len(got))])
			}
		})
	}
}

func TestZeroAndOneItem(t *testing.T) {
	for _, n := range []int{0, 1} {
		for _, ordered := range []bool{false, true} {
			t.Run(fmt.Sprintf("n=%d/ordered=%v", n, ordered), func(t *testing.T) {
				p := New()
				src := FromSlice(p, "src", seq(n))
				m := Map(p, "inc", src, func(_ context.Context, x int) (int, error) { return x + 1, nil }, Workers(3), Ordered(ordered))
				b := Batch(p, "batch", m, 4)
				got, err := collect(t.Context(), p, b)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != n {
					t.Fatalf("batches = %v; want %d batch(es)", got, n)
				}
				if n == 1 && !slices.Equal(got[0], []int{1}) {
					t.Errorf("batch 0 = %v; want [1]", got[0])
				}
			})
		}
	}
}

func TestBatch(t *testing.T) {
	tests := []struct {
		n, size  int
		dropLast bool
		want     [][]int
	}{
		{5, 2, false, [][]int{{0, 1}, {2, 3}, {4}}},
		{5, 2, true, [][]int{{0, 1}, {2, 3}}},
		{4, 2, true, [][]int{{0, 1}, {2, 3}}},
		{3, 5, false, [][]int{{0, 1, 2}}},
		{3, 5, true, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d/%d/%v", tc.n, tc.size, tc.dropLast), func(t *testing.T) {
			p := New()
			var opts []StageOption
			if tc.dropLast {
				opts = append(opts, DropLast())
			}
			b := Batch(p, "batch", FromSlice(p, "src", seq(tc.n)), tc.size, opts...)
			got, err := collect(t.Context(), p, b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("Batch(%d items, %d, dropLast=%v) = %v; want %v", tc.n, tc.size, tc.dropLast, got, tc.want)
			}
		})
	}
}

func TestErrorNamesStageAndItem(t *testing.T) {
	bad := errors.New("corrupt sample")
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			p := New()
			src := FromSlice(p, "src", seq(1000))
			m := Map(p, "decode", src, func(_ context.Context, x int) (int, error) {
				if x == 37 {
					return 0, bad
				}
				return x, nil
			}, Workers(4), Ordered(ordered))
			Sink(p, "sink", m, func(context.Context, int) error { return nil })
			err := p.Run(t.Context())
			var se *StageError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %v; want a *StageError", err)
			}
			if se.Stage != "decode" || se.Index != 37 || !errors.Is(err, bad) {
				t.Errorf("Run = %v; want stage \"decode\", item 37, wrapping %v", err, bad)
			}
			if want := `pipeline: stage "decode": item 37: corrupt sample`; err.Error() != want {
				t.Errorf("Error() = %q; want %q", err.Error(), want)
			}
		})
	}
}

func TestPanicBecomesErrorWithStack(t *testing.T) {
	p := New()
	m := Map(p, "augment", FromSlice(p, "src", seq(10)), func(_ context.Context, x int) (int, error) {
		if x == 3 {
			var m map[string]int
			m["boom"] = 1 // nil map write panics
		}
		return x, nil
	}, Workers(2), Ordered(true))
	_, err := collect(t.Context(), p, m)
	var se *StageError
	var pe *PanicError
	if !errors.As(err, &se) || !errors.As(err, &pe) {
		t.Fatalf("Run = %v; want *StageError wrapping *PanicError", err)
	}
	if se.Stage != "augment" || se.Index != 3 {
		t.Errorf("StageError = stage %q item %d; want \"augment\" item 3", se.Stage, se.Index)
	}
	if !strings.Contains(string(pe.Stack), "pipeline_test.go") {
		t.Errorf("panic stack does not show the panicking function:\n%s", pe.Stack)
	}
}

func TestSourceErrorAndSinkError(t *testing.T) {
	bad := errors.New("disk gone")
	p := New()
	n := 0
	src := FromFunc(p, "reader", func(context.Context) (int, bool, error) {
		n++
		if n == 5 {
			return 0, false, bad
		}
		return n, true, nil
	})
	Sink(p, "sink", src, func(context.Context, int) error { return nil })
	var se *StageError
	if err := p.Run(t.Context()); !errors.As(err, &se) || se.Stage != "reader" || se.Index != 4 || !errors.Is(err, bad) {
		t.Errorf("Run = %v; want reader item 4 wrapping %v", err, bad)
	}

	p = New()
	Sink(p, "writer", FromSlice(p, "src", seq(10)), func(_ context.Context, x int) error {
		if x == 6 {
			return bad
		}
		return nil
	})
	if err := p.Run(t.Context()); !errors.As(err, &se) || se.Stage != "writer" || se.Index != 6 {
		t.Errorf("Run = %v; want writer item 6", err)
	}
}

// A consumer that stops taking items must stall the producers: the number of items the source
// has produced but the consumer has not taken stays below the sum of the pipeline's buffers.
func TestBackpressureBoundsMemory(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			var produced atomic.Int64
			p := New()
			src := FromFunc(p, "src", func(context.Context) (int, bool, error) {
				return int(produced.Add(1)), true, nil // endless
			}, Buffer(1))
			opts := []StageOption{Workers(4), Ordered(ordered), Buffer(4)}
			if ordered {
				opts = append(opts, Window(8))
			}
			m := Map(p, "work", src, func(_ context.Context, x int) (int, error) { return x, nil }, opts...)
			pf := Prefetch(p, "prefetch", m, 3)
			consumed := 0
			for _, err := range Iter(t.Context(), p, pf) {
				if err != nil {
					t.Fatal(err)
				}
				consumed++
				if consumed == 10 {
					time.Sleep(50 * time.Millisecond) // stalled consumer
					break
				}
			}
			// src buffer 1 + one in flight in src + map: 8 (window) or 4 (workers) + out buffer 4
			// + prefetch: 1 held + 3 buffered.
			bound := int64(consumed + 1 + 1 + 8 + 4 + 1 + 3)
			if got := produced.Load(); got > bound {
				t.Errorf("source produced %d items with a stalled consumer after %d; want <= %d", got, consumed, bound)
			}
		})
	}
}

// One very slow item must not let an ordered map run ahead without bound.
func TestOrderedWindowBoundsHeadOfLineBlocking(t *testing.T) {
	var started atomic.Int64
	release := make(chan struct{})
	p := New()
	m := Map(p, "work", FromSlice(p, "src", seq(1000)), func(ctx context.Context, x int) (int, error) {
		started.Add(1)
		if x == 0 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return x, nil
	}, Workers(4), Ordered(true), Window(6))
	done := make(chan error, 1)
	go func() {
		_, err := collect(t.Context(), p, m)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if got := started.Load(); got > 6 {
		t.Errorf("ordered map started %d items while item 0 was stuck; want <= window 6", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCancelMidStreamJoinsEverything(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			ctx, cancel := context.WithCancel(t.Context())
			p := New()
			src := FromFunc(p, "src", func(context.Context) (int, bool, error) { return 1, true, nil })
			m := Map(p, "slow", src, func(ctx context.Context, x int) (int, error) {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				return x, nil
			}, Workers(4), Ordered(ordered))
			b := Batch(p, "batch", m, 8)
			var count atomic.Int64
			Sink(p, "sink", b, func(context.Context, []int) error {
				if count.Add(1) == 5 {
					cancel()
				}
				return nil
			})
			if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("Run after cancel = %v; want context.Canceled", err)
			}
		})
	}
}

func TestIterBreakStopsPipeline(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := New()
	m := Map(p, "m", FromSlice(p, "src", seq(10000)), func(_ context.Context, x int) (int, error) { return x, nil }, Workers(3), Ordered(true))
	got := 0
	for v, err := range Iter(t.Context(), p, m) {
		if err != nil {
			t.Fatal(err)
		}
		if v != got {
			t.Fatalf("item %d = %d", got, v)
		}
		got++
		if got == 7 {
			break
		}
	}
	if got != 7 {
		t.Errorf("consumed %d; want 7", got)
	}
}

func TestMisuseIsReported(t *testing.T) {
	t.Run("unconsumed", func(t *testing.T) {
		p := New()
		src := FromSlice(p, "src", seq(3))
		Map(p, "dangling", src, func(_ context.Context, x int) (int, error) { return x, nil })
		if err := p.Run(t.Context()); !errors.Is(err, ErrUnconsumed) || !strings.Contains(err.Error(), "dangling") {
			t.Errorf("Run = %v; want ErrUnconsumed naming \"dangling\"", err)
		}
	})
	t.Run("consumed twice", func(t *testing.T) {
		p := New()
		src := FromSlice(p, "src", seq(3))
		Sink(p, "a", src, func(context.Context, int) error { return nil })
		Sink(p, "b", src, func(context.Context, int) error { return nil })
		if err := p.Run(t.Context()); !errors.Is(err, ErrReused) {
			t.Errorf("Run = %v; want ErrReused", err)
		}
	})
	t.Run("run twice", func(t *testing.T) {
		p := New()
		Sink(p, "a", FromSlice(p, "src", seq(3)), func(context.Context, int) error { return nil })
		if err := p.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); !errors.Is(err, ErrReused) {
			t.Errorf("second Run = %v; want ErrReused", err)
		}
	})
	t.Run("bad batch size", func(t *testing.T) {
		p := New()
		b := Batch(p, "b", FromSlice(p, "src", seq(3)), 0)
		if _, err := collect(t.Context(), p, b); err == nil || !strings.Contains(err.Error(), "batch size 0") {
			t.Errorf("Run = %v; want a batch size error", err)
		}
	})
}

func TestFromSeq(t *testing.T) {
	p := New()
	s := FromSeq(p, "seq", slices.Values([]string{"a", "b", "c"}))
	got, err := collect(t.Context(), p, s)
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("FromSeq = %v, %v; want [a b c], nil", got, err)
	}
}

type spanCounter struct{ n atomic.Int64 }

func (c *spanCounter) Span(string, int, int64, time.Time, time.Time) { c.n.Add(1) }

func TestStatsAddUp(t *testing.T) {
	const n, workers = 40, 2
	const work = 2 * time.Millisecond
	tr := &spanCounter{}
	p := New(WithTracer(tr))
	src := FromSlice(p, "src", seq(n))
	m := Map(p, "sleep", src, func(_ context.Context, x int) (int, error) {
		time.Sleep(work)
		return x, nil
	}, Workers(workers), Ordered(true))
	b := Batch(p, "batch", m, 8)
	Sink(p, "sink", b, func(context.Context, []int) error { return nil })
	start := time.Now()
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	stats := p.Stats()
	if len(stats) != 4 {
		t.Fatalf("Stats() has %d stages; want 4", len(stats))
	}
	byName := map[string]StageStats{}
	for _, s := range stats {
		byName[s.Name] = s
	}
	sm := byName["sleep"]
	if sm.In != n || sm.Out != n || sm.Workers != workers || !sm.Ordered || sm.Kind != "map" {
		t.Errorf("sleep stats = %+v; want In=Out=%d, %d workers, ordered map", sm, n, workers)
	}
	if sm.Busy < n*work {
		t.Errorf("sleep Busy = %v; want >= %v (n x sleep)", sm.Busy, n*work)
	}
	if total := sm.Busy + sm.Starved + sm.Blocked; total > time.Duration(workers)*sm.Elapsed+time.Millisecond {
		t.Errorf("sleep busy+starved+blocked = %v; exceeds workers x elapsed = %v", total, time.Duration(workers)*sm.Elapsed)
	}
	if f := sm.BusyFraction(); f < 0.5 || f > 1 {
		t.Errorf("sleep BusyFraction = %.2f; want the bottleneck to be mostly busy", f)
	}
	if sm.Elapsed <= 0 || sm.Elapsed > wall {
		t.Errorf("Elapsed = %v; want in (0, %v]", sm.Elapsed, wall)
	}
	if bs := byName["batch"]; bs.In != n || bs.Out != 5 {
		t.Errorf("batch In/Out = %d/%d; want %d/5", bs.In, bs.Out, n)
	}
	if ss := byName["sink"]; ss.In != 5 || ss.Out != 5 || ss.StarvedFraction() < 0.5 {
		t.Errorf("sink = %+v; want 5 in/out and mostly starved behind the slow map", ss)
	}
	// One span per call of the source function (n+1: the last one reports the end), per map item,
	// per sink batch.
	if got := tr.n.Load(); got != n+1+n+5 {
		t.Errorf("tracer saw %d spans; want %d", got, n+1+n+5)
	}
}

// TestStageOptionErrors: an option a stage does not take, or a value out of range, fails Run with
// ErrOption naming the stage and the option, before any stage runs; the options a stage takes run.
func TestStageOptionErrors(t *testing.T) {
	id := func(_ context.Context, x int) (int, error) { return x, nil }
	tests := []struct {
		name  string
		build func(p *Pipeline) *Queue[int]
		want  string // "" for no error
	}{
		{"source Workers", func(p *Pipeline) *Queue[int] { return FromSlice(p, "src", seq(3), Workers(2)) },
			`"src": bad stage option: Workers does not apply to a source stage`},
		{"source DropLast", func(p *Pipeline) *Queue[int] { return FromSeq(p, "src", slices.Values(seq(3)), DropLast()) }, "DropLast does not apply"},
		{"map DropLast", func(p *Pipeline) *Queue[int] { return Map(p, "m", FromSlice(p, "src", seq(3)), id, DropLast()) },
			`"m": bad stage option: DropLast does not apply to a map stage`},
		{"unordered Window", func(p *Pipeline) *Queue[int] { return Map(p, "m", FromSlice(p, "src", seq(3)), id, Window(4)) },
			"Window applies to an ordered Map only"},
		{"Workers(0)", func(p *Pipeline) *Queue[int] { return Map(p, "m", FromSlice(p, "src", seq(3)), id, Workers(0)) }, "Workers(0); want >= 1"},
		{"Buffer(-1)", func(p *Pipeline) *Queue[int] { return FromSlice(p, "src", seq(3), Buffer(-1)) }, "Buffer(-1); want >= 0"},
		{"batch Ordered", func(p *Pipeline) *Queue[int] {
			b := Batch(p, "b", FromSlice(p, "src", seq(3)), 2, Ordered(true))
			return Map(p, "len", b, func(_ context.Context, x []int) (int, error) { return len(x), nil })
		}, "Ordered does not apply to a batch stage"},
		{"all that apply", func(p *Pipeline) *Queue[int] {
			m := Map(p, "m", FromSlice(p, "src", seq(5), Buffer(1)), id, Workers(2), Ordered(true), Window(2), Buffer(0))
			b := Batch(p, "b", m, 2, DropLast(), Buffer(3))
			return Map(p, "len", b, func(_ context.Context, x []int) (int, error) { return len(x), nil })
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New()
			got, err := collect(t.Context(), p, tc.build(p))
			if tc.want == "" {
				if err != nil || !slices.Equal(got, []int{2, 2}) {
					t.Fatalf("collect = %v, %v; want [2 2] (the last short batch dropped)", got, err)
				}
				return
			}
			if !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v; want ErrOption saying %q", err, tc.want)
			}
		})
	}
}

// TestIterPanicStopsPipeline: a loop body that panics stops the pipeline, and its goroutines have
// exited when the panic leaves Iter: no stage function is still running.
func TestIterPanicStopsPipeline(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := New()
	var active atomic.Int64
	m := Map(p, "m", FromSlice(p, "src", seq(10000)), func(_ context.Context, x int) (int, error) {
		active.Add(1)
		defer active.Add(-1)
		time.Sleep(5 * time.Millisecond)
		return x, nil
	}, Workers(3))
	func() {
		defer func() {
			if r := recover(); r != "user code" {
				t.Fatalf("recovered %v", r)
			}
		}()
		for range Iter(t.Context(), p, m) {
			panic("user code")
		}
	}()
	if n := active.Load(); n != 0 {
		t.Fatalf("%d stage calls still running after the panic left Iter; want 0", n)
	}
}
