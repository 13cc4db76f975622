package models

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// mobileNames are the builders of the MobileNet and EfficientNet families.
var mobileNames = []string{"mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"}

// TestMobileShapes: every named builder of the MobileNet and EfficientNet families at 224 px and
// 1000 classes has torchvision's parameters: the same names, in the same order, of the same
// shapes.
func TestMobileShapes(t *testing.T) {
	py := torchPython()
	if py == "" {
		t.Skip("no python3 with torch, torchvision, safetensors and numpy (set STOKE_PYTHON)")
	}
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "torchvision_shapes.py"), "1000"}, mobileNames...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torchvision_shapes.py: %v", err)
	}
	var want map[string]map[string][]int
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("torchvision_shapes.py printed %.200q: %v", out, err)
	}
	for _, name := range mobileNames {
		m, err := train.NewModel(name, train.Shape{C: 3, H: 224, W: 224}, 1000)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		params := m.Params()
		if len(params) != len(want[name]) {
			t.Errorf("%s: %d parameters; torchvision has %d", name, len(params), len(want[name]))
		}
		for _, p := range params {
			if w, ok := want[name][p.Name]; !ok || !slices.Equal(p.Shape, w) {
				t.Errorf("%s: %s of shape %v; torchvision's is %v (none when [])", name, p.Name, p.Shape, w)
			}
		}
	}
}

// TestMobileNetV3Trains: mobilenet_v3_small at 32 px learns on the CPU: one epoch of SGD over 320
// synthetic images of 4 classes (a colour per class, with noise) brings the loss of the last
// steps well below that of the first.
func TestMobileNetV3Trains(t *testing.T) {
	const n, size, classes, batch = 320, 32, 4, 32
	in := train.Shape{C: 3, H: size, W: size}
	m, err := train.NewModel("mobilenet_v3_small(dropout=0)", in, classes)
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
			if label == 3 && j/3%size < size/2 { // class 3: class 0's colour on the left half only
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
	tr, err := train.New(m, dev, train.SGD{LR: 0.05, Momentum: 0.9}, train.Config{Epochs: 1, Seed: 1, Progress: func(p *train.Progress) {
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
	t.Logf("%d steps in %v, losses %.3f", len(losses), time.Since(start).Round(time.Millisecond), losses)
	if len(losses) != n/batch {
		t.Fatalf("%d steps; want %d", len(losses), n/batch)
	}
	first, last := (losses[0]+losses[1])/2, (losses[len(losses)-2]+losses[len(losses)-1])/2
	if !(last < 0.7*first) {
		t.Errorf("mean loss of the first two steps %.3f, of the last two %.3f; want the last below 70%% of the first", first, last)
	}
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
