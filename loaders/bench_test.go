package loaders

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// jpegDataset returns n JPEG images of w x h with smooth content (so they compress like photos).
func jpegDataset(b *testing.B, n, w, h int) (*Memory, int64) {
	samples := make([]Sample, n)
	var total int64
	for i := range samples {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, color.RGBA{byte(x + i), byte(y * 2), byte(x ^ y), 255})
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		samples[i] = Sample{Input: transforms.Input{Encoded: buf.Bytes()}, Label: i % 10}
		total += int64(buf.Len())
	}
	return NewMemory(Info{Name: "jpeg", NumClasses: 10}, samples), total
}

// BenchmarkLoaderEpoch runs whole epochs through the Loader: decode, augment, collate into host
// slots and copy to the CPU device. One op is one epoch.
func BenchmarkLoaderEpoch(b *testing.B) {
	type bench struct {
		name  string
		ds    Dataset
		bytes int64
		tf    *transforms.Chain
	}
	jpegs, jpegBytes := jpegDataset(b, 256, 160, 120)
	raw := rawDataset(4096, 28, 28, 1)
	for _, bc := range []bench{
		{"jpeg160x120/train112", jpegs, jpegBytes, transforms.Train(112)},
		{"raw28x28/none", raw, int64(raw.Len() * 784), nil},
	} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", bc.name, workers), func(b *testing.B) {
				l, err := New(bc.ds, Config{Batch: 64, Workers: workers, Shuffle: true, Transform: bc.tf, Allocator: pinned.Heap()})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.ReportAllocs()
				b.SetBytes(bc.bytes)
				e := 0
				for b.Loop() {
					if err := loadertest.Err(l.Epoch(context.Background(), e)); err != nil {
						b.Fatal(err)
					}
					e++
				}
				b.ReportMetric(float64(bc.ds.Len()*e)/b.Elapsed().Seconds(), "images/s")
			})
		}
	}
}
