package loaders

import (
	"fmt"
	"math"
	"sort"

	"github.com/stoke-ml/stoke/internal/rng"
)

// Sampler decides which dataset indices an epoch visits, and in what order, over all ranks: the
// Loader gives each data-parallel rank its part of that order (see Config.WorldSize). Set one in
// Config.Sampler; nil means Sequential, or Shuffled with Config.Shuffle.
//
// Implement it to sample your own way (curriculum, hard-example mining, a fixed list). Indices must
// be a pure function of the seed and the epoch, so that the batches of an epoch do not depend on
// the worker count and a Loader can be restored mid-epoch.
type Sampler interface {
	// Len is the number of indices an epoch visits, over all ranks.
	Len() int
	// Indices returns the epoch's Len indices in visiting order, as a new slice; each must lie in
	// [0, the dataset's length). seed is Config.Seed.
	Indices(seed uint64, epoch int) []int
}

// Sequential returns the sampler that visits indices 0 to n-1 in order, every epoch.
func Sequential(n int) Sampler { return sequential(n) }

// Shuffled returns the sampler that visits indices 0 to n-1 once per epoch, in a permutation that
// depends on (seed, epoch) only (PyTorch's RandomSampler).
func Shuffled(n int) Sampler { return shuffled(n) }

type sequential int

func (s sequential) Len() int { return int(s) }

func (s sequential) Indices(uint64, int) []int {
	out := make([]int, s)
	for i := range out {
		out[i] = i
	}
	return out
}

type shuffled int

func (s shuffled) Len() int { return int(s) }

func (s shuffled) Indices(seed uint64, epoch int) []int {
	out := sequential(s).Indices(seed, epoch)
	r := rng.Epoch(seed, epoch)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Weighted returns a sampler that draws n indices per epoch, with replacement, index i with
// probability weights[i] / sum(weights) (PyTorch's WeightedRandomSampler with replacement). The
// draws depend on (seed, epoch) only. Weights must be finite and non-negative with a positive sum.
// The sampler keeps its own copy of the weights.
func Weighted(weights []float64, n int) (Sampler, error) {
	if n < 1 || len(weights) == 0 {
		return nil, fmt.Errorf("loaders: weighted sampler: %d weights, %d draws per epoch; want at least 1 of each: %w", len(weights), n, ErrSpec)
	}
	cum := make([]float64, len(weights))
	total := 0.0
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("loaders: weighted sampler: weight %d is %v; want finite and >= 0: %w", i, w, ErrSpec)
		}
		total += w
		cum[i] = total
	}
	if !(total > 0) || math.IsInf(total, 0) {
		return nil, fmt.Errorf("loaders: weighted sampler: weights sum to %v; want a finite positive sum: %w", total, ErrSpec)
	}
	return &weighted{cum: cum, n: n}, nil
}

// ClassBalanced returns a Weighted sampler that draws n indices per epoch so that every class
// present in labels (labels[i] is sample i's class) is drawn equally often on average: sample i has
// weight 1/count(labels[i]). It is the usual cure for a long-tailed training set.
func ClassBalanced(labels []int, n int) (Sampler, error) {
	count := map[int]int{}
	for i, c := range labels {
		if c < 0 {
			return nil, fmt.Errorf("loaders: class-balanced sampler: sample %d has label %d: %w", i, c, ErrLabel)
		}
		count[c]++
	}
	w := make([]float64, len(labels))
	for i, c := range labels {
		w[i] = 1 / float64(count[c])
	}
	return Weighted(w, n)
}

type weighted struct {
	cum []float64 // cumulative weights
	n   int
}

func (s *weighted) Len() int { return s.n }

func (s *weighted) Indices(seed uint64, epoch int) []int {
	r := rng.Epoch(seed, epoch)
	total := s.cum[len(s.cum)-1]
	out := make([]int, s.n)
	for k := range out {
		u := r.Float64() * total
		// The first index whose cumulative weight exceeds u: a zero weight is never drawn.
		out[k] = min(sort.Search(len(s.cum), func(i int) bool { return s.cum[i] > u }), len(s.cum)-1)
	}
	return out
}

// rankPart returns rank's part of an epoch's order split among world ranks like PyTorch's
// DistributedSampler: the order is padded by wrapping around to a multiple of world, and rank r
// takes positions r, r+world, ...; every rank gets ceil(len(order)/world) indices, the ranks' parts
// are disjoint apart from the padding, and together they cover the order.
func rankPart(order []int, rank, world int) []int {
	if world <= 1 {
		return order
	}
	per := (len(order) + world - 1) / world
	out := make([]int, 0, per)
	for p := rank; len(out) < per; p += world {
		out = append(out, order[p%len(order)])
	}
	return out
}
