package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/train"
)

func runExport(_ context.Context, e *env, args []string) error {
	fs := e.flags("--checkpoint PATH --out model.safetensors", false)
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train (required)")
	out := fs.String("out", "", "safetensors file to write (required)")
	useEMA := fs.Bool("ema", true, "write the EMA of the weights when the checkpoint has one (stoke train --ema); --ema=false: the trained weights")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *ck == "" || *out == "" {
		return fmt.Errorf("%w: --checkpoint and --out are required", errUsage)
	}
	tr, err := openCheckpoint(*ck, "cpu")
	if err != nil {
		return err
	}
	defer tr.Close()
	ema := false
	if *useEMA {
		if ema, err = tr.UseEMA(); err != nil {
			return err
		}
	}
	if err := tr.Export(*out); err != nil {
		return err
	}
	m := tr.Model()
	weights := "weights"
	if ema {
		weights = "the EMA of the weights"
	}
	e.printf("wrote %s: %s, %d parameters, %s\n", *out, m.Name(), m.NumParams(), weights)
	return nil
}

// openCheckpoint opens device and loads the named model of checkpoint ck into an optimizer-less
// trainer (for prediction and export); closing the trainer also closes the device.
func openCheckpoint(ck, device string) (*checkpointTrainer, error) {
	m, err := train.CheckpointModel(ck)
	if err != nil {
		return nil, err
	}
	dev, err := gpu.Open(device)
	if err != nil {
		return nil, err
	}
	tr, err := train.New(m, dev, nil, train.Config{Resume: ck})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	return &checkpointTrainer{tr, dev}, nil
}

// openWeights opens lf's device and builds the named model for the images lf's evaluation loader
// gives from ds, with classes outputs, in an optimizer-less trainer loaded strictly with the
// safetensors weights at path; closing the trainer also closes the device.
func openWeights(lf *loaderFlags, ds loaders.Dataset, path, model string, classes int) (*checkpointTrainer, error) {
	if classes <= 0 {
		return nil, fmt.Errorf("%w: the data does not say how many classes it has: set --classes", errUsage)
	}
	if err := train.CheckWeightsFile(path); err != nil { // a .pth: say how to convert it
		return nil, err
	}
	dev, err := gpu.Open(lf.device)
	if err != nil {
		return nil, err
	}
	probe, err := lf.loader(ds, "test", false, dev, nil)
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	shape := probe.Shape()
	probe.Close()
	m, err := train.NewModel(model, shape, classes)
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	tr, err := train.New(m, dev, nil, train.Config{})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	if _, err := tr.LoadWeights(path, train.LoadOptions{}); err != nil {
		return nil, errors.Join(err, tr.Close(), dev.Close())
	}
	return &checkpointTrainer{tr, dev}, nil
}

// checkpointTrainer is a trainer that owns its device.
type checkpointTrainer struct {
	*train.Trainer
	dev gpu.Device
}

func (t *checkpointTrainer) Close() error { return errors.Join(t.Trainer.Close(), t.dev.Close()) }
