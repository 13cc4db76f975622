package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/stoke-ml/stoke/cli"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/train"
)

// Layers written as forward passes over package nn's ops, with no backward code: a channels-first
// layer norm (ConvNeXt's LayerNorm2d) and a squeeze-and-excitation block (SENet's), trained in a
// small convolutional model, checkpointed, resumed, rebuilt from the checkpoint and served, then
// exported by a stoke of this program's own (package cli).

// LayerNorm2d normalizes each pixel's channel vector of x [N C H W] with its mean and biased
// variance, then scales and shifts per channel.
type LayerNorm2d struct {
	Weight, Bias *nn.Tensor
	C            int
}

func NewLayerNorm2d(c int) *LayerNorm2d {
	return &LayerNorm2d{Weight: nn.Param([]int{c}, nn.Ones), Bias: nn.Param([]int{c}, nn.Zeros), C: c}
}

func (l *LayerNorm2d) String() string { return fmt.Sprintf("layernorm2d %d", l.C) }

func (l *LayerNorm2d) Forward(x *nn.Tensor) *nn.Tensor {
	mean := nn.Mean(x, []int{1}, true)
	xc := nn.Sub(x, mean)
	rstd := nn.Rsqrt(nn.AddScalar(nn.Mean(nn.Mul(xc, xc), []int{1}, true), 1e-6))
	return nn.Add(nn.Mul(nn.Mul(xc, rstd), l.Weight.Reshape(l.C, 1, 1)), l.Bias.Reshape(l.C, 1, 1))
}

// SqueezeExcite gates each channel of x [N C H W] by a sigmoid of two linear layers over the
// channels' means: the gate is computed from the same input it multiplies.
type SqueezeExcite struct {
	FC1, FC2 *nn.LinearLayer
	C, R     int `nn:"-"`
}

func NewSqueezeExcite(c, r int) *SqueezeExcite {
	return &SqueezeExcite{FC1: nn.NewLinear(c, c/r, true), FC2: nn.NewLinear(c/r, c, true), C: c, R: r}
}

func (m *SqueezeExcite) String() string { return fmt.Sprintf("squeezeexcite %d/%d", m.C, m.R) }

func (m *SqueezeExcite) Forward(x *nn.Tensor) *nn.Tensor {
	n := x.Dim(0)
	s := nn.Mean(x, []int{2, 3}, false) // [N C]
	s = nn.Sigmoid(m.FC2.Forward(nn.ReLU(m.FC1.Forward(s))))
	return nn.Mul(x, s.Reshape(n, m.C, 1, 1))
}

func registerLayers() error {
	if err := train.RegisterLayer("layernorm2d", func(desc string) (train.Module, error) {
		var c int
		if _, err := fmt.Sscanf(desc, "layernorm2d %d", &c); err != nil {
			return nil, err
		}
		return train.NN(NewLayerNorm2d(c)), nil
	}); err != nil {
		return err
	}
	return train.RegisterLayer("squeezeexcite", func(desc string) (train.Module, error) {
		var c, r int
		if _, err := fmt.Sscanf(desc, "squeezeexcite %d/%d", &c, &r); err != nil {
			return nil, err
		}
		return train.NN(NewSqueezeExcite(c, r)), nil
	})
}

// forwardOnlyLayers trains conv - LayerNorm2d - ReLU - SqueezeExcite - pool - linear on the
// quadrants to at least 90%, resumes from the checkpoint for an epoch more, rebuilds the model
// from that checkpoint and serves it: the rebuilt model predicts the same logits.
func forwardOnlyLayers(ctx context.Context) error {
	if err := registerLayers(); err != nil {
		return err
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	in := train.Shape{C: 1, H: 8, W: 8}
	build := func() (*train.Model, error) {
		return train.Sequential("se-net", in, 4, train.Conv2D(1, 16, 3, 1), train.Custom(train.NN(NewLayerNorm2d(16))), train.ReLU(),
			train.Custom(train.NN(NewSqueezeExcite(16, 4))), train.GlobalAvgPool(), train.Flatten(), train.Linear(16, 4))
	}
	dir, err := os.MkdirTemp("", "stoke-external-nn")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ck := filepath.Join(dir, "ck")
	fit := func(cfg train.Config) (*train.Trainer, train.Result, *loaders.Loader, error) {
		m, err := build()
		if err != nil {
			return nil, train.Result{}, nil, err
		}
		tr, err := train.New(ctx, m, dev, train.AdamW{LR: 1e-2}, cfg)
		if err != nil {
			return nil, train.Result{}, nil, err
		}
		trainL, err := loaders.New(quadrants(1200, 1), loaders.Config{Batch: 32, Workers: 2, Shuffle: true, Device: dev, Stream: tr.Stream()})
		if err != nil {
			tr.Close()
			return nil, train.Result{}, nil, err
		}
		defer trainL.Close()
		testL, err := loaders.New(quadrants(400, 2), loaders.Config{Batch: 100, Workers: 2, Device: dev, Stream: tr.Stream()})
		if err != nil {
			tr.Close()
			return nil, train.Result{}, nil, err
		}
		res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
		if err != nil {
			testL.Close()
			tr.Close()
			return nil, res, nil, err
		}
		return tr, res, testL, nil
	}
	tr, res, testL, err := fit(train.Config{Epochs: 3, Seed: 1, Checkpoint: ck})
	if err != nil {
		return err
	}
	tr.Close()
	testL.Close()
	tr, res, testL, err = fit(train.Config{Epochs: 4, Seed: 1, Checkpoint: ck, Resume: ck})
	if err != nil {
		return err
	}
	defer tr.Close()
	defer testL.Close()
	if res.TestAcc < 0.9 || res.Epochs != 4 {
		return fmt.Errorf("test accuracy %.3f after epoch %d (resumed at 3); want >= 0.9 after 4", res.TestAcc, res.Epochs)
	}
	want, err := tr.Predict(ctx, train.FromLoader(testL))
	if err != nil {
		return err
	}
	m, err := train.CheckpointModel(ck)
	if err != nil {
		return err
	}
	served, err := train.New(ctx, m, dev, nil, train.Config{Resume: ck})
	if err != nil {
		return err
	}
	defer served.Close()
	got, err := served.Predict(ctx, train.FromLoader(testL))
	if err != nil {
		return err
	}
	if !slices.Equal(got.Logits, want.Logits) {
		return fmt.Errorf("the model rebuilt from its checkpoint predicts other logits")
	}
	// A stoke of one's own: the command line as a library (package cli) knows the layers this
	// program registered, so it exports the checkpoint that holds them, as safetensors and as ONNX
	// (a prebuilt stoke binary cannot: it was not built with this code).
	for _, args := range [][]string{
		{"export", "--checkpoint", ck, "--out", filepath.Join(dir, "se-net.safetensors")},
		{"export", "--checkpoint", ck, "--out", filepath.Join(dir, "se-net.onnx"), "--mean", "0.3", "--std", "0.3"},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli.Run(ctx, args, &stdout, &stderr); code != 0 {
			return fmt.Errorf("stoke %v of the model holding layernorm2d and squeezeexcite: exit %d: %s", args, code, stderr.String())
		}
	}
	fmt.Printf("se-net of forward-only layers: test accuracy %.1f%%, served from its checkpoint, exported by its own stoke\n", 100*res.TestAcc)
	return nil
}
