package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image/gif"
	"image/png"
	"os"
	"testing"

	"golang.org/x/image/bmp"

	"github.com/stoke-ml/stoke/internal/rng"
)

func fuzzSeeds(f *testing.F) {
	q := quadrants()
	f.Add(encodeJPEG(f, q, 90))
	f.Add(withOrientation(encodeJPEG(f, q, 50), 6, binary.BigEndian))
	f.Add(encodeJPEG(f, toImage(hwc(9, 7, 1, func(y, x, c int) byte { return byte(x * y) })), 80))
	for _, enc := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return png.Encode(b, q) },
		func(b *bytes.Buffer) error { return gif.Encode(b, q, nil) },
		func(b *bytes.Buffer) error { return bmp.Encode(b, q) },
	} {
		var b bytes.Buffer
		if err := enc(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	if w, err := os.ReadFile("testdata/tiny.webp"); err == nil {
		f.Add(w)
	}
}

// FuzzApply feeds arbitrary bytes through header parsing, decoding and two random pipelines (a
// resized crop and flip; a padded crop with flips and turns, whose JPEG decode reads a transposed
// region): any input must give an output or an error wrapping one of the sentinels, never a panic
// or a hang.
func FuzzApply(f *testing.F) {
	fuzzSeeds(f)
	var ws []*Worker
	for _, p := range []*Pipeline{
		Compose(RandomResizedCrop(8), HorizontalFlip(0.5)),
		Compose(RandomCrop(8, 2), VerticalFlip(0.5), RandomRotate90(), RandomRotation(15)),
	} {
		ws = append(ws, p.WithMaxPixels(1<<20).NewWorker())
	}
	r := rng.NewSample()
	dst := make([]byte, 3*8*8)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, w := range ws {
			r.Reset(1, 0, len(data))
			err := w.Apply(dst, Input{Encoded: data}, r.Rand)
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%v: Apply = %v; want nil, ErrCorrupt or ErrTooLarge", w.p, err)
			}
		}
	})
}

// FuzzDecodeInfo checks that header parsing (JPEG markers, EXIF) never panics and reports sizes
// that are positive.
func FuzzDecodeInfo(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := DecodeInfo(data)
		if err == nil && (info.Width <= 0 || info.Height <= 0 || info.Orientation < 1 || info.Orientation > 8) {
			t.Errorf("DecodeInfo = %+v; want positive size and orientation 1..8", info)
		}
	})
}
