package loaders

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// TestMemoryBudget: a Loader whose slots and device buffers would pass the budget is refused before
// it allocates, with the figure and what to change in the error.
func TestMemoryBudget(t *testing.T) {
	ds := NewMemory(Info{Shape: transforms.Shape{C: 3, H: 64, W: 64}, NumClasses: 2}, make([]Sample, 4))
	_, err := New(ds, Config{Batch: 64, Workers: 1, MemoryBudget: 1 << 20, Allocator: pinned.Heap()})
	if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "--memory") || !strings.Contains(err.Error(), "1.0 MiB") {
		t.Fatalf("New over a 1 MiB budget = %v; want ErrMemory naming the budget and --memory", err)
	}
	f, err := footprintOf(Config{Batch: 64, Prefetch: 2}, 3*64*64, 4)
	if err != nil || f.Slots != 4 || f.Sets != 4 || f.SlotBytes != 64*(3*64*64+4) || f.total() != 8*f.SlotBytes {
		t.Errorf("footprint = %+v, %v; want 4 host slots and 4 device sets of one batch", f, err)
	}
	// Sizes whose product overflows are refused too, with no budget at all.
	for _, c := range []Config{{Batch: 1 << 40, MemoryBudget: -1}, {Batch: 64, Prefetch: 1<<63 - 1, MemoryBudget: -1}} {
		c.Workers, c.Allocator = 1, pinned.Heap()
		if _, err := New(ds, c); !errors.Is(err, ErrMemory) {
			t.Errorf("New(batch %d, prefetch %d) = %v; want ErrMemory", c.Batch, c.Prefetch, err)
		}
	}
	// Within the budget (and with none) the same Loader opens.
	for _, budget := range []int64{64 << 20, -1} {
		l, err := New(ds, Config{Batch: 64, Workers: 1, MemoryBudget: budget, Allocator: pinned.Heap()})
		if err != nil {
			t.Fatalf("New with budget %d: %v", budget, err)
		}
		l.Close()
	}
	if DefaultMemoryBudget() <= 0 {
		t.Errorf("DefaultMemoryBudget() = %d", DefaultMemoryBudget())
	}
}

// TestEpochAllSkipped: an epoch in which the Skip policy left out every sample fails, whatever
// MaxSkipped allows.
func TestEpochAllSkipped(t *testing.T) {
	samples := make([]Sample, 6)
	for i := range samples {
		samples[i] = Sample{Input: transforms.Input{Pixels: make([]byte, 4), H: 2, W: 2, C: 1}, Label: 7}
	}
	ds := NewMemory(Info{Shape: transforms.Shape{C: 1, H: 2, W: 2}, NumClasses: 2}, samples)
	l, err := New(ds, Config{Batch: 2, Workers: 1, OnError: Skip, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last error
	for b, err := range l.Epoch(t.Context(), 0) {
		if err != nil {
			last = err
			break
		}
		b.Release()
		t.Fatal("a batch of nothing but bad samples was yielded")
	}
	if !errors.Is(last, ErrTooManySkipped) || !errors.Is(last, ErrLabel) {
		t.Errorf("epoch of bad samples = %v; want ErrTooManySkipped with the last cause", last)
	}
}

func TestSplitValidation(t *testing.T) {
	ds := NewMemory(Info{Name: "m"}, make([]Sample, 100))
	tr, val, err := SplitValidation(ds, 0.2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 80 || val.Len() != 20 {
		t.Fatalf("split sizes %d, %d; want 80, 20", tr.Len(), val.Len())
	}
	all := append(slices.Clone(tr.indices), val.indices...)
	slices.Sort(all)
	for i, v := range all {
		if v != i {
			t.Fatalf("training and validation indices %v: want each of 0..99 once (disjoint, covering)", all)
		}
	}
	_, again, _ := SplitValidation(ds, 0.2, 7)
	_, other, _ := SplitValidation(ds, 0.2, 8)
	if !slices.Equal(again.indices, val.indices) || slices.Equal(other.indices, val.indices) {
		t.Errorf("validation indices: seed 7 twice %v, %v, seed 8 %v; want equal for one seed, different for another", val.indices, again.indices, other.indices)
	}
	if !strings.Contains(val.Info().Name, "validation") {
		t.Errorf("validation name %q", val.Info().Name)
	}
	for _, f := range []float64{0, 1, -0.5, 0.001, 0.999} {
		if _, _, err := SplitValidation(ds, f, 1); !errors.Is(err, ErrConfig) {
			t.Errorf("SplitValidation(%v) = %v; want ErrConfig", f, err)
		}
	}
}

func TestWithClasses(t *testing.T) {
	ds := WithClasses(NewMemory(Info{Name: "m"}, []Sample{{Label: 1}, {Label: 5000000}}), 10)
	if Describe(ds).NumClasses != 10 {
		t.Errorf("NumClasses = %d; want 10", Describe(ds).NumClasses)
	}
	if _, err := ds.Sample(t.Context(), 0); err != nil {
		t.Error(err)
	}
	if _, err := ds.Sample(t.Context(), 1); !errors.Is(err, ErrLabel) || !strings.Contains(err.Error(), "5000000") {
		t.Errorf("label 5000000 of 10 classes = %v; want ErrLabel naming it", err)
	}
}
