// Package rng derives the deterministic random streams Stoke's house rule 7 asks for: the order of
// samples is a function of (seed, epoch), and a sample's augmentation randomness is a function of
// (seed, epoch, sample index), never of the worker that happens to run it or of timing.
//
// Streams are math/rand/v2 PCG generators seeded through SplitMix64, so nearby inputs (epoch 3 and
// epoch 4, index 10 and 11) give unrelated streams.
package rng

import "math/rand/v2"

// Mix hashes any number of words into one well-spread 64-bit value (SplitMix64 finalizer chained
// over the words). Mix() is a fixed constant; the order of the words matters.
func Mix(words ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range words {
		h = splitmix(h ^ splitmix(w))
	}
	return h
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Epoch returns the generator for the sample order of one epoch.
func Epoch(seed uint64, epoch int) *rand.Rand {
	return rand.New(rand.NewPCG(Mix(seed, uint64(epoch), 1), Mix(seed, uint64(epoch), 2)))
}

// Sample is a reusable per-worker generator for per-sample randomness. The zero value is not
// usable; call NewSample. Reset costs no allocation, so a worker keeps one Sample for its lifetime.
type Sample struct {
	pcg *rand.PCG
	*rand.Rand
}

// NewSample returns a generator; call Reset before each sample.
func NewSample() *Sample {
	p := rand.NewPCG(0, 0)
	return &Sample{pcg: p, Rand: rand.New(p)}
}

// Reset reseeds s for sample index of epoch under seed: the values it then yields depend on
// (seed, epoch, index) only.
func (s *Sample) Reset(seed uint64, epoch int, index int) {
	s.pcg.Seed(Mix(seed, uint64(epoch), uint64(index), 3), Mix(seed, uint64(epoch), uint64(index), 4))
}
