package loaders

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/stoke-ml/stoke/internal/rng"
)

// Subset is the samples of a dataset at some of its indices, in their order.
type Subset struct {
	ds      Dataset
	info    Info
	indices []int
}

var (
	_ Dataset   = (*Subset)(nil)
	_ Describer = (*Subset)(nil)
)

// NewSubset returns the samples of ds at indices (kept, not copied). Its Info is ds's, with name.
func NewSubset(ds Dataset, name string, indices []int) *Subset {
	info := Describe(ds)
	info.Name = name
	return &Subset{ds: ds, info: info, indices: indices}
}

// SplitValidation splits ds into a training and a validation subset, disjoint and covering it: a
// seeded random fraction frac (0 < frac < 1, at least one sample on each side) goes to validation.
// The split depends on (ds.Len(), frac, seed) only, so that a resumed run validates on the same
// samples. Both subsets keep ds's order.
func SplitValidation(ds Dataset, frac float64, seed uint64) (train, val *Subset, err error) {
	n := ds.Len()
	nv := int(frac*float64(n) + 0.5)
	if !(frac > 0 && frac < 1) || nv < 1 || nv >= n {
		return nil, nil, fmt.Errorf("loaders: validation split %v of %d samples: want a fraction in (0, 1) leaving at least one sample on each side: %w", frac, n,
			ErrConfig)
	}
	// A seeded Fisher-Yates permutation's first nv indices validate, on a stream of its own
	// ("validate"), unrelated to the epochs' orders.
	isVal := make([]bool, n)
	for _, i := range drawn(n, nv, seed, 0x76616c6964617465) {
		isVal[i] = true
	}
	var ti, vi []int
	for i, v := range isVal {
		if v {
			vi = append(vi, i)
		} else {
			ti = append(ti, i)
		}
	}
	name := Describe(ds).Name
	return NewSubset(ds, name+" (training part)", ti), NewSubset(ds, name+" (validation part)", vi), nil
}

// RandomSubset returns n samples of ds drawn without replacement by seed, in ds's order: the same
// for the same (ds.Len(), n, seed), so that every epoch and a resumed run take the same ones (a
// shorter run on part of the data, Lightning's limit_train_batches as a fixed sample). n must be
// from 1 to ds.Len().
func RandomSubset(ds Dataset, n int, seed uint64) (*Subset, error) {
	if n < 1 || n > ds.Len() {
		return nil, fmt.Errorf("loaders: a subset of %d of %d samples: %w", n, ds.Len(), ErrConfig)
	}
	return NewSubset(ds, fmt.Sprintf("%s (%d samples)", Describe(ds).Name, n), drawn(ds.Len(), n, seed, 0x6c696d6974)), nil // "limit"
}

// drawn returns n of the indices 0..total-1, drawn by seed from the stream named stream (a seeded
// Fisher-Yates permutation's first n), sorted.
func drawn(total, n int, seed, stream uint64) []int {
	perm := make([]int, total)
	for i := range perm {
		perm[i] = i
	}
	r := rand.New(rand.NewPCG(rng.Mix(seed, stream, 1), rng.Mix(seed, stream, 2)))
	r.Shuffle(total, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	out := perm[:n]
	slices.Sort(out)
	return out
}

// Len returns the number of indices.
func (s *Subset) Len() int { return len(s.indices) }

// Info returns the dataset's Info under the subset's name.
func (s *Subset) Info() Info { return s.info }

// Sample returns sample i of the subset, which is sample indices[i] of the dataset.
func (s *Subset) Sample(ctx context.Context, i int) (Sample, error) {
	if err := CheckIndex(s.info.Name, i, len(s.indices)); err != nil {
		return Sample{}, err
	}
	return s.ds.Sample(ctx, s.indices[i])
}

// Index returns the dataset's index of the subset's sample i (0 <= i < Len).
func (s *Subset) Index(i int) int { return s.indices[i] }

// WithClasses returns ds declared to have classes classes: its Info says so, and a sample whose
// label is outside [0, classes) is an error wrapping ErrLabel that names it.
func WithClasses(ds Dataset, classes int) Dataset {
	info := Describe(ds)
	info.NumClasses = classes
	return &classed{ds, info}
}

type classed struct {
	ds   Dataset
	info Info
}

func (c *classed) Len() int   { return c.ds.Len() }
func (c *classed) Info() Info { return c.info }
func (c *classed) Sample(ctx context.Context, i int) (Sample, error) {
	s, err := c.ds.Sample(ctx, i)
	if err != nil {
		return s, err
	}
	if err := CheckLabel(c.info.Name, i, s.Key, s.Label, c.info.NumClasses); err != nil {
		return Sample{}, err
	}
	return s, nil
}
