package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/optim"
)

func TestLossScaleUpdate(t *testing.T) {
	l := newLossScale()
	if l.scale != 65536 || l.interval != 2000 {
		t.Fatalf("new loss scale %+v; want scale 2^16, growth every 2000 steps (GradScaler's defaults)", *l)
	}
	l.interval = 3
	if l.update(false) || l.scale != 32768 || l.skipped != 1 {
		t.Fatalf("after an overflow: %+v; want the step skipped and the scale halved", *l)
	}
	for range 2 {
		if !l.update(true) {
			t.Fatal("a finite step was skipped")
		}
	}
	if l.update(false) || l.scale != 16384 || l.good != 0 {
		t.Fatalf("overflow after 2 finite steps: %+v; want scale 16384 and the count of finite steps reset", *l)
	}
	for i := range 3 {
		if l.update(true); i < 2 && l.scale != 16384 {
			t.Fatalf("scale grew to %v after %d finite steps; want growth after 3", l.scale, i+1)
		}
	}
	if l.scale != 32768 || l.good != 0 || l.skipped != 2 {
		t.Fatalf("after 3 finite steps: %+v; want the scale doubled to 32768", *l)
	}
}

// TestFP16LossScaling runs fp16 steps (the CPU backend's emulation) with the loss scale forced: a
// scale of 2^40 overflows fp16 in the backward products, so the step must leave every weight as it
// was and halve the scale; finite steps update the weights as an fp32 step does (the scaled
// gradients unscaled), and the scale doubles after the growth interval.
func TestFP16LossScaling(t *testing.T) {
	f := newFixture(t, 96)
	ctx := context.Background()
	mean, std := f.train.Normalization()
	newTrainer := func(p Precision) *Trainer {
		tr, err := New(context.Background(), smallMLP(t), f.dev, optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Precision: p, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	tr, ref := newTrainer(FP16), newTrainer(FP32)
	if ref.scaler != nil {
		t.Fatal("an fp32 trainer has a loss scale")
	}
	i := 0
	for b, err := range f.train.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		before := modelWeights(t, tr)
		switch i {
		case 0:
			tr.scaler.scale = 1 << 40
		case 1:
			tr.scaler.scale, tr.scaler.interval = 1024, 2
		}
		if _, err := tr.trainStep(ctx, b, mean, std, 0, 0); err != nil {
			t.Fatal(err)
		}
		after := modelWeights(t, tr)
		switch i {
		case 0:
			for j := range before {
				if !slices.Equal(before[j], after[j]) {
					t.Fatalf("step with overflowing gradients changed parameter %d", j)
				}
			}
			if tr.scaler.scale != 1<<39 || tr.scaler.skipped != 1 {
				t.Fatalf("after the overflow: %+v; want scale 2^39, 1 skipped step", *tr.scaler)
			}
		case 1:
			// The same step in fp32 from the same weights: the fp16 update is its update within
			// fp16's rounding, not 1024 times it. (The same step number: the same dropout mask.)
			ref.step = tr.step - 1
			if _, err := ref.trainStep(ctx, b, mean, std, 0, 0); err != nil {
				t.Fatal(err)
			}
			want := modelWeights(t, ref)
			var diff, size float64
			for j := range before {
				for k := range before[j] {
					d16, d32 := float64(after[j][k]-before[j][k]), float64(want[j][k]-before[j][k])
					diff, size = math.Max(diff, math.Abs(d16-d32)), math.Max(size, math.Abs(d32))
				}
			}
			t.Logf("fp16 step (loss scale 1024) vs fp32 step: largest difference of the updates %g, largest update %g", diff, size)
			if !(size > 0 && diff <= 0.01*size) {
				t.Fatalf("fp16 update differs from the fp32 one by %g (largest fp32 update %g); want within 1%%", diff, size)
			}
			if tr.scaler.scale != 1024 || tr.scaler.good != 1 {
				t.Fatalf("after a finite step: %+v; want scale 1024 and 1 good step", *tr.scaler)
			}
		case 2:
			if tr.scaler.scale != 2048 || tr.scaler.good != 0 || tr.scaler.skipped != 1 {
				t.Fatalf("after 2 finite steps with growth interval 2: %+v; want the scale doubled to 2048", *tr.scaler)
			}
		}
		if i++; i == 3 {
			break
		}
	}
}

// TestMixedPrecisionFit trains the small models in bf16 and fp16 (emulated on the CPU backend):
// they learn the synthetic set as fp32 does, and their weights are not fp32's (the products were
// rounded).
func TestMixedPrecisionFit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func(testing.TB) *Model
	}{{"mlp", smallMLP}, {"cnn", smallCNN}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1000)
			cfg := Config{Epochs: 2, Seed: 1, Schedule: optim.Cosine(0.2)}
			res32, tr32 := fit(t, f, tc.model(t), optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
			w32 := modelWeights(t, tr32)
			for _, p := range []Precision{BF16, FP16} {
				cfg.Precision = p
				res, tr := fit(t, f, tc.model(t), optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
				t.Logf("%s %s: test accuracy %.3f (fp32 %.3f)", tc.name, p, res.TestAcc, res32.TestAcc)
				if res.TestAcc < 0.9 || math.Abs(res.TestAcc-res32.TestAcc) > 0.05 {
					t.Errorf("%s: test accuracy %v; want >= 0.9 and within 0.05 of fp32's %v", p, res.TestAcc, res32.TestAcc)
				}
				w := modelWeights(t, tr)
				same := true
				for j := range w {
					same = same && slices.Equal(w[j], w32[j])
				}
				if same {
					t.Errorf("%s: the weights are fp32's bit for bit: nothing was rounded", p)
				}
			}
		})
	}
}

