package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// planned is a user dataset that wraps another and implements loaders.ReadPlanner: it is told,
// when an epoch starts, the indices the epoch will read.
type planned struct {
	loaders.Dataset
	plans [][]int
}

func (p *planned) PlanReads(indices []int) { p.plans = append(p.plans, slices.Clone(indices)) }

func (p *planned) Info() loaders.Info { return loaders.Describe(p.Dataset) }

var _ loaders.ReadPlanner = (*planned)(nil)

// shardsAndReadAhead writes shards with datasets.ShardWriter, opens the folder with datasets.Open,
// and reads it through a Loader that hands a user dataset its read-ahead plan.
func shardsAndReadAhead() error {
	dir, err := os.MkdirTemp("", "stoke-external-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(dir, "s-%04d.tar.zst"), MaxSamples: 4})
	if err != nil {
		return err
	}
	for i := range 10 {
		s := loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(i), 1, 2, 3}, H: 2, W: 2, C: 1}, Label: i % 2}
		if err := w.Write(s); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	ds, err := datasets.Open("shards:"+dir, "train")
	if err != nil {
		return err
	}
	defer ds.(io.Closer).Close()
	p := &planned{Dataset: ds}
	ld, err := loaders.New(p, loaders.Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 7, Transform: transforms.Compose(transforms.CenterCrop(2))})
	if err != nil {
		return err
	}
	defer ld.Close()
	var read []int
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			return err
		}
		read = append(read, b.Indices...)
		b.Release()
	}
	if len(p.plans) != 1 || !slices.Equal(p.plans[0], read) || len(read) != 10 {
		return fmt.Errorf("planned %v, read %v; want one plan equal to the 10 indices read", p.plans, read)
	}
	fmt.Printf("datasets: %d samples in %d shards; the Loader planned the reads of a user dataset\n", ds.Len(), len(w.Shards()))
	return nil
}
