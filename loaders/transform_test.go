package loaders

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/transforms"
)

// noise is a user transform that fills the output with draws from the sample's generator.
type noise struct{}

func (noise) String() string { return "noise" }

func (noise) Plan(p *transforms.Plan, r *rand.Rand) error {
	if r == nil {
		return nil
	}
	seed := r.Uint64()
	p.Pixels(func(m transforms.Image) {
		g := rand.New(rand.NewPCG(seed, 0))
		for i := range m.Pix {
			m.Pix[i] = byte(g.Uint32())
		}
	})
	return nil
}

// TestUserTransformRandomness checks that a user transform gets the sample's own generator from
// the Loader: its draws are the same whatever the number of workers, and differ from sample to
// sample and from epoch to epoch.
func TestUserTransformRandomness(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(40, 4, 4, 1)
	tf := transforms.Compose(noise{})
	one := newLoader(t, ds, Config{Batch: 8, Workers: 1, Shuffle: true, Seed: 5, Transform: tf})
	four := newLoader(t, ds, Config{Batch: 8, Workers: 4, Shuffle: true, Seed: 5, Transform: tf})
	a0, b0, a1 := epoch(t, one, 0, -1), epoch(t, four, 0, -1), epoch(t, one, 1, -1)
	seen := map[string]bool{}
	for i := range a0 {
		if !bytes.Equal(a0[i].images, b0[i].images) {
			t.Fatalf("epoch 0 batch %d differs between 1 and 4 workers", i)
		}
		if bytes.Equal(a0[i].images, a1[i].images) {
			t.Errorf("batch %d is the same in epochs 0 and 1", i)
		}
		for k := 0; k < len(a0[i].images); k += 16 {
			seen[string(a0[i].images[k:k+16])] = true
		}
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct images among 40 samples; want 40", len(seen))
	}
}
