package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	_ "example.com/stoke-external/layers" // registers se-net
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

// The layers of package layers (forward passes over package nn's ops, no backward code) trained
// in a small convolutional model, checkpointed, resumed, rebuilt from the checkpoint by name and
// served. Importing package layers registered the model; stoke.go runs the same model through a
// stoke of this module's own.

// forwardOnlyLayers trains conv - LayerNorm2d - ReLU - SqueezeExcite - pool - linear on the
// quadrants to at least 90%, resumes from the checkpoint for an epoch more, rebuilds the model
// from that checkpoint and serves it: the rebuilt model predicts the same logits.
func forwardOnlyLayers(ctx context.Context) error {
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	in := train.Shape{C: 1, H: 8, W: 8}
	build := func() (*train.Model, error) { return train.NewModel("se-net", in, 4) }
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
		tr, err := train.New(ctx, m, dev, optim.AdamW{LR: 1e-2}, cfg)
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
	fmt.Printf("se-net of forward-only layers: test accuracy %.1f%%, served from its checkpoint\n", 100*res.TestAcc)
	return nil
}
