package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/train"
)

func runExport(_ context.Context, e *env, args []string) error {
	fs := e.flags("--checkpoint PATH --out model.safetensors", false)
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train (required)")
	out := fs.String("out", "", "safetensors file to write (required)")
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
	if err := tr.Export(*out); err != nil {
		return err
	}
	m := tr.Model()
	e.printf("wrote %s: %s, %d parameters\n", *out, m.Name(), m.NumParams())
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

// checkpointTrainer is a trainer that owns its device.
type checkpointTrainer struct {
	*train.Trainer
	dev gpu.Device
}

func (t *checkpointTrainer) Close() error { return errors.Join(t.Trainer.Close(), t.dev.Close()) }
