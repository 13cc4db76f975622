package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// loaderFlags are the flags of every command that runs a Loader.
type loaderFlags struct {
	data                           string
	size, batch, workers, prefetch int
	device                         string
	onError                        string
	maxSkipped                     int
	seed                           uint64
}

func (lf *loaderFlags) register(fs *flag.FlagSet, batch int) {
	fs.StringVar(&lf.data, "data", "", "dataset: mnist, mnist:DIR, cifar10:DIR, cifar100:DIR, DIR or folder:DIR, shards:GLOB")
	fs.IntVar(&lf.size, "size", 0, "output image side; 0 keeps a fixed-shape dataset's own size (MNIST, CIFAR) and means 224 for photos")
	fs.IntVar(&lf.batch, "batch", batch, "samples per batch")
	fs.IntVar(&lf.workers, "workers", 0, "loader workers (0: one per core)")
	fs.IntVar(&lf.prefetch, "prefetch", 0, "batches ready ahead of the consumer (0: default)")
	fs.StringVar(&lf.device, "device", "cpu", "device: cpu, cuda, cuda:N")
	fs.StringVar(&lf.onError, "on-error", "fail", "bad samples: fail (stop at the first) or skip (count and skip them)")
	fs.IntVar(&lf.maxSkipped, "max-skipped", 1000, "with --on-error skip, fail once an epoch skips more samples than this (0: no limit)")
	fs.Uint64Var(&lf.seed, "seed", 1, "seed of the sample order and of the augmentations")
}

func (lf *loaderFlags) check() error {
	if lf.data == "" {
		return fmt.Errorf("%w: --data is required", errUsage)
	}
	if lf.batch < 1 {
		return fmt.Errorf("%w: --batch %d; want >= 1", errUsage, lf.batch)
	}
	if _, err := loaders.ParseErrorPolicy(lf.onError); err != nil {
		return fmt.Errorf("%w: --on-error %q; want fail or skip", errUsage, lf.onError)
	}
	return nil
}

// transform picks the transform for split: none for fixed-shape datasets at their own size,
// otherwise torchvision's ImageNet recipe (train) or its evaluation transform (test).
func (lf *loaderFlags) transform(info loaders.Info, split string) *transforms.Pipeline {
	if lf.size == 0 && info.Shape.C > 0 {
		return nil
	}
	size := lf.size
	if size == 0 {
		size = 224
	}
	if split == "test" {
		return transforms.Eval(size)
	}
	return transforms.Train(size)
}

// open opens split of the dataset and a Loader over it that delivers to dev, ordered before the
// work of stream (nil: yielded once copied). The returned closer closes both.
func (lf *loaderFlags) open(split string, shuffle bool, dev gpu.Device, stream gpu.Stream) (*loaders.Loader, io.Closer, error) {
	ds, err := loaders.Open(lf.data, split)
	if err != nil {
		return nil, nil, err
	}
	policy, _ := loaders.ParseErrorPolicy(lf.onError)
	ld, err := loaders.New(ds, loaders.Config{
		Batch: lf.batch, Workers: lf.workers, Prefetch: lf.prefetch,
		Shuffle: shuffle, Seed: lf.seed,
		Transform: lf.transform(loaders.Describe(ds), split),
		Device:    dev, Stream: stream,
		OnError: policy, MaxSkipped: lf.maxSkipped,
	})
	if err != nil {
		closeDataset(ds)
		return nil, nil, err
	}
	return ld, closers{ld, datasetCloser{ds}}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type datasetCloser struct{ ds loaders.Dataset }

func (d datasetCloser) Close() error { return closeDataset(d.ds) }

func closeDataset(ds loaders.Dataset) error {
	if c, ok := ds.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
