package loaders

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/transforms"
)

// TestLoaderMix: with Config.Mix every batch reaches the device mixed with the parameters of
// (Seed, Mix.Seed, epoch, Seq), which Batch.Mix carries: MixUp's bytes are Lambda x the sample's
// own + (1 - Lambda) x the previous sample's (the last one's for sample 0), rounded; CutMix's box
// holds the previous sample's bytes and the rest its own; the labels stay the samples' class ids.
// Another worker count mixes the same way; a bad alpha and float targets are refused.
func TestLoaderMix(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(64, 4, 5, 3)
	mix := transforms.Mix{MixUpAlpha: 0.4, CutMixAlpha: 1, Seed: 2}
	drawn := mix
	drawn.Seed = rng.Mix(5, 2)
	plain := epoch(t, newLoader(t, ds, Config{Batch: 4, Workers: 1, Shuffle: true, Seed: 5}), 1, -1)
	kinds := map[bool]int{}
	for _, workers := range []int{1, 3} {
		l := newLoader(t, ds, Config{Batch: 4, Workers: workers, Shuffle: true, Seed: 5, Mix: mix})
		k := 0
		for b, err := range l.Epoch(context.Background(), 1) {
			if err != nil {
				t.Fatal(err)
			}
			g, p, s := hostBatch(t, b), b.Mix, b.Shape
			b.Release()
			if p != drawn.Params(1, k, s) || !p.Mixed {
				t.Fatalf("%d workers, batch %d: Batch.Mix %+v; want %+v", workers, k, p, drawn.Params(1, k, s))
			}
			kinds[p.CutMix]++
			own := plain[k]
			if !slices.Equal(g.indices, own.indices) || !slices.Equal(g.labels, own.labels) {
				t.Fatalf("batch %d: samples %v labels %v; want the unmixed loader's %v %v", k, g.indices, g.labels, own.indices, own.labels)
			}
			per := s.Len()
			for i := range b.N {
				prev := (i + b.N - 1) % b.N
				for j := range per {
					a, c := float64(own.images[i*per+j]), float64(own.images[prev*per+j])
					want := byte(math.Floor(p.Lambda*a + (1-p.Lambda)*c + 0.5))
					if x, y := j%s.W, j/s.W%s.H; p.CutMix {
						want = own.images[i*per+j]
						if x >= p.X1 && x < p.X2 && y >= p.Y1 && y < p.Y2 {
							want = own.images[prev*per+j]
						}
					}
					if got := g.images[i*per+j]; got != want {
						t.Fatalf("%d workers, batch %d (%+v), sample %d byte %d: %d; want %d", workers, k, p, i, j, got, want)
					}
				}
			}
			k++
		}
	}
	if kinds[true] == 0 || kinds[false] == 0 {
		t.Errorf("%d CutMix and %d MixUp batches; want both (switch probability 1/2)", kinds[true], kinds[false])
	}
	for _, cfg := range []Config{{Mix: transforms.Mix{MixUpAlpha: -1}}, {Mix: transforms.Mix{CutMixAlpha: 1}, Target: Vector(2)}} {
		if _, err := New(ds, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v; want ErrConfig", cfg, err)
		}
	}
}

// TestLoaderMixRanks: the ranks of a data-parallel run, sharing Seed, each mix with their own
// draws (MixUp's lambda and CutMix's box), as each torch DDP process does; a rank's draws are
// the same every time it runs the epoch (another Loader of the same rank included), and rank 0's
// are a single process's.
func TestLoaderMixRanks(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(64, 4, 5, 3)
	draws := func(mix transforms.Mix, rank, world int) []transforms.MixParams {
		l := newLoader(t, ds, Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 5, Mix: mix, Rank: rank, WorldSize: world})
		var ps []transforms.MixParams
		for b, err := range l.Epoch(context.Background(), 3) {
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, b.Mix)
			b.Release()
		}
		return ps
	}
	for _, mix := range []transforms.Mix{{MixUpAlpha: 0.4, Seed: 2}, {CutMixAlpha: 1, Seed: 2}} {
		single := draws(mix, 0, 1)
		r0, r1, again := draws(mix, 0, 2), draws(mix, 1, 2), draws(mix, 1, 2)
		if len(r0) != 8 || len(r1) != 8 || len(single) != 16 {
			t.Fatalf("%+v: %d, %d and %d batches; want 8 per rank of 2, 16 alone", mix, len(r0), len(r1), len(single))
		}
		if !slices.Equal(r1, again) {
			t.Errorf("%+v: rank 1 drew %+v, then %+v; want the same draws", mix, r1, again)
		}
		if !slices.Equal(r0, single[:8]) {
			t.Errorf("%+v: rank 0 of 2 drew %+v; want a single process's %+v", mix, r0, single[:8])
		}
		for k := range r0 {
			// (CutMix's lambda is the box's share of 4x5 pixels: two boxes may leave the same.)
			if !r0[k].Mixed || !r1[k].Mixed || r0[k] == r1[k] || mix.MixUpAlpha > 0 && r0[k].Lambda == r1[k].Lambda {
				t.Errorf("%+v, batch %d: rank 0 drew %+v, rank 1 %+v; want both mixed, differently (MixUp: with different lambdas)", mix, k, r0[k], r1[k])
			}
		}
	}
}
