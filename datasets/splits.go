package datasets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/loaders"
)

// splitOrder is every split a dataset may have, in the order Splits lists them.
var splitOrder = []string{"train", "val", "test"}

// splitAliases maps the names that mean a split, as folders and Open's split argument take them,
// to the split: torchvision's datasets and Kaggle's or Roboflow's exports name the validation
// split val, valid or validation.
var splitAliases = map[string]string{"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}

// splitName returns the split that name means ("" is train); any other name is an error wrapping
// ErrSpec, for the caller to prefix.
func splitName(name string) (string, error) {
	if name == "" {
		return "train", nil
	}
	if s, ok := splitAliases[name]; ok {
		return s, nil
	}
	return "", fmt.Errorf("split %q, want train, val (valid, validation) or test: %w", name, ErrSpec)
}

// sortSplits orders splits as splitOrder does.
func sortSplits(splits []string) []string {
	slices.SortFunc(splits, func(a, b string) int { return slices.Index(splitOrder, a) - slices.Index(splitOrder, b) })
	return splits
}

// noSplit is the error of a dataset (what) without split: it names the splits it has.
func noSplit(what, split string, have []string) error {
	return fmt.Errorf("datasets: %s has no %s split (its splits: %s): %w", what, split, strings.Join(have, ", "), ErrNoSplit)
}

// Splits returns the splits of the dataset spec names (see Open), in the order train, val, test:
// those whose files exist for MNIST and CIFAR, the split folders of a folder (train alone for a
// folder of class folders), and for shards the splits their index records (train alone for
// shards without one, or packed before splits). Open(spec, split) opens each of them.
func Splits(spec string) ([]string, error) {
	return Opener{}.Splits(context.Background(), spec)
}

// Splits is the package function Splits, whose requests to a store (listings, indexes) end when
// ctx does.
func (o Opener) Splits(ctx context.Context, spec string) ([]string, error) {
	kind, arg, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	var have []string
	switch kind {
	case "mnist":
		for _, s := range []string{"train", "test"} {
			if img, lab := findMNIST(arg, s); img != "" && lab != "" {
				have = append(have, s)
			}
		}
	case "cifar10", "cifar100":
		for _, s := range []string{"train", "test"} {
			dir, files, _, _ := cifarFiles(arg, map[string]int{"cifar10": 10, "cifar100": 100}[kind], s)
			if _, err := os.Stat(filepath.Join(dir, files[0])); err == nil {
				have = append(have, s)
			}
		}
	case "folder":
		dirs, err := folderSplits(arg)
		if err != nil {
			return nil, err
		}
		for s := range dirs {
			have = append(have, s)
		}
		if len(have) == 0 {
			have = []string{"train"}
		}
	case "shards":
		_, src, err := listShardArg(ctx, arg)
		if err != nil {
			return nil, err
		}
		if err := src.findEntries(ctx); err != nil {
			return nil, fmt.Errorf("datasets: splits of %q: %w", spec, err)
		}
		for _, e := range src.entries {
			if s := entrySplit(e); !slices.Contains(have, s) {
				have = append(have, s)
			}
		}
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("datasets: splits of %q: no split's files in %s: %w", spec, arg, ErrNoSplit)
	}
	return sortSplits(have), nil
}

// folderSplits returns dir's split folders by split: its subfolders named train, val (valid,
// validation) or test. Two folders of one split (val/ and validation/) are an error wrapping
// ErrSpec.
func folderSplits(dir string) (map[string]string, error) {
	if dir == "" {
		return nil, fmt.Errorf("datasets: open: empty folder path: %w", ErrSpec)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("datasets: image folder: %w", err)
	}
	dirs := map[string]string{}
	for _, e := range entries {
		s, ok := splitAliases[e.Name()]
		if !ok {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue
		}
		if dirs[s] != "" {
			return nil, fmt.Errorf("datasets: image folder %s: %s/ and %s/ are both its %s split; keep one: %w", dir, filepath.Base(dirs[s]), e.Name(), s, ErrSpec)
		}
		dirs[s] = p
	}
	return dirs, nil
}

// openFolder opens split of dir: its split folder (see folderSplits), or dir itself as the train
// split when it has none.
func openFolder(dir, split string) (loaders.Dataset, error) {
	dirs, err := folderSplits(dir)
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		if split != "train" {
			return nil, noSplit(dir+" (class folders, no train/ val/ test/ folders)", split, []string{"train"})
		}
		return NewImageFolder(dir)
	}
	sub, ok := dirs[split]
	if !ok {
		var have []string
		for s := range dirs {
			have = append(have, s)
		}
		return nil, noSplit(dir, split, sortSplits(have))
	}
	return NewImageFolder(sub)
}

// entrySplit is the split of a shard listed by e: its index's, train for a shard without one.
func entrySplit(e *shardEntry) string {
	if e == nil || e.Split == "" {
		return "train"
	}
	return e.Split
}

// only returns the shards of s that belong to split (see entrySplit); none is an error wrapping
// ErrNoSplit that names the splits s holds.
func (s shardList) only(name, split string) (shardList, error) {
	var out shardList
	var have []string
	for i, p := range s.paths {
		sp := entrySplit(s.entries[i])
		if !slices.Contains(have, sp) {
			have = append(have, sp)
		}
		if sp == split {
			out.add(p, s.objs[i], s.entries[i])
		}
	}
	if len(out.paths) == 0 {
		return out, noSplit("shards "+name, split, sortSplits(have))
	}
	return out, nil
}
