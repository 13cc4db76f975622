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

// FuzzApply feeds arbitrary bytes through header parsing, decoding and a random crop: any input
// must give an output or an error wrapping one of the sentinels, never a panic or a hang, and
// the same output with the SIMD kernels as without (13 pixels a row: 8 by SIMD, 5 by Go).
func FuzzApply(f *testing.F) {
	fuzzSeeds(f)
	p := Compose(RandomResizedCrop(13), HorizontalFlip(0.5)).WithMaxPixels(1 << 20)
	w, r := p.NewWorker(), rng.NewSample()
	plain := p.NewWorker()
	dst, want := make([]byte, 3*13*13), make([]byte, 3*13*13)
	f.Fuzz(func(t *testing.T, data []byte) {
		r.Reset(1, 0, len(data))
		err := w.Apply(dst, Input{Encoded: data}, r)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("Apply = %v; want nil, ErrCorrupt or ErrTooLarge", err)
		}
		if err != nil || !avx2 {
			return
		}
		withoutSIMD(t, func() {
			r.Reset(1, 0, len(data))
			err = plain.Apply(want, Input{Encoded: data}, r)
		})
		if err != nil || !bytes.Equal(dst, want) {
			t.Errorf("Apply with SIMD = %v, without = %v (error %v)", dst, want, err)
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
