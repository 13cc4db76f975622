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

// FuzzApply feeds arbitrary bytes through header parsing, decoding and two random Chains (a
// resized crop and flip; a padded crop with flips, quarter turns, whose JPEG decode reads a
// transposed region, and a rotation; the augmentation policies and ops): any input must give an output or an error wrapping one of
// the sentinels, never a panic or a hang, and the same output with the SIMD kernels as without
// (13 pixels a row: 8 by SIMD, 5 by Go).
func FuzzApply(f *testing.F) {
	fuzzSeeds(f)
	type pair struct{ w, plain *Worker }
	var ws []pair
	for _, p := range []*Chain{
		Compose(RandomResizedCrop(13), HorizontalFlip(0.5)),
		Compose(RandomCrop(13, 2), VerticalFlip(0.5), RandomRotate90(), RandomRotation(15)),
		Compose(RandomResizedCrop(13), HorizontalFlip(0.5)).WithDecode(ExactDecode),
		Compose(RandomResizedCrop(13), TrivialAugmentWide(), RandAugment(2, 20), AutoAugment(ImageNetPolicy),
			RandomPerspective(0.5, 0.5), GaussianBlur(5, 0.5, 2), ColorJitterHue(0.3, 0.3, 0.3, 0.2), RandomErasing(0.5)),
	} {
		p = p.WithMaxPixels(1 << 20)
		ws = append(ws, pair{p.NewWorker(), p.NewWorker()})
	}
	r := rng.NewSample()
	dst, want := make([]byte, 3*13*13), make([]byte, 3*13*13)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, w := range ws {
			r.Reset(1, 0, len(data))
			err := w.w.Apply(dst, Input{Encoded: data}, r.Rand)
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%v: Apply = %v; want nil, ErrCorrupt or ErrTooLarge", w.w.p, err)
			}
			if err != nil || !avx2 {
				continue
			}
			withoutSIMD(t, func() {
				r.Reset(1, 0, len(data))
				err = w.plain.Apply(want, Input{Encoded: data}, r.Rand)
			})
			if err != nil || !bytes.Equal(dst, want) {
				t.Errorf("%v: Apply with SIMD = %v, without = %v (error %v)", w.w.p, dst, want, err)
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
