package models_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/train"
)

// initStats are the statistics of a tensor's values that TestFreshInit compares (init_stats.py
// prints Python's).
type initStats struct {
	N                   int
	Mean, Std, Min, Max float64
	Within1             float64 // the share within Std of Mean: 0.683 for a normal, 0.577 for a uniform
	Constant            bool
}

func statsOf(v []float32) initStats {
	s := initStats{N: len(v), Min: math.Inf(1), Max: math.Inf(-1), Constant: true}
	for _, x := range v {
		s.Mean += float64(x)
		s.Min, s.Max = min(s.Min, float64(x)), max(s.Max, float64(x))
		s.Constant = s.Constant && x == v[0]
	}
	s.Mean /= float64(len(v))
	for _, x := range v {
		d := float64(x) - s.Mean
		s.Std += d * d
	}
	s.Std = math.Sqrt(s.Std / float64(len(v)))
	for _, x := range v {
		if math.Abs(float64(x)-s.Mean) <= s.Std {
			s.Within1++
		}
	}
	s.Within1 /= float64(len(v))
	return s
}

// TestFreshInit: each model of torchvisionCases and timmCases, built fresh by train.New (seed 1),
// starts as its torchvision or timm constructor starts it (init_stats.py): every state_dict tensor
// that Python's constructor makes constant (zeros, ones, 1e-6 layer scales, log 10 logit scales)
// holds exactly that value, and every random one of at least 16 values matches Python's values in
// distribution: the mean, the standard deviation (within 2% at least) and the share of values
// within one standard deviation of the mean (a normal's against a uniform's) within 5 standard
// errors, and for a uniform one of at least 200 values the bound within what n draws leave.
func TestFreshInit(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	type initCase struct {
		spec, python string
		size         int
	}
	var cases []initCase
	for _, c := range torchvisionCases {
		cases = append(cases, initCase{c.spec, c.python, c.size})
	}
	for _, c := range timmCases {
		cases = append(cases, initCase{c.spec, c.python, c.size})
	}
	var args []string
	for _, c := range cases {
		args = append(args, c.python)
	}
	out := runPython(t, py, "init_stats.py", args...)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("init_stats.py printed %d lines for %d models", len(lines), len(cases))
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for i, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			var want map[string]initStats
			if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
				t.Fatalf("init_stats.py printed %q: %v", lines[i], err)
			}
			got := freshTensors(t, dev, c.spec, c.size)
			var small []string
			for name, w := range want {
				v, ok := got[name]
				if !ok {
					t.Errorf("%s: not in the model's export", name)
					continue
				}
				if len(v) != w.N {
					t.Errorf("%s: %d values; Python's %d", name, len(v), w.N)
					continue
				}
				if !w.Constant && w.N < 16 {
					small = append(small, name) // too few values to compare distributions
					continue
				}
				if msg := compareInit(statsOf(v), w); msg != "" {
					t.Errorf("%s: %s", name, msg)
				}
			}
			if len(small) > 0 {
				slices.Sort(small)
				t.Logf("random tensors of under 16 values, not compared: %s", strings.Join(small, ", "))
			}
		})
	}
}

// freshTensors builds spec for 3-channel size×size images and 5 classes, initializes it (seed 1)
// and returns its exported float tensors by name.
func freshTensors(t *testing.T, dev gpu.Device, spec string, size int) map[string][]float32 {
	t.Helper()
	m, err := train.NewModel(spec, train.Shape{C: 3, H: size, W: size}, 5)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(t.Context(), m, dev, nil, train.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	path := filepath.Join(t.TempDir(), "fresh.safetensors")
	if err := tr.Export(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	return readF32Safetensors(t, path)
}

// compareInit says how a fresh tensor's statistics got differ from Python's want; "" when they
// agree (see TestFreshInit).
func compareInit(got, want initStats) string {
	n := float64(want.N)
	if want.Constant {
		if !got.Constant || float32(got.Min) != float32(want.Min) {
			return fmt.Sprintf("values in [%.6g, %.6g]; Python's all %.9g", got.Min, got.Max, want.Min)
		}
		return ""
	}
	if got.Constant {
		return fmt.Sprintf("all %.6g; Python's random (mean %.4g, std %.4g)", got.Min, want.Mean, want.Std)
	}
	// Standard errors of the differences of two samples of n: of the means, of the standard
	// deviations (a normal's, larger than a uniform's) and of the shares within one standard
	// deviation.
	seMean := want.Std * math.Sqrt(2/n)
	seStd := want.Std * math.Sqrt(1/n)
	seWithin := math.Sqrt(2 * want.Within1 * (1 - want.Within1) / n)
	switch {
	case math.Abs(got.Mean-want.Mean) > 5*seMean:
		return fmt.Sprintf("mean %.4g; Python's %.4g (the difference's standard error %.2g)", got.Mean, want.Mean, seMean)
	case math.Abs(got.Std-want.Std) > max(5*seStd, 0.02*want.Std):
		return fmt.Sprintf("std %.4g; Python's %.4g (the difference's standard error %.2g)", got.Std, want.Std, seStd)
	case math.Abs(got.Within1-want.Within1) > 5*seWithin:
		return fmt.Sprintf("%.3f within one std of the mean; Python's %.3f (normal 0.683, uniform 0.577)", got.Within1, want.Within1)
	}
	// A uniform within ±b, √3 standard deviations: n ≥ 200 normal draws all fall within 1.9
	// standard deviations with probability below 1e-5. Of n uniform draws, the largest |x| falls
	// short of b by more than b·10/n with probability below e^-10.
	gb, wb := max(-got.Min, got.Max), max(-want.Min, want.Max)
	if want.N >= 200 && wb < 1.9*want.Std {
		if math.Abs(gb-wb) > wb*10/n {
			return fmt.Sprintf("uniform within ±%.4g; Python's within ±%.4g", gb, wb)
		}
	}
	return ""
}
