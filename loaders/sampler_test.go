package loaders

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
)

func TestSamplerSequentialAndShuffled(t *testing.T) {
	if got, want := Sequential(5).Indices(1, 3), []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("Sequential(5).Indices = %v; want %v", got, want)
	}
	sh := Shuffled(50)
	e0, e0again, e1 := sh.Indices(7, 0), sh.Indices(7, 0), sh.Indices(7, 1)
	if !slices.Equal(e0, e0again) {
		t.Errorf("shuffled Indices(7, 0) differs between calls: %v vs %v", e0, e0again)
	}
	if slices.Equal(e0, e1) {
		t.Error("shuffled epochs 0 and 1 have the same order; want a new order each epoch")
	}
	if slices.Equal(e0, sh.Indices(8, 0)) {
		t.Error("seeds 7 and 8 give the same order")
	}
	for _, order := range [][]int{e0, e1} {
		sorted := slices.Sorted(slices.Values(order))
		for i, v := range sorted {
			if v != i {
				t.Fatalf("shuffled order %v is not a permutation of 0..49", order)
			}
		}
	}
}

// TestRankPart checks PyTorch DistributedSampler's properties: every rank the same length, ranks
// disjoint apart from the wrapped padding, together covering every index.
func TestRankPart(t *testing.T) {
	tests := []struct{ n, world int }{{10, 2}, {10, 3}, {7, 4}, {3, 5}, {100, 8}, {1, 1}}
	for _, tc := range tests {
		for _, s := range []Sampler{Sequential(tc.n), Shuffled(tc.n)} {
			seen := map[int]int{}
			perRank := -1
			for r := range tc.world {
				idx := rankPart(s.Indices(3, 2), r, tc.world)
				if perRank >= 0 && len(idx) != perRank {
					t.Errorf("n=%d world=%d: rank %d has %d indices; rank 0 has %d", tc.n, tc.world, r, len(idx), perRank)
				}
				perRank = len(idx)
				for _, i := range idx {
					seen[i]++
				}
			}
			if want := (tc.n + tc.world - 1) / tc.world; perRank != want {
				t.Errorf("n=%d world=%d: per rank %d; want %d", tc.n, tc.world, perRank, want)
			}
			dups := 0
			for i := range tc.n {
				if seen[i] == 0 {
					t.Errorf("n=%d world=%d: index %d on no rank", tc.n, tc.world, i)
				}
				dups += seen[i] - 1
			}
			if pad := perRank*tc.world - tc.n; dups != pad {
				t.Errorf("n=%d world=%d: %d repeated indices; want %d (padding only)", tc.n, tc.world, dups, pad)
			}
		}
	}
}

// TestClassBalanced draws from a long-tailed set (classes of 800, 150, 40 and 10 samples). Each of
// the n draws picks class c with probability 1/4, so a class's count is Binomial(n, 1/4): mean
// n/4, standard deviation sqrt(n/4*3/4). A count more than 5 standard deviations from the mean has
// probability below 6e-7 for a correct sampler, while an unbalanced one (uniform over samples)
// misses class 3's mean by hundreds of deviations. Within the rarest class each sample is drawn
// with probability 1/40, so the same bound applies with p = 1/40.
func TestClassBalanced(t *testing.T) {
	sizes := []int{800, 150, 40, 10}
	var labels []int
	for c, n := range sizes {
		for range n {
			labels = append(labels, c)
		}
	}
	const n = 40000
	s, err := ClassBalanced(labels, n)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != n {
		t.Fatalf("Len() = %d; want %d", s.Len(), n)
	}
	idx := s.Indices(1, 0)
	if len(idx) != n {
		t.Fatalf("%d indices; want %d", len(idx), n)
	}
	perClass := make([]int, len(sizes))
	perSample := make([]int, len(labels))
	for _, i := range idx {
		perClass[labels[i]]++
		perSample[i]++
	}
	within := func(what string, count int, p float64) {
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if math.Abs(float64(count)-mean) > 5*sd {
			t.Errorf("%s drawn %d times; want %.0f +- %.0f (5 standard deviations)", what, count, mean, 5*sd)
		}
	}
	for c, count := range perClass {
		within("class "+string(rune('0'+c)), count, 1.0/4)
	}
	rare := len(labels) - sizes[3]
	for i := rare; i < len(labels); i++ {
		within("sample of the rarest class", perSample[i], 1.0/4/float64(sizes[3]))
	}
	if slices.Equal(idx, s.Indices(1, 1)) || !slices.Equal(idx, s.Indices(1, 0)) {
		t.Error("draws must be the same for one (seed, epoch) and differ between epochs")
	}
}

