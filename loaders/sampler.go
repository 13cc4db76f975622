package loaders

import (
	"fmt"

	"github.com/stoke-ml/stoke/internal/rng"
)

// Sampler decides which sample indices an epoch visits, in what order, on this rank. It is a value:
// Indices is a pure function of the fields and the epoch.
//
// With WorldSize > 1 it behaves like PyTorch's DistributedSampler: the epoch's order (shuffled or
// not) is padded by wrapping around to a multiple of WorldSize, and rank r takes positions r,
// r+WorldSize, ...; every rank gets ceil(Len/WorldSize) indices, so data-parallel ranks run the
// same number of steps. The ranks' shares are disjoint except for the wrapped padding, and together
// they cover every index.
type Sampler struct {
	// Len is the dataset's length.
	Len int
	// Shuffle permutes the order with a permutation that depends on (Seed, epoch) only.
	Shuffle bool
	Seed    uint64
	// Rank and WorldSize split the epoch between data-parallel processes; WorldSize 0 means 1.
	Rank, WorldSize int
}

// Validate checks the fields.
func (s Sampler) Validate() error {
	w := max(s.WorldSize, 1)
	if s.Len < 0 || s.WorldSize < 0 || s.Rank < 0 || s.Rank >= w {
		return fmt.Errorf("loaders: sampler: len %d, rank %d of world size %d: %w", s.Len, s.Rank, s.WorldSize, ErrSpec)
	}
	return nil
}

// PerRank returns the number of indices each rank gets per epoch: ceil(Len/WorldSize).
func (s Sampler) PerRank() int {
	w := max(s.WorldSize, 1)
	return (s.Len + w - 1) / w
}

// Indices returns this rank's indices for epoch, in visiting order (a new slice). It returns nil for
// an empty dataset.
func (s Sampler) Indices(epoch int) []int {
	if s.Len == 0 {
		return nil
	}
	order := make([]int, s.Len)
	for i := range order {
		order[i] = i
	}
	if s.Shuffle {
		r := rng.Epoch(s.Seed, epoch)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	w := max(s.WorldSize, 1)
	if w == 1 {
		return order
	}
	out := make([]int, 0, s.PerRank())
	for p := s.Rank; len(out) < s.PerRank(); p += w {
		out = append(out, order[p%s.Len])
	}
	return out
}
