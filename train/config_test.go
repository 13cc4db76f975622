package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/optim"
)

// TestConfigValidate: Validate refuses each bad setting with a *FieldError naming its field,
// wrapping ErrConfig, and changes nothing in the Config (its defaults stay New's to apply);
// zero values and good settings pass.
func TestConfigValidate(t *testing.T) {
	good := []Config{
		{},
		{Epochs: 3, Accumulate: 4, ClipGradNorm: 1, EMA: 0.9998, EMAWarmup: true, EarlyStop: 2, KeepBest: "best", LabelSmoothing: 0.1,
			BackboneLRScale: 0.1, FreezeUpTo: "layer1", Plateau: &Plateau{Factor: 0.5, Patience: 1}},
	}
	for _, c := range good {
		before := c
		if err := c.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v; want nil", c, err)
		}
		if !sameConfig(c, before) {
			t.Errorf("Validate changed %+v to %+v", before, c)
		}
	}
	bad := []struct {
		c     Config
		field string
	}{
		{Config{Epochs: -1}, "Epochs"},
		{Config{LabelSmoothing: 1}, "LabelSmoothing"},
		{Config{LabelSmoothing: math.NaN()}, "LabelSmoothing"},
		{Config{BucketBytes: -1}, "BucketBytes"},
		{Config{FreezeBackbone: true, FreezeUpTo: "layer1"}, "FreezeBackbone"},
		{Config{BackboneLRScale: -0.1}, "BackboneLRScale"},
		{Config{BackboneLRScale: math.Inf(1)}, "BackboneLRScale"},
		{Config{Accumulate: -1}, "Accumulate"},
		{Config{ClipGradNorm: -1}, "ClipGradNorm"},
		{Config{ClipGradNorm: math.Inf(1)}, "ClipGradNorm"},
		{Config{ClipGradNorm: math.NaN()}, "ClipGradNorm"},
		{Config{EMA: 1}, "EMA"},
		{Config{EMA: -0.5}, "EMA"},
		{Config{EMAWarmup: true}, "EMAWarmup"},
		{Config{EarlyStop: -1}, "EarlyStop"},
		{Config{Plateau: &Plateau{Factor: 2}}, "Plateau"},
		{Config{Plateau: &Plateau{Factor: 0.1, Patience: -1}}, "Plateau"},
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, tc := range bad {
		c := tc.c
		var plateau Plateau
		if c.Plateau != nil {
			plateau = *c.Plateau
		}
		err := c.Validate()
		var fe *FieldError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v.Validate() = %v; want a FieldError of %s wrapping ErrConfig", tc.c, err, tc.field)
		}
		if c.Plateau != nil && *c.Plateau != plateau || !sameConfig(c, tc.c) {
			t.Errorf("Validate changed %+v to %+v", tc.c, c)
		}
		// New refuses it with the same error.
		tr, nerr := New(context.Background(), plainMLP(t), dev, optim.SGD{LR: 0.1}, tc.c)
		if nerr == nil {
			tr.Close()
		}
		if nerr == nil || nerr.Error() != err.Error() {
			t.Errorf("New with %+v: %v; want Validate's %v", tc.c, nerr, err)
		}
	}
}

// sameConfig compares two Configs field by field, NaN equal to NaN (DeepEqual's NaN is unequal
// to itself).
func sameConfig(a, b Config) bool {
	return reflect.DeepEqual(a, b) || fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}
