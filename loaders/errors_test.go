package loaders

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// TestClosedErr: an error from the pool or the feeder that says it was closed matches the
// Loader's ErrClosed as well as its own sentinel, with its message unchanged; other errors pass
// through as they are.
func TestClosedErr(t *testing.T) {
	for _, below := range []error{pinned.ErrClosed, gpu.ErrClosed} {
		err := fmt.Errorf("loaders: epoch 3: %w", fmt.Errorf("x: %w", below))
		got := closedErr(err)
		if !errors.Is(got, ErrClosed) || !errors.Is(got, below) || got.Error() != err.Error() {
			t.Errorf("closedErr(%v) = %v; want it to match ErrClosed and %v, same message", err, got, below)
		}
	}
	other := errors.New("other")
	if got := closedErr(other); got != other {
		t.Errorf("closedErr(other) = %v; want it unchanged", got)
	}
	if closedErr(nil) != nil {
		t.Error("closedErr(nil) != nil")
	}
	already := fmt.Errorf("loaders: %w", ErrClosed)
	if got := closedErr(already); got != already {
		t.Errorf("closedErr of ErrClosed = %v; want it unchanged", got)
	}
}

// TestCorruptImageIsErrCorrupt: a sample whose image does not decode fails the epoch with an error
// that matches both loaders.ErrCorrupt and transforms.ErrCorrupt, and names the sample.
func TestCorruptImageIsErrCorrupt(t *testing.T) {
	loadertest.NoLeaks(t)
	samples := []Sample{
		{Input: transforms.Input{Encoded: loadertest.PNG(t, 4, 4, 1)}},
		{Input: transforms.Input{Encoded: []byte("\x89PNG garbage")}, Key: "bad.png"},
	}
	l := newLoader(t, NewMemory(Info{Name: "m", NumClasses: 1}, samples), Config{Batch: 2, Workers: 1, Transform: transforms.Compose(transforms.ResizeTo(2, 2))})
	last := loadertest.Err(l.Epoch(t.Context(), 0))
	var se *SampleError
	if !errors.Is(last, ErrCorrupt) || !errors.Is(last, transforms.ErrCorrupt) || !errors.As(last, &se) || se.Key != "bad.png" {
		t.Errorf("epoch over a corrupt image = %v; want ErrCorrupt, transforms.ErrCorrupt and the SampleError of bad.png", last)
	}
}
