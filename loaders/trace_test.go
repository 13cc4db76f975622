package loaders

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
)

type span struct {
	stage      string
	worker     int
	index      int64
	start, end time.Time
}

// spanRecorder is a pipeline.Tracer that keeps every span.
type spanRecorder struct {
	mu    sync.Mutex
	spans []span
}

func (r *spanRecorder) Span(stage string, worker int, index int64, start, end time.Time) {
	r.mu.Lock()
	r.spans = append(r.spans, span{stage, worker, index, start, end})
	r.mu.Unlock()
}

func (r *spanRecorder) of(stage string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.stage == stage {
			out = append(out, s)
		}
	}
	return out
}

func TestLoaderTracer(t *testing.T) {
	const n, batch, workers = 50, 8, 3
	for _, withStream := range []bool{false, true} {
		name := map[bool]string{false: "host consumer", true: "compute stream"}[withStream]
		t.Run(name, func(t *testing.T) {
			loadertest.NoLeaks(t)
			dev, err := gpu.Open("cpu")
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			var compute gpu.Stream
			if withStream {
				if compute, err = dev.NewStream(); err != nil {
					t.Fatal(err)
				}
				defer compute.Close()
			}
			rec := &spanRecorder{}
			l := newLoader(t, rawDataset(n, 4, 4, 1), Config{Batch: batch, Workers: workers, Device: dev, Stream: compute, Tracer: rec})
			before := time.Now()
			for b, err := range l.Epoch(context.Background(), 0) {
				if err != nil {
					t.Fatal(err)
				}
				b.Release()
			}
			after := time.Now()
			if err := l.Close(); err != nil { // every copy is accounted in Stats once closed
				t.Fatal(err)
			}

			var idx []int64
			for _, s := range rec.of("transform") {
				if s.worker < 0 || s.worker >= workers {
					t.Errorf("transform span of item %d: worker = %d; want 0..%d", s.index, s.worker, workers-1)
				}
				idx = append(idx, s.index)
			}
			slices.Sort(idx)
			if want := seq(n); !slices.Equal(idx, want) {
				t.Errorf("transform span indices = %v; want %v (one per sample)", idx, want)
			}

			copies := rec.of(CopyStage)
			slices.SortFunc(copies, func(a, b span) int { return int(a.index - b.index) })
			idx = idx[:0]
			var total time.Duration
			for _, s := range copies {
				idx = append(idx, s.index)
				total += s.end.Sub(s.start)
				if s.worker != 0 || s.start.After(s.end) || s.start.Before(before) || s.end.After(after) {
					t.Errorf("copy span %+v; want worker 0, start <= end, within the epoch [%v, %v]", s, before, after)
				}
			}
			if want := seq(l.BatchesPerEpoch()); !slices.Equal(idx, want) {
				t.Errorf("%s span indices = %v; want %v (one per batch)", CopyStage, idx, want)
			}
			if st := l.Stats(); total != st.CopyTime || total <= 0 {
				t.Errorf("copy spans last %v in all; want the feeder's copy time %v (> 0)", total, st.CopyTime)
			}
		})
	}
}

// TestLoaderTracerStop stops mid-epoch, by breaking out of the loop or cancelling the context:
// the epoch returns with every goroutine joined, and after a break every batch yielded has its copy
// span.
func TestLoaderTracerStop(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "break", true: "cancel"}[cancel], func(t *testing.T) {
			loadertest.NoLeaks(t)
			rec := &spanRecorder{}
			l := newLoader(t, rawDataset(64, 2, 2, 1), Config{Batch: 4, Workers: 2, Tracer: rec})
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			yielded := 0
			for b, err := range l.Epoch(ctx, 0) {
				if err != nil {
					if cancel && errors.Is(err, context.Canceled) {
						break
					}
					t.Fatal(err)
				}
				b.Release()
				if yielded++; yielded == 3 {
					if !cancel {
						break
					}
					stop()
				}
			}
			if cancel {
				return // copies in flight when the context ended may go untraced
			}
			got := map[int64]bool{}
			for _, s := range rec.of(CopyStage) {
				got[s.index] = true
			}
			for k := range int64(yielded) {
				if !got[k] {
					t.Errorf("no %s span for yielded batch %d (spans for %v)", CopyStage, k, got)
				}
			}
		})
	}
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}
