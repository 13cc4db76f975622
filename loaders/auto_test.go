package loaders

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
)

// TestAutoWorkers checks that Config.Workers = AutoWorkers opens a Loader with a measured worker
// count within the cores, whose batches are those of any fixed count, and that other negative
// counts are refused.
func TestAutoWorkers(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(64, 4, 4, 3)
	l := newLoader(t, ds, Config{Batch: 8, Workers: AutoWorkers, Shuffle: true, Seed: 3})
	if w := l.Workers(); w < 1 || w > runtime.GOMAXPROCS(0) {
		t.Fatalf("AutoWorkers chose %d workers; want 1..%d", w, runtime.GOMAXPROCS(0))
	}
	got := epoch(t, l, 1, -1)
	want := epoch(t, newLoader(t, ds, Config{Batch: 8, Workers: 1, Shuffle: true, Seed: 3}), 1, -1)
	if len(got) != len(want) {
		t.Fatalf("%d batches; want %d", len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i].images, want[i].images) || !slices.Equal(got[i].labels, want[i].labels) {
			t.Fatalf("batch %d differs from the 1-worker loader's", i)
		}
	}
	if st := l.Stats(); len(st.Stages) == 0 || st.Stages[1].Workers != l.Workers() {
		t.Errorf("stats %+v; want the transform stage with %d workers", st.Stages, l.Workers())
	}
	if _, err := New(ds, Config{Workers: -2}); !errors.Is(err, ErrConfig) {
		t.Errorf("Workers -2: %v; want ErrConfig", err)
	}
}

// sleepyDataset takes d to read every sample.
type sleepyDataset struct {
	Dataset
	d time.Duration
}

func (s sleepyDataset) Info() Info { return Describe(s.Dataset) }

func (s sleepyDataset) Sample(ctx context.Context, i int) (Sample, error) {
	time.Sleep(s.d)
	return s.Dataset.Sample(ctx, i)
}

// TestStatsRead checks that Stats.Read counts the time spent in Dataset.Sample, within the
// transform stage's busy time.
func TestStatsRead(t *testing.T) {
	loadertest.NoLeaks(t)
	l := newLoader(t, sleepyDataset{rawDataset(20, 2, 2, 1), 2 * time.Millisecond}, Config{Batch: 5, Workers: 2})
	epoch(t, l, 0, -1)
	st := l.Stats()
	if st.Read < 40*time.Millisecond {
		t.Errorf("Read = %v; want >= 40ms (20 samples of 2ms)", st.Read)
	}
	if busy := st.Stages[1].Busy; st.Read > busy {
		t.Errorf("Read = %v beyond the transform stage's busy %v", st.Read, busy)
	}
}

// TestStreamAutoWorkers: a stream loader sizes its workers with AutoWorkers too, and yields the
// batches a fixed worker count does.
func TestStreamAutoWorkers(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 10, 7, 9)
	cfg := Config{Batch: 4, Workers: AutoWorkers, Shuffle: true, ShuffleBuffer: 5, Seed: 2, Transform: streamTransform}
	l := newStreamLoader(t, src, cfg)
	if w := l.Workers(); w < 1 || w > runtime.GOMAXPROCS(0) {
		t.Fatalf("AutoWorkers chose %d workers; want 1..%d", w, runtime.GOMAXPROCS(0))
	}
	cfg.Workers = 3
	got, want := epoch(t, l, 0, -1), epoch(t, newStreamLoader(t, src, cfg), 0, -1)
	if len(got) != len(want) {
		t.Fatalf("%d batches; want %d", len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i].images, want[i].images) || !slices.Equal(got[i].indices, want[i].indices) {
			t.Fatalf("batch %d differs from the 3-worker loader's", i)
		}
	}
}
