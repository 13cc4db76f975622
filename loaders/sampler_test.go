package loaders

import (
	"errors"
	"slices"
	"testing"
)

func TestSamplerSequentialAndShuffled(t *testing.T) {
	seq := Sampler{Len: 5}
	if got, want := seq.Indices(3), []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("sequential Indices(3) = %v; want %v", got, want)
	}
	sh := Sampler{Len: 50, Shuffle: true, Seed: 7}
	e0, e0again, e1 := sh.Indices(0), sh.Indices(0), sh.Indices(1)
	if !slices.Equal(e0, e0again) {
		t.Errorf("shuffled Indices(0) differs between calls: %v vs %v", e0, e0again)
	}
	if slices.Equal(e0, e1) {
		t.Error("shuffled Indices(0) == Indices(1); want a new order each epoch")
	}
	other := Sampler{Len: 50, Shuffle: true, Seed: 8}
	if slices.Equal(e0, other.Indices(0)) {
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
	if got := (Sampler{}).Indices(0); got != nil {
		t.Errorf("empty Indices(0) = %v; want nil", got)
	}
}

// TestSamplerDistributed checks PyTorch DistributedSampler's properties: every rank the same length,
// ranks disjoint apart from the wrapped padding, together covering every index.
func TestSamplerDistributed(t *testing.T) {
	tests := []struct{ n, world int }{{10, 2}, {10, 3}, {7, 4}, {3, 5}, {100, 8}, {1, 1}}
	for _, tc := range tests {
		for _, shuffle := range []bool{false, true} {
			seen := map[int]int{}
			perRank := -1
			for r := range tc.world {
				s := Sampler{Len: tc.n, Shuffle: shuffle, Seed: 3, Rank: r, WorldSize: tc.world}
				if err := s.Validate(); err != nil {
					t.Fatal(err)
				}
				idx := s.Indices(2)
				if perRank >= 0 && len(idx) != perRank {
					t.Errorf("n=%d world=%d shuffle=%v: rank %d has %d indices; rank 0 has %d", tc.n, tc.world, shuffle, r, len(idx), perRank)
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
					t.Errorf("n=%d world=%d shuffle=%v: index %d on no rank", tc.n, tc.world, shuffle, i)
				}
				dups += seen[i] - 1
			}
			if pad := perRank*tc.world - tc.n; dups != pad {
				t.Errorf("n=%d world=%d shuffle=%v: %d repeated indices; want %d (padding only)", tc.n, tc.world, shuffle, dups, pad)
			}
		}
	}
}

func TestSamplerValidate(t *testing.T) {
	for _, s := range []Sampler{{Len: -1}, {Len: 3, Rank: 2, WorldSize: 2}, {Len: 3, Rank: 1}, {Len: 3, WorldSize: -1}} {
		if err := s.Validate(); !errors.Is(err, ErrSpec) {
			t.Errorf("%+v.Validate() = %v; want ErrSpec", s, err)
		}
	}
}
