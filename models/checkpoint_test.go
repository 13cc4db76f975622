package models_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

// TestGradCheckpointing: a small model of every family of the zoo, torchvision's and timm's with
// their dropout and stochastic depth on, trains two steps of SGD with gradient checkpointing to
// the same losses, weights and running statistics, bit for bit, as without (a ResNet and a ViT in
// bf16 and fp16 too); a training pass keeps fewer activations (nn.Activations). The mlp has no
// blocks and is refused.
func TestGradCheckpointing(t *testing.T) {
	type model struct {
		spec string
		size int
	}
	cases := []model{{"resnet8", 32}}
	for _, c := range torchvisionCases {
		cases = append(cases, model{c.spec, c.size})
	}
	for _, c := range timmCases {
		if !strings.Contains(c.spec, "_tiny") && !strings.Contains(c.spec, "b2") { // two of a kind suffice
			cases = append(cases, model{c.spec, c.size})
		}
	}
	const batch = 4
	for _, c := range cases {
		spec, name := c.spec, strings.Split(c.spec, "(")[0]
		in := train.Shape{C: 3, H: c.size, W: c.size}
		samples := randomSamples(2*batch, c.size)
		t.Run(name, func(t *testing.T) {
			if raceEnabled && slowUnderRace[name] {
				t.Skip("10x slower under the race detector; make test runs it without")
			}
			plain, plainActs := checkpointRun(t, spec, in, samples, batch, "", false)
			ck, ckActs := checkpointRun(t, spec, in, samples, batch, "", true)
			for i := range plain {
				if !equalBits(plain[i], ck[i]) {
					t.Fatalf("record %d differs with gradient checkpointing", i)
				}
			}
			if ckActs >= plainActs {
				t.Errorf("a training pass keeps %d values with checkpointing, %d without", ckActs, plainActs)
			}
			t.Logf("activations of one image: %d values, %d with checkpointing", plainActs, ckActs)
		})
	}
	// The reduced precisions (fp16 with its loss scaling) on a ResNet and a ViT.
	for _, c := range cases[:7] {
		if !strings.HasPrefix(c.spec, "resnet8") && !strings.HasPrefix(c.spec, "vit") {
			continue
		}
		for _, precision := range []string{"bf16", "fp16"} {
			in := train.Shape{C: 3, H: c.size, W: c.size}
			samples := randomSamples(2*batch, c.size)
			plain, _ := checkpointRun(t, c.spec, in, samples, batch, precision, false)
			ck, _ := checkpointRun(t, c.spec, in, samples, batch, precision, true)
			for i := range plain {
				if !equalBits(plain[i], ck[i]) {
					t.Errorf("%s in %s: record %d differs with gradient checkpointing", c.spec, precision, i)
					break
				}
			}
		}
	}
	m, err := train.NewModel("mlp", train.Shape{C: 1, H: 28, W: 28}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := models.SetGradCheckpointing(m.Module(), true); err == nil || !strings.Contains(err.Error(), "no blocks") {
		t.Errorf("checkpointing the mlp: %v; want an error saying it has no blocks", err)
	}
}

// checkpointRun trains spec on samples in order for two steps at precision ("": fp32) and returns
// each step's loss, the weights after each step and the state_dict at the end (running statistics
// included), with the activations a training pass of one image keeps.
func checkpointRun(t *testing.T, spec string, in train.Shape, samples []loaders.Sample, batch int, precision string, ck bool) ([][][]float32, int64) {
	t.Helper()
	m, err := train.NewModel(spec, in, 5)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	var tr *train.Trainer
	var out [][][]float32
	cfg := train.Config{Epochs: 1, Seed: 1, GradCheckpointing: ck, Precision: train.Precision(precision), Progress: func(p *train.Progress) {
		if !p.Done {
			out = append(out, [][]float32{{float32(p.Loss)}}, hostParams(t, tr))
		}
	}}
	tr, err = train.New(context.Background(), m, dev, optim.SGD{LR: 0.02, Momentum: 0.9}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	data, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "random", NumClasses: 5, Shape: in}, samples),
		loaders.Config{Batch: batch, Workers: 1, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close() })
	if _, err := tr.Fit(context.Background(), train.FromLoader(data), nil); err != nil {
		t.Fatal(err)
	}
	sd, err := tr.StateDict(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var tensors [][]float32
	for _, s := range sd {
		tensors = append(tensors, slices.Clone(s.F32))
	}
	acts, _, err := nn.Activations(m.Module(), 1, in.C, in.H, in.W)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, tensors), acts
}
