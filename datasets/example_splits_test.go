package datasets_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/datasets"
)

// ExampleSplits packs three splits into one index with ShardWriter.BeginSplit, as stoke pack does,
// lists them and opens each; a split the data lacks is an error naming those it has.
func ExampleSplits() {
	out, _ := os.MkdirTemp("", "splits-")
	defer os.RemoveAll(out)
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(out, "shard-%s-%06d.tar")})
	if err != nil {
		fmt.Println(err)
		return
	}
	for split, n := range map[string]int{"train": 6, "val": 2, "test": 3} {
		err = errors.Join(err, w.BeginSplit(split))
		for _, s := range tiny(n) {
			err = errors.Join(err, w.Write(s))
		}
	}
	if err = errors.Join(err, w.Close()); err != nil {
		w.Abort()
		fmt.Println(err)
		return
	}

	splits, err := datasets.Splits("shards:" + out)
	fmt.Println(splits, err)
	for _, split := range splits {
		ds, err := datasets.Open("shards:"+out, split)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(split, ds.Len(), "samples")
		ds.(*datasets.Shards).Close()
	}
	// A glob of the val shards is the val split alone.
	_, err = datasets.Open("shards:"+filepath.Join(out, "shard-val-*.tar"), "test")
	fmt.Println(errors.Is(err, datasets.ErrNoSplit))
	// Output:
	// [train val test] <nil>
	// train 6 samples
	// val 2 samples
	// test 3 samples
	// true
}
