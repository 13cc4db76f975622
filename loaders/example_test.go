package loaders_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// gradients is a user-defined dataset: n tiny grayscale images computed on the fly, labelled by
// parity. Implementing Len and Sample (safe for concurrent use) is all a Loader needs; Info is
// optional.
type gradients struct{ n int }

func (g gradients) Len() int { return g.n }

func (g gradients) Sample(_ context.Context, i int) (loaders.Sample, error) {
	if i < 0 || i >= g.n {
		return loaders.Sample{}, fmt.Errorf("gradients: sample %d: %w", i, loaders.ErrIndex)
	}
	px := make([]byte, 4*4)
	for j := range px {
		px[j] = byte(i*16 + j)
	}
	return loaders.Sample{Input: transforms.Input{Pixels: px, H: 4, W: 4, C: 1}, Label: i % 2, Key: fmt.Sprint("gradient-", i)}, nil
}

func (g gradients) Info() loaders.Info {
	return loaders.Info{Name: "gradients", NumClasses: 2, Shape: transforms.Shape{C: 1, H: 4, W: 4}}
}

// Example_customDataset shows a user-defined Dataset and how the package describes it.
func Example_customDataset() {
	var ds loaders.Dataset = gradients{n: 10}
	s, err := ds.Sample(context.Background(), 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	info := loaders.Describe(ds)
	fmt.Println(info.Name, ds.Len(), info.NumClasses, info.Shape)
	fmt.Println(s.Key, s.Label, s.Input.Pixels[:3])
	// Output:
	// gradients 10 2 1x4x4
	// gradient-3 1 [48 49 50]
}

// ExampleWeighted oversamples a rare class with a weighted sampler: sample i is drawn with
// probability weights[i]/sum(weights), with replacement, in draws that depend on (Seed, epoch).
func ExampleWeighted() {
	ds := gradients{n: 10} // labels 0 and 1 alternate
	weights := make([]float64, ds.Len())
	for i := range weights {
		weights[i] = 1
		if i%2 == 1 {
			weights[i] = 3 // class 1 three times as often
		}
	}
	sampler, err := loaders.Weighted(weights, 1000) // 1000 draws per epoch
	if err != nil {
		fmt.Println(err)
		return
	}
	ld, err := loaders.New(ds, loaders.Config{Batch: 100, Workers: 2, Seed: 1, Sampler: sampler})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ld.Close()
	perClass := [2]int{}
	for batch, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		labels, _ := gpu.HostBytes(batch.Labels)
		for k := range batch.N {
			perClass[binary.LittleEndian.Uint32(labels[4*k:])]++
		}
		batch.Release()
	}
	fmt.Println(ld.BatchesPerEpoch(), "batches; class 1 drawn about 3 times as often:", perClass[1] > 2*perClass[0] && perClass[1] < 4*perClass[0])
	// Output:
	// 10 batches; class 1 drawn about 3 times as often: true
}

// ExampleLoader iterates an epoch of a user-defined dataset on the default CPU device: batches
// arrive as device buffers of uint8 CHW images and int32 labels.
func ExampleLoader() {
	ld, err := loaders.New(gradients{n: 10}, loaders.Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ld.Close()
	samples := 0
	for batch, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		labels, _ := gpu.HostBytes(batch.Labels) // CPU backend: the device memory is Go memory
		for k, i := range batch.Indices {
			if int(binary.LittleEndian.Uint32(labels[4*k:])) != i%2 {
				fmt.Println("label mismatch")
			}
		}
		samples += batch.N
		batch.Release()
	}
	mean, std := ld.Normalization()
	fmt.Println(ld.BatchesPerEpoch(), "batches,", samples, "samples of", ld.Shape(), "normalize", mean, std)
	fmt.Printf("%+v\n", ld.State())
	// Output:
	// 3 batches, 10 samples of 1x4x4 normalize [0] [1]
	// {Epoch:1 Batch:0 Seed:1 Len:10 Rank:0 WorldSize:1 BatchSize:4 Shuffle:true DropLast:false ShuffleBuffer:0 Read:0 Buffer:[]}
}

// ExampleShardWriter packs a dataset into WebDataset tar shards (what `stoke pack` does) and opens
// them again with Open.
func ExampleShardWriter() {
	dir, err := os.MkdirTemp("", "shards-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ds := gradients{n: 5}
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(dir, "train-%04d.tar"), MaxSamples: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range ds.Len() {
		s, err := ds.Sample(context.Background(), i)
		if err == nil {
			err = w.Write(s) // raw pixels become KEY.raw + KEY.json {"shape": ...} + KEY.cls
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Close(); err != nil { // also writes index.json (wids-shard-index-v1)
		fmt.Println(err)
		return
	}
	for _, p := range w.Shards() {
		fmt.Println(filepath.Base(p))
	}
	back, err := datasets.Open("shards:"+filepath.Join(dir, "train-*.tar"), "train")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer back.(io.Closer).Close()
	s, err := back.Sample(context.Background(), 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Len(), "samples; sample 3:", filepath.Base(s.Key), "label", s.Label, "pixels", s.Input.Pixels[:3])
	// Output:
	// train-0000.tar
	// train-0001.tar
	// train-0002.tar
	// 5 samples; sample 3: train-0001.tar:000000003 label 1 pixels [48 49 50]
}

// ExampleOpener_OpenStream streams shards that stoke pack (or a ShardWriter) wrote. Through their
// index the source knows each shard's length (a SizedSource), so that ranks split whole shards.
// With Opener.CacheDir, remote shards (s3://, https://) are read from the cache, and the next ones
// in the epoch's order download while one is read.
func ExampleOpener_OpenStream() {
	dir, err := os.MkdirTemp("", "shards-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(dir, "train-%04d.tar.zst"), MaxSamples: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	ds := gradients{n: 5}
	for i := range ds.Len() {
		s, _ := ds.Sample(context.Background(), i)
		if err := w.Write(s); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}
	src, err := datasets.Opener{}.OpenStream("shards:"+dir, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.(io.Closer).Close()
	fmt.Println(src.Parts(), "parts of", src.(loaders.SizedSource).PartLens(), "samples")
	st, err := src.Open(context.Background(), 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	for {
		s, err := st.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(filepath.Base(s.Key), "label", s.Label)
	}
	// Output:
	// 3 parts of [2 2 1] samples
	// train-0002.tar.zst:000000004 label 0
}

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
