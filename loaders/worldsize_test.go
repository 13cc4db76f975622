package loaders_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// TestResumeAtAnotherWorldSize: with the global batch kept (world x batch), global batch k of an
// epoch holds the same samples whatever the world size, because the ranks take strided parts of
// one order (DistributedSampler's): so a position saved by 2 ranks after batch k continues on 1
// rank, or on 4, with the same remaining global batches, each loader placed at batch k by its
// own State without reading the batches before.
func TestResumeAtAnotherWorldSize(t *testing.T) {
	ds := &countingDataset{Memory: loaders.NewMemory(loaders.Info{Name: "mine", NumClasses: 3, Shape: transforms.Shape{C: 1, H: 1, W: 1}}, tinySamples(120))}
	const global, epoch, k = 12, 1, 4
	// globalBatches runs the epoch from batch `from` on world ranks of batch global/world and
	// returns each global batch's samples, sorted.
	globalBatches := func(world, from int) [][]int {
		var out [][]int
		for r := range world {
			l, err := loaders.New(ds, loaders.Config{Batch: global / world, Workers: 2, Shuffle: true, Seed: 9, Rank: r, WorldSize: world,
				Allocator: pinned.Heap()})
			if err != nil {
				t.Fatal(err)
			}
			s := l.State()
			s.Epoch, s.Batch = epoch, from
			if err := l.Restore(s); err != nil {
				t.Fatal(err)
			}
			ds.reset()
			got := read(t, l, epoch, -1)
			l.Close()
			if read := ds.indices(); !slices.Equal(read, sorted(got)) {
				t.Fatalf("rank %d of %d from batch %d read samples %v; it delivers %v", r, world, from, read, sorted(got))
			}
			per := global / world
			for b := 0; b*per < len(got); b++ {
				if r == 0 {
					out = append(out, nil)
				}
				out[b] = append(out[b], got[b*per:min((b+1)*per, len(got))]...)
			}
		}
		for _, b := range out {
			slices.Sort(b)
		}
		return out
	}
	want := globalBatches(2, 0)[k:] // the uninterrupted 2-rank epoch's batches after k
	for _, world := range []int{1, 2, 4} {
		got := globalBatches(world, k)
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("resumed on %d ranks at batch %d: global batches %v; the 2-rank run's %v", world, k, got, want)
		}
	}
}

// TestRandomSubset: n distinct samples in the dataset's order, the same for the same seed and
// others for another; n outside 1..Len is refused.
func TestRandomSubset(t *testing.T) {
	ds := loaders.NewMemory(loaders.Info{Name: "mine", NumClasses: 3, Shape: transforms.Shape{C: 1, H: 1, W: 1}}, tinySamples(50))
	indices := func(seed uint64) []int {
		s, err := loaders.RandomSubset(ds, 10, seed)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int, s.Len())
		for i := range out {
			out[i] = s.Index(i)
		}
		return out
	}
	a, b, c := indices(1), indices(1), indices(2)
	if len(a) != 10 || !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != 10 || a[9] >= 50 {
		t.Fatalf("indices %v; want 10 distinct sorted indices below 50", a)
	}
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("seed 1 gives %v and %v, seed 2 %v; want the same for one seed, others for another", a, b, c)
	}
	for _, n := range []int{0, 51} {
		if _, err := loaders.RandomSubset(ds, n, 1); !errors.Is(err, loaders.ErrConfig) {
			t.Errorf("RandomSubset of %d: %v; want ErrConfig", n, err)
		}
	}
}

// countingDataset records the samples read from it.
type countingDataset struct {
	*loaders.Memory
	mu   sync.Mutex
	read []int
}

func (d *countingDataset) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	d.mu.Lock()
	d.read = append(d.read, i)
	d.mu.Unlock()
	return d.Memory.Sample(ctx, i)
}

func (d *countingDataset) reset() {
	d.mu.Lock()
	d.read = nil
	d.mu.Unlock()
}

// indices is what was read since reset, sorted.
func (d *countingDataset) indices() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sorted(d.read)
}

func sorted(v []int) []int {
	v = slices.Clone(v)
	slices.Sort(v)
	return v
}
