package loaders_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/loaders"
)

// ExampleSplitValidation holds a seeded fifth of a dataset out for validation: the two parts are
// disjoint, cover the data, and are the same for the same seed.
func ExampleSplitValidation() {
	train, val, err := loaders.SplitValidation(gradients{n: 10}, 0.2, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(train.Len(), val.Len(), val.Info().Name)
	// Output: 8 2 gradients (validation part)
}

// ExampleCreatePackDir writes a dataset as shards the way stoke pack does: the folder is held
// exclusively, the shards and the index take their names only when complete, and a failure leaves
// nothing that reads as a dataset.
func ExampleCreatePackDir() {
	out, _ := os.MkdirTemp("", "pack-")
	defer os.RemoveAll(out)
	dir, err := loaders.CreatePackDir(out, "shard-", false)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := loaders.NewShardWriter(loaders.ShardWriterConfig{Pattern: filepath.Join(out, "shard-%06d.tar")})
	if err != nil {
		fmt.Println(err)
		return
	}
	ds := gradients{n: 5}
	for i := range ds.Len() {
		s, _ := ds.Sample(context.Background(), i)
		if err = w.Write(s); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		w.Abort()
		dir.Abort()
		fmt.Println(err)
		return
	}
	dir.Commit()

	packed, err := loaders.Open("shards:"+out, "train")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer packed.(*loaders.Shards).Close()
	fmt.Println(packed.Len(), "samples")
	// Output: 5 samples
}