func TestWeighted(t *testing.T) {
	s, err := Weighted([]float64{0, 1, 0, 3}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, i := range s.Indices(5, 0) {
		count[i]++
	}
	if count[0] != 0 || count[2] != 0 || count[1]+count[3] != 1000 {
		t.Errorf("draws %v; zero weights must never be drawn", count)
	}
	// Binomial(1000, 3/4): sd 13.7.
	if c := count[3]; c < 750-70 || c > 750+70 {
		t.Errorf("index 3 (weight 3 of 4) drawn %d times of 1000; want 750 +- 70", c)
	}
	for _, w := range [][]float64{nil, {0, 0}, {1, -1}, {math.NaN()}, {math.Inf(1)}} {
		if _, err := Weighted(w, 10); !errors.Is(err, ErrConfig) {
			t.Errorf("Weighted(%v) = %v; want ErrConfig", w, err)
		}
	}
	if _, err := Weighted([]float64{1}, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("Weighted with 0 draws = %v; want ErrConfig", err)
	}
	if _, err := ClassBalanced([]int{0, -1}, 3); !errors.Is(err, ErrLabel) {
		t.Errorf("ClassBalanced with a negative label = %v; want ErrLabel", err)
	}
}

func TestSplitShards(t *testing.T) {
	starts := func(sizes ...int) ([]int, int) {
		var s []int
		n := 0
		for _, z := range sizes {
			s = append(s, n)
			n += z
		}
		return s, n
	}
	tests := []struct {
		sizes []int
		world int
		ok    bool
		per   int
	}{
		{[]int{10, 10, 10, 10}, 2, true, 20},
		{[]int{10, 10, 10, 9}, 2, true, 20}, // one sample of padding
		{[]int{10, 10, 10, 1}, 2, false, 0}, // 9 samples of padding, more than an average shard
		{[]int{10, 10, 10}, 4, false, 0},    // fewer shards than ranks
		{[]int{5, 5, 5, 5, 5, 5}, 4, false, 0},
		{[]int{10, 10}, 1, false, 0},
	}
	for _, tc := range tests {
		st, n := starts(tc.sizes...)
		sp, ok := splitShards(st, n, tc.world)
		if ok != tc.ok || (ok && sp.per != tc.per) {
			t.Errorf("shards %v, world %d: ok %v per %d; want %v %d", tc.sizes, tc.world, ok, sp.per, tc.ok, tc.per)
			continue
		}
		if !ok {
			continue
		}
		seen := map[int]int{}
		for r := range tc.world {
			idx := sp.indices(r, true, 3, 1)
			if len(idx) != sp.per {
				t.Errorf("shards %v: rank %d has %d indices; want %d", tc.sizes, r, len(idx), sp.per)
			}
			own := map[int]bool{}
			for _, i := range idx {
				own[i] = true
			}
			for i := range own {
				seen[i]++
			}
		}
		for i := range n {
			if seen[i] != 1 {
				t.Errorf("shards %v: sample %d on %d ranks; want 1", tc.sizes, i, seen[i])
			}
		}
	}
}

func TestEnvRank(t *testing.T) {
	t.Setenv("RANK", "2")
	t.Setenv("WORLD_SIZE", "4")
	t.Setenv("LOCAL_RANK", "1")
	if r, w, lr, err := EnvRank(); r != 2 || w != 4 || lr != 1 || err != nil {
		t.Errorf("EnvRank() = %d, %d, %d, %v; want 2, 4, 1, nil", r, w, lr, err)
	}
	t.Setenv("RANK", "4")
	if _, _, _, err := EnvRank(); !errors.Is(err, ErrConfig) {
		t.Errorf("RANK=4 WORLD_SIZE=4: %v; want ErrConfig", err)
	}
	t.Setenv("RANK", "x")
	if _, _, _, err := EnvRank(); !errors.Is(err, ErrConfig) {
		t.Errorf("RANK=x: %v; want ErrConfig", err)
	}
}

// listSampler is a user Sampler that returns a fixed list, whatever its claimed length.
type listSampler struct {
	n    int
	list []int
}

func (s listSampler) Len() int                  { return s.n }
func (s listSampler) Indices(uint64, int) []int { return append([]int(nil), s.list...) }

// TestUserSampler: a user Sampler's order is what the Loader loads; a sampler that breaks its
// contract fails the epoch with a clear error; configurations that mix up the ways to order are
// refused.
func TestUserSampler(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(6, 1, 1, 1)
	l := newLoader(t, ds, Config{Batch: 2, Workers: 2, Sampler: listSampler{5, []int{5, 0, 5, 3, 1}}})
	var order []int
	for _, b := range epoch(t, l, 0, -1) {
		order = append(order, b.indices...)
	}
	if !slices.Equal(order, []int{5, 0, 5, 3, 1}) || l.BatchesPerEpoch() != 3 {
		t.Errorf("loaded %v in %d batches; want the sampler's [5 0 5 3 1] in 3", order, l.BatchesPerEpoch())
	}
	for _, tc := range []struct {
		s    Sampler
		want error
	}{{listSampler{2, []int{0, 6}}, ErrIndex}, {listSampler{3, []int{0, 1}}, ErrConfig}} {
		l := newLoader(t, ds, Config{Batch: 2, Workers: 1, Sampler: tc.s})
		for b, err := range l.Epoch(context.Background(), 0) {
			if b != nil {
				b.Release()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("sampler %+v: %v; want %v", tc.s, err, tc.want)
			}
		}
	}
	for _, cfg := range []Config{
		{Sampler: Sequential(6), Shuffle: true},
		{ShuffleBuffer: 10},
		{ShuffleBuffer: 10, Shuffle: true}, // a shuffle buffer is for streams
	} {
		if _, err := New(ds, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v; want ErrConfig", cfg, err)
		}
	}
}
