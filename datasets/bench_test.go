package datasets

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// BenchmarkShardsSample reads samples of raw 96 x 96 x 3 pixels from a plain and a zstd shard.
// One op is one sample.
func BenchmarkShardsSample(b *testing.B) {
	const n, side = 64, 96
	samples := rawSamples(n, side)
	for _, suffix := range []string{".tar", ".tar.zst"} {
		b.Run(suffix[1:], func(b *testing.B) {
			w := writeShards(b, filepath.Join(b.TempDir(), "s-%04d"+suffix), 0, samples)
			ds, err := OpenShards("bench", w.Shards())
			if err != nil {
				b.Fatal(err)
			}
			defer ds.Close()
			b.ReportAllocs()
			b.SetBytes(side * side * 3)
			i := 0
			for b.Loop() {
				if _, err := ds.Sample(context.Background(), i%n); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkShardsEpoch runs whole epochs over zstd shards of raw 64 x 64 x 3 images (8 shards of
// 64), read both ways: by random access (Open's default) and as a stream through a shuffle buffer of
// 256 (OpenStream). One op is one epoch; RandomResizedCrop(56) + flip, 2 workers, batch 64.
func BenchmarkShardsEpoch(b *testing.B) {
	const n, side = 512, 64
	samples := rawSamples(n, side)
	w := writeShards(b, filepath.Join(b.TempDir(), "s-%04d.tar.zst"), 64, samples)
	cfg := loaders.Config{Batch: 64, Workers: 2, Shuffle: true, Transform: transforms.Train(56), Allocator: pinned.Heap()}
	for _, way := range []string{"random", "stream"} {
		b.Run(way, func(b *testing.B) {
			var l *loaders.Loader
			var err error
			if way == "random" {
				var ds *Shards
				if ds, err = OpenShards("bench", w.Shards()); err != nil {
					b.Fatal(err)
				}
				defer ds.Close()
				l, err = loaders.New(ds, cfg)
			} else {
				c := cfg
				c.ShuffleBuffer = 256
				l, err = loaders.NewStream(NewShardSource("bench", w.Shards(), nil), c)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ReportAllocs()
			e := 0
			for b.Loop() {
				if err := loadertest.Err(l.Epoch(context.Background(), e)); err != nil {
					b.Fatal(err)
				}
				e++
			}
			b.ReportMetric(float64(n*e)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// rawSamples returns n samples of side x side x 3 raw pixels with labels 0 to 9.
func rawSamples(n, side int) []loaders.Sample {
	samples := make([]loaders.Sample, n)
	for i := range samples {
		px := make([]byte, side*side*3)
		for j := range px {
			px[j] = byte(i + j/7)
		}
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: side, W: side, C: 3}, Label: i % 10}
	}
	return samples
}
