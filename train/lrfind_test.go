package train

import (
	"context"
	"errors"
	"iter"
	"math"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/optim"
)

// TestFindLR: the range test's rates grow exponentially from Min, each step's smoothed loss is
// recorded, the test ends when the loss diverges, and the rate it suggests trains: two epochs at
// it reach 90%. The trainer is put back as it was: Fit after FindLR trains to the weights of a
// trainer that never ran it, bit for bit.
func TestFindLR(t *testing.T) {
	f := newFixture(t, 640)
	opt := optim.SGD{LR: 0.1, Momentum: 0.9}
	tr, err := New(t.Context(), smallResNet(t), f.dev, opt, Config{Epochs: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	found, err := tr.FindLR(t.Context(), f.train, LRFind{Min: 1e-5, Max: 100, Steps: 80})
	if err != nil {
		t.Fatal(err)
	}
	n := len(found.LRs)
	t.Logf("%d steps, diverged %v, suggested %.3g", n, found.Diverged, found.Suggested)
	if n != len(found.Losses) || n < 20 || n > 80 || math.Abs(found.LRs[0]/1e-5-1) > 1e-6 {
		t.Fatalf("%d rates from %g, %d losses; want 20 to 80 from 1e-5, as many losses", n, found.LRs[0], len(found.Losses))
	}
	for i := 1; i < n; i++ {
		if r := found.LRs[i] / found.LRs[i-1]; math.Abs(r-math.Pow(1e7, 1.0/79)) > 1e-6 {
			t.Fatalf("rate %d is %g times the one before; want %g", i, r, math.Pow(1e7, 1.0/79))
		}
	}
	if !found.Diverged || n == 80 {
		t.Errorf("the test ran %d steps up to lr %g without diverging; want it stopped at the divergence", n, found.LRs[n-1])
	}
	if !(found.Suggested > 1e-4 && found.Suggested < 5) {
		t.Fatalf("suggested lr %g", found.Suggested)
	}
	// Put back: the same run as a fresh trainer's.
	if _, err := tr.Fit(t.Context(), f.train, f.test); err != nil {
		t.Fatal(err)
	}
	_, fresh := fit(t, f, smallResNet(t), opt, Config{Epochs: 2, Seed: 1})
	got, want := modelWeights(t, tr), modelWeights(t, fresh)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("tensor %d after FindLR and Fit differs from a fresh trainer's", i)
		}
	}
	if _, err := tr.FindLR(t.Context(), f.train, LRFind{}); !errors.Is(err, ErrConfig) {
		t.Errorf("FindLR after Fit: %v; want ErrConfig", err)
	}
	res, _ := fit(t, f, smallResNet(t), optim.SGD{LR: found.Suggested, Momentum: 0.9}, Config{Epochs: 2, Seed: 1})
	if res.TestAcc < 0.9 {
		t.Errorf("two epochs at the suggested lr %.3g: test accuracy %.3f; want >= 0.9", found.Suggested, res.TestAcc)
	}
	tr2, err := New(t.Context(), smallMLP(t), f.dev, opt, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if _, err := tr2.FindLR(t.Context(), f.train, LRFind{Min: 1, Max: 0.5}); !errors.Is(err, ErrConfig) {
		t.Errorf("a range from 1 to 0.5: %v; want ErrConfig", err)
	}
}

// cancelAfter is data that cancels its context after n batches.
type cancelAfter struct {
	Data
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for b, err := range c.Data.Batches(ctx, epoch) {
			if c.n--; c.n == 0 {
				c.cancel()
			}
			if !yield(b, err) {
				return
			}
		}
	}
}

// TestFindLRInterrupted: a range test cancelled halfway returns the cancellation and leaves the
// trainer as it was (Fit after it trains to a fresh trainer's weights); a trainer with
// ReduceLROnPlateau runs the test at the test's rates, its plateau neither stepped nor needing
// validation data.
func TestFindLRInterrupted(t *testing.T) {
	f := newFixture(t, 640)
	opt := optim.SGD{LR: 0.1, Momentum: 0.9}
	cfg := Config{Epochs: 2, Seed: 1, Plateau: &Plateau{Factor: 0.1, Patience: 0}}
	tr, err := New(t.Context(), smallResNet(t), f.dev, opt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := tr.FindLR(ctx, &cancelAfter{f.train, 7, cancel}, LRFind{Min: 1e-5, Max: 1e-4, Steps: 40}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled range test: %v; want context.Canceled", err)
	}
	found, err := tr.FindLR(t.Context(), f.train, LRFind{Min: 1e-5, Max: 1e-4, Steps: 40})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(found.LRs); n != 40 || math.Abs(found.LRs[n-1]/1e-4-1) > 1e-6 {
		t.Fatalf("%d rates up to %g; want 40 up to 1e-4 (more steps than an epoch has, at the test's rates)", n, found.LRs[n-1])
	}
	if _, err := tr.Fit(t.Context(), f.train, f.test); err != nil {
		t.Fatal(err)
	}
	_, fresh := fit(t, f, smallResNet(t), opt, cfg)
	got, want := modelWeights(t, tr), modelWeights(t, fresh)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("tensor %d after two range tests and Fit differs from a fresh trainer's", i)
		}
	}
}
