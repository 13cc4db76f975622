package models_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// BenchmarkTrainStep times training steps of the models of issue 43's table on the CPU device
// (forward, backward, optimizer step; the batch comes from memory through a Loader) on random
// images: Stoke's mlp and cnn on 1x28x28 at batch 128 and resnet18 at 64 px, batch 32, with SGD
// and momentum; the small MNIST-sized ViT of the README and the larger one of its Fashion-MNIST
// table (vit_p4: patch 4, 4 layers, hidden 64) on 3x28x28 at batch 64 with AdamW;
// convnext_tiny, efficientnet_b0 and swin_t at 64 px, batch 16, with SGD. Beside samples/s it
// reports the FLOP/s achieved (a step as 3 forward passes of 2 FLOPs per multiply-add of
// nn.Summarize: the backward pass computes two products per forward one) and that as a share of
// the device's float32 peak (gpu.PeakFLOPS). scripts/torch_zoo_step.py times the zoo's models,
// batches and optimizers in PyTorch: run the two alternately and compare samples/s
// (docs/figures.md).
func BenchmarkTrainStep(b *testing.B) {
	for _, bc := range []struct {
		name, spec  string
		ch, size, n int
		opt         optim.Optimizer
	}{
		{"mlp", "mlp", 1, 28, 128, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"cnn", "cnn", 1, 28, 128, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"resnet18", "resnet18", 3, 64, 32, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"vit", "vit(image_size=28,patch_size=7,num_layers=2,num_heads=4,hidden_dim=32,mlp_dim=64)", 3, 28, 64, optim.AdamW{LR: 1e-3}},
		{"vit_p4", "vit(image_size=28,patch_size=4,num_layers=4,num_heads=4,hidden_dim=64,mlp_dim=256)", 3, 28, 64, optim.AdamW{LR: 1e-3}},
		{"convnext_tiny", "convnext_tiny", 3, 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"efficientnet_b0", "efficientnet_b0", 3, 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
		{"swin_t", "swin_t", 3, 64, 16, optim.SGD{LR: 0.01, Momentum: 0.9}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := train.Shape{C: bc.ch, H: bc.size, W: bc.size}
			tr, data, macs := benchTrainer(b, bc.spec, in, bc.n, max(b.N, 2)*bc.n, bc.opt)
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
			b.ReportMetric((cpu1-cpu0).Seconds()*1000/float64(max(b.N, 2)), "cpu-ms/step")
			reportFLOPs(b, tr.Device(), 6*float64(macs)*res.SamplesPerS)
		})
	}
}

// BenchmarkInfer times the forward pass in evaluation mode (train.Trainer.Predict, logits read
// back, after one untimed pass) of the models issue 43 compares with onnxruntime, resnet18, convnext_tiny,
// efficientnet_b0 and vit_b_16 at 224 px, at batch 1 and 32, over random images already in
// memory (no decoding, no resize: what onnxruntime is timed on), with its FLOP/s and their share
// of the device's float32 peak. Run one model at a time: vit_b_16 at batch 32 is a minute of
// this machine.
func BenchmarkInfer(b *testing.B) {
	for _, name := range []string{"resnet18", "convnext_tiny", "efficientnet_b0", "vit_b_16"} {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/b%d", name, n), func(b *testing.B) {
				tr, data, macs := benchTrainer(b, name, train.Shape{C: 3, H: 224, W: 224}, n, n, optim.SGD{LR: 0.01})
				// One pass first, untimed, as onnxruntime's is (scripts/ort_infer.py): it prepares the
				// weights (nn.Graph.Freeze), a start-up cost paid once.
				if _, err := tr.Predict(b.Context(), train.FromLoader(data)); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if _, err := tr.Predict(b.Context(), train.FromLoader(data)); err != nil {
						b.Fatal(err)
					}
				}
				perS := float64(b.N*n) / b.Elapsed().Seconds()
				b.ReportMetric(perS, "images/s")
				reportFLOPs(b, tr.Device(), 2*float64(macs)*perS)
			})
		}
	}
}

// benchTrainer builds the zoo's model spec for inputs of shape in with 10 classes, its trainer on
// the CPU device and a Loader of batches of n over samples random images of that shape, which
// it closes when b ends; macs is the multiply-adds of the model's forward pass of one image.
func benchTrainer(b *testing.B, spec string, in train.Shape, n, samples int, opt optim.Optimizer) (*train.Trainer, *loaders.Loader, int64) {
	b.Helper()
	m, err := train.NewModel(spec, in, 10)
	if err != nil {
		b.Fatal(err)
	}
	sum, err := nn.Summarize(m.Module(), 1, in.C, in.H, in.W)
	if err != nil {
		b.Fatal(err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dev.Close() })
	tr, err := train.New(context.Background(), m, dev, opt, train.Config{Epochs: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	r := rand.New(rand.NewPCG(1, 2))
	set := make([]loaders.Sample, samples)
	for i := range set {
		px := make([]uint8, in.C*in.H*in.W)
		for j := range px {
			px[j] = uint8(r.IntN(256))
		}
		set[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: in.H, W: in.W, C: in.C}, Label: i % 10}
	}
	data, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "random", NumClasses: 10, Shape: in}, set),
		loaders.Config{Batch: n, Workers: 1, Device: dev, Stream: tr.Stream()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { data.Close() })
	return tr, data, sum.MACs
}

// reportFLOPs reports flops (FLOP/s) in GFLOP/s and as a percentage of dev's peak
// (gpu.PeakFLOPS), when known.
func reportFLOPs(b *testing.B, dev gpu.Device, flops float64) {
	b.ReportMetric(flops/1e9, "GFLOP/s")
	if peak := gpu.PeakFLOPS(dev); peak > 0 {
		b.ReportMetric(100*flops/peak, "%peak")
	}
}
