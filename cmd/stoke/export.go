package main

import (
	"context"
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
	m, err := train.CheckpointModel(*ck)
	if err != nil {
		return err
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	tr, err := train.New(m, dev, nil, train.Config{Resume: *ck})
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := tr.Export(*out); err != nil {
		return err
	}
	e.printf("wrote %s: %s, %d parameters\n", *out, m.Name(), m.NumParams())
	return nil
}