// TestFP16SkippedStepKeepsAdamWStep: a step that loss scaling skips is not an optimizer step, as
// GradScaler skips optimizer.step(): AdamW's step count (its bias correction) must not count it.
// After one skipped step, the first applied AdamW update of an fp16 trainer is the first update of
// an fp32 trainer on the same batch (within fp16's rounding), not a second step's (which, from
// zero moments, moves the weights about 0.74 times as far).
func TestFP16SkippedStepKeepsAdamWStep(t *testing.T) {
	f := newFixture(t, 96)
	ctx := context.Background()
	mean, std := f.train.Normalization()
	newTrainer := func(p Precision) *Trainer {
		tr, err := New(context.Background(), smallCNN(t), f.dev, optim.AdamW{LR: 0.01}, Config{Precision: p, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	tr, ref := newTrainer(FP16), newTrainer(FP32)
	var before [][]float32
	for b, err := range f.train.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		keep := b // the batch, three times: released by the last step only
		keep.Release = nil
		tr.scaler.scale = 1 << 40 // overflows fp16 in the backward products: skipped
		if _, err := tr.trainStep(ctx, keep, mean, std, 0, 0); err != nil {
			t.Fatal(err)
		}
		if tr.scaler.skipped != 1 {
			t.Fatalf("loss scale %+v; want the step skipped", *tr.scaler)
		}
		tr.scaler.scale = 1024
		before = modelWeights(t, tr)
		if _, err := tr.trainStep(ctx, keep, mean, std, 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.trainStep(ctx, b, mean, std, 0, 0); err != nil {
			t.Fatal(err)
		}
		break
	}
	after, want := modelWeights(t, tr), modelWeights(t, ref)
	var moved16, moved32 float64
	for j := range before {
		for k := range before[j] {
			moved16 += math.Abs(float64(after[j][k] - before[j][k]))
			moved32 += math.Abs(float64(want[j][k] - before[j][k]))
		}
	}
	t.Logf("fp16 first applied optim.AdamW update after a skipped step moved the weights %g; fp32 first step %g", moved16, moved32)
	if r := moved16 / moved32; !(r > 0.95 && r < 1.05) {
		t.Fatalf("fp16 update after a skipped step is %.3f times the fp32 first step's; want 1 (the skipped step counted as an optim.AdamW step?)", r)
	}
}

// hugeInputs is a dataset whose normalization turns pixels into values past fp16's range.
type hugeInputs struct{ Data }

func (hugeInputs) Normalization() (mean, std []float32) { return []float32{0}, []float32{1e-6} }

// TestFP16ForwardOverflowNamed: an fp16 forward pass that overflows makes the loss non-finite,
// which loss scaling cannot repair; the error says so instead of blaming only the learning rate.
func TestFP16ForwardOverflowNamed(t *testing.T) {
	f := newFixture(t, 64)
	// One linear layer: the overflow reaches the logits directly (a ReLU may turn a NaN into 0,
	// and the pure-Go one does).
	m, err := tSequential("linear", img8, 10, tFlatten(), tLinear(64, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, f.dev, optim.SGD{LR: 0.01}, Config{Precision: FP16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.Fit(context.Background(), hugeInputs{f.train}, f.test)
	if err == nil || !strings.Contains(err.Error(), "overflowed fp16's range") {
		t.Fatalf("fp16 run over inputs of ~1e8: error %v; want the fp16 overflow named", err)
	}
}
