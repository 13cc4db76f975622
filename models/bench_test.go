package models_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// BenchmarkTrainStep times training steps of the zoo's models on the CPU device (forward,
// backward, optimizer step; the batch comes from memory through a Loader) on random 3-channel
// images: the small MNIST-sized ViT of the README and the larger one of its Fashion-MNIST table
// (vit_p4: patch 4, 4 layers, hidden 64) with AdamW, convnext_tiny, efficientnet_b0 and
// swin_t at 64 px with SGD. scripts/torch_zoo_step.py times the same models, batches and optimizers in
// PyTorch: run the two alternately and compare samples/s (docs/figures.md).
func BenchmarkTrainStep(b *testing.B) {
	for _, bc := range []struct {
		name, spec string
		size, n    int
		opt        optim.Optimizer
	}{
		{"vit", "vit(image_size=28,patch_size=7,num_layers=2,num_heads=4,hidden_dim=32,mlp_dim=64)", 28, 64, optim.AdamW{LR: 1e-3}},
		{"vit_p4", "vit(image_size=28,patch_size=4,num_layers=4,num_heads=4,hidden_dim=64,mlp_dim=256)", 28, 64, optim.AdamW{LR: 1e-3}},
		{"convnext_tiny", "convnext_tiny", 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"efficientnet_b0", "efficientnet_b0", 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"swin_t", "swin_t", 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := train.Shape{C: 3, H: bc.size, W: bc.size}
			m, err := train.NewModel(bc.spec, in, 10)
			if err != nil {
				b.Fatal(err)
			}
			dev, err := gpu.Open("cpu")
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			tr, err := train.New(context.Background(), m, dev, bc.opt, train.Config{Epochs: 1, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			r := rand.New(rand.NewPCG(1, 2))
			steps := max(b.N, 2)
			samples := make([]loaders.Sample, steps*bc.n)
			for i := range samples {
				px := make([]uint8, 3*bc.size*bc.size)
				for j := range px {
					px[j] = uint8(r.IntN(256))
				}
				samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: bc.size, W: bc.size, C: 3}, Label: i % 10}
			}
			data, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "random", NumClasses: 10, Shape: in}, samples),
				loaders.Config{Batch: bc.n, Workers: 1, Device: dev, Stream: tr.Stream()})
			if err != nil {
				b.Fatal(err)
			}
			defer data.Close()
			b.ResetTimer()
			cpu0, _ := cputime.Process()
			res, err := tr.Fit(b.Context(), train.FromLoader(data), nil)
			if err != nil {
				b.Fatal(err)
			}
			cpu1, _ := cputime.Process()
			b.ReportMetric(res.SamplesPerS, "samples/s")
			// The process's CPU per step (the loader's workers' included), steadier than the wall
			// time on a shared machine; torch_zoo_step.py prints its cpu_ms_per_step.
			b.ReportMetric((cpu1-cpu0).Seconds()*1000/float64(steps), "cpu-ms/step")
		})
	}
}
