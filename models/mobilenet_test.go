package models_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// mobileNames are the builders of the MobileNet and EfficientNet families.
var mobileNames = []string{"mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
	"efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4", "efficientnet_b5",
	"efficientnet_b6", "efficientnet_b7", "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"}

// TestMobileNetV3Trains: mobilenet_v3_small at 32 px learns on the CPU: one epoch of SGD over 320
// synthetic images of 4 classes (a colour per class, with noise) brings the loss of the last
// steps well below that of the first.
func TestMobileNetV3Trains(t *testing.T) {
	losses := trainEpoch(t, "mobilenet_v3_small(dropout=0)", 320, 32)
	first, last := (losses[0]+losses[1])/2, (losses[len(losses)-2]+losses[len(losses)-1])/2
	if !(last < 0.7*first) {
		t.Errorf("mean loss of the first two steps %.3f, of the last two %.3f; want the last below 70%% of the first", first, last)
	}
}

// TestEfficientNetTrains: efficientnet_b0 trains with stochastic depth and dropout on (two
// steps, finite losses).
func TestEfficientNetTrains(t *testing.T) {
	for _, l := range trainEpoch(t, "efficientnet_b0(stochastic_depth_prob=0.5)", 8, 4) {
		if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
			t.Errorf("loss %g", l)
		}
	}
}

// trainEpoch trains spec at 32 px for one epoch of SGD over n synthetic images of 4 classes (a
// colour per class, with noise) and returns the loss of every step.
func trainEpoch(t *testing.T, spec string, n, batch int) []float64 {
	t.Helper()
	const size, classes = 32, 4
	in := train.Shape{C: 3, H: size, W: size}
	m, err := train.NewModel(spec, in, classes)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	samples := make([]loaders.Sample, n)
	for i := range samples {
		label := i % classes
		px := make([]uint8, size*size*3)
		for j := range px {
			base := 40
			if j%3 == label%3 {
				base = 180
			}
			if label == 3 && j/3%size < size/2 { // class 3: class 0's colour on the right half only
				base = 40
			}
			px[j] = uint8(base + r.IntN(60))
		}
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: size, W: size, C: 3}, Label: label}
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var losses []float64
	tr, err := train.New(context.Background(), m, dev, optim.SGD{LR: 0.05, Momentum: 0.9}, train.Config{Epochs: 1, Seed: 1, Progress: func(p *train.Progress) {
		if !p.Done {
			losses = append(losses, p.Loss)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	data, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "colours", NumClasses: classes, Shape: in}, samples),
		loaders.Config{Batch: batch, Workers: 1, Shuffle: true, Seed: 2, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := tr.Fit(ctx, train.FromLoader(data), nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d steps in %v, losses %.3f", spec, len(losses), time.Since(start).Round(time.Millisecond), losses)
	if len(losses) != n/batch {
		t.Fatalf("%d steps; want %d", len(losses), n/batch)
	}
	return losses
}

// TestMobileNetArguments: the builders take torchvision's keyword arguments, refuse bad values
// by name, and their names rebuild them.
func TestMobileNetArguments(t *testing.T) {
	in := train.Shape{C: 3, H: 32, W: 32}
	for _, tc := range []struct{ spec, want string }{
		{"mobilenet_v2(width_mult=0)", "width_mult 0 and round_nearest 8: want both > 0"},
		{"mobilenet_v2(round_nearest=0)", "want both > 0"},
		{"mobilenet_v2(width_mult=4.5)", "width_mult=4.5: want a number in [0, 4)"},
		{"mobilenet_v3_small(round_nearest=8)", `argument "round_nearest=8"`},
		{"mobilenet_v3_large(width_mult=0)", "width_mult 0: want > 0"},
		{"mobilenet_v3_large(dropout=1)", "dropout=1: want a number in [0, 1)"},
		{"mobilenet_v3_large(reduced_tail=2)", "reduced_tail=2: want 0 or 1"},
	} {
		_, err := train.NewModel(tc.spec, in, 10)
		if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrModel saying %q", tc.spec, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec   string
		params int
	}{
		{"mobilenet_v2(width_mult=1.4,dropout=0.5)", 4_333_706}, // torchvision's counts at 10 classes
		{"mobilenet_v3_small", 1_528_106},
		{"mobilenet_v3_small(reduced_tail=1)", 591_802},
		{"mobilenet_v3_large(reduced_tail=1,dropout=0)", 1_934_762},
	} {
		m, err := train.NewModel(tc.spec, in, 10)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name() != tc.spec || m.NumParams() != tc.params {
			t.Errorf("%s: name %q, %d parameters; want %d", tc.spec, m.Name(), m.NumParams(), tc.params)
		}
	}
}

// TestEfficientNetArguments: stochastic_depth_prob is torchvision's (rising linearly over the
// blocks, dropping residual branches only), bad values are refused by name, and names rebuild
// the models.
func TestEfficientNetArguments(t *testing.T) {
	in := train.Shape{C: 3, H: 32, W: 32}
	for _, spec := range []string{"efficientnet_b0(stochastic_depth_prob=1)", "efficientnet_v2_s(dropout=0.5)"} {
		if _, err := train.NewModel(spec, in, 10); !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), spec[strings.IndexByte(spec, '(')+1:len(spec)-1]) {
			t.Errorf("%s: error %v; want ErrModel naming the argument", spec, err)
		}
	}
	for _, tc := range []struct {
		spec   string
		params int
	}{
		{"efficientnet_b0(stochastic_depth_prob=0.5)", 4_020_358}, // torchvision's counts at 10 classes
		{"efficientnet_v2_s", 20_190_298},
	} {
		m, err := train.NewModel(tc.spec, in, 10)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name() != tc.spec || m.NumParams() != tc.params {
			t.Errorf("%s: name %q, %d parameters; want %d", tc.spec, m.Name(), m.NumParams(), tc.params)
		}
	}
	m, err := models.NewEfficientNet("efficientnet_b0", 0.5, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	var probs []float32
	var residual []bool
	for _, stage := range m.Features[1 : len(m.Features)-1] {
		for _, b := range stage.(nn.Sequential) {
			p, r := models.MBConvDropPath(b.(*models.MBConv))
			probs = append(probs, p)
			residual = append(residual, r)
		}
	}
	// b0's 16 blocks: stochastic_depth_prob·i/16; a residual branch where a stage repeats a block.
	for i, p := range probs {
		if want := float32(0.5 * float64(i) / 16); p != want {
			t.Errorf("block %d: drop path %g; want %g", i, p, want)
		}
	}
	wantResidual := []bool{false, false, true, false, true, false, true, true, false, true, true, false, true, true, true, false}
	if len(probs) != 16 || !slices.Equal(residual, wantResidual) {
		t.Errorf("%d blocks, residual %v; want 16, %v", len(probs), residual, wantResidual)
	}
}
