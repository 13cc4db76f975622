package datasets_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// ExampleNewShardWriter writes a dataset as shards, as stoke pack does: the shards and the index
// take their names only when complete, so a failure leaves nothing that reads as a dataset, and
// the folder then opens as shards:DIR.
func ExampleNewShardWriter() {
	out, _ := os.MkdirTemp("", "pack-")
	defer os.RemoveAll(out)
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(out, "shard-%06d.tar")})
	if err != nil {
		fmt.Println(err)
		return
	}
	ds := loaders.NewMemory(loaders.Info{Name: "tiny"}, tiny(5))
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
		fmt.Println(err)
		return
	}

	packed, err := datasets.Open("shards:"+out, "train")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer packed.(*datasets.Shards).Close()
	fmt.Println(packed.Len(), "samples")
	// Output: 5 samples
}

// tiny returns n samples of 2 x 2 gray pixels, labels i % 2.
func tiny(n int) []loaders.Sample {
	out := make([]loaders.Sample, n)
	for i := range out {
		out[i] = loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(i), 1, 2, 3}, H: 2, W: 2, C: 1}, Label: i % 2}
	}
	return out
}
