// Package loadertest holds the test helpers that the tests of package loaders and of the
// packages built on it (datasets) share: fixture images, and draining and closing loaders.
//
// It names no type of package loaders, so that loaders' own in-package tests can import it
// without an import cycle: it takes a loader's batches as the iterator Loader.Epoch returns and
// their contents as gpu.Buffers. Only test files import it (TestOnlyTestsImport checks).
package loadertest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"iter"
	"testing"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/transforms"
)

// NoLeaks checks for leaked goroutines after the test's other cleanups (Loader.Close) ran.
func NoLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// CloseAtEnd takes what a constructor (loaders.New, loaders.NewStream) returned: it fails the
// test on an error, and closes the value when the test ends, failing the test if Close does.
// The type argument names the value's type: CloseAtEnd[*loaders.Loader](t)(loaders.New(ds, cfg)).
func CloseAtEnd[C io.Closer](t testing.TB) func(C, error) C {
	return func(c C, err error) C {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return c
	}
}

// Releaser is a loader's batch (*loaders.Batch), which hands its buffers back with Release.
type Releaser interface{ Release() }

// Epoch collects keep's copy of every batch of one epoch (what Loader.Epoch returns), releasing
// each batch after keep; stopAfter >= 0 breaks after that many batches. It fails the test on an
// error.
func Epoch[B Releaser, T any](t testing.TB, batches iter.Seq2[B, error], stopAfter int, keep func(testing.TB, B) T) []T {
	t.Helper()
	var out []T
	for b, err := range batches {
		if err != nil {
			t.Fatalf("epoch: %v", err)
		}
		out = append(out, keep(t, b))
		b.Release()
		if len(out) == stopAfter {
			break
		}
	}
	return out
}

// Err releases every batch of one epoch up to the first error, and returns that error (nil: the
// epoch ended without one).
func Err[B Releaser](batches iter.Seq2[B, error]) error {
	for b, err := range batches {
		if err != nil {
			return err
		}
		b.Release()
	}
	return nil
}

// Host copies a batch out of its CPU-backend buffers: the first n*sampleLen bytes of images, and
// n little-endian int32 class ids from labels.
func Host(t testing.TB, images, labels gpu.Buffer, n, sampleLen int) ([]byte, []int32) {
	t.Helper()
	img, ok1 := gpu.HostBytes(images)
	lab, ok2 := gpu.HostBytes(labels)
	if !ok1 || !ok2 {
		t.Fatal("batch buffers are not CPU-backend buffers")
	}
	var ids []int32
	for k := range n {
		ids = append(ids, int32(binary.LittleEndian.Uint32(lab[4*k:])))
	}
	return bytes.Clone(img[:n*sampleLen]), ids
}

// RawInput is sample i of an h x w x c raw dataset: pixel j is byte(i*7 + j).
func RawInput(i, h, w, c int) transforms.Input {
	px := make([]byte, h*w*c)
	for j := range px {
		px[j] = byte(i*7 + j)
	}
	return transforms.Input{Pixels: px, H: h, W: w, C: c}
}

// PNG encodes a w x h RGB image whose pixels depend on seed.
func PNG(t testing.TB, w, h int, seed byte) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{seed + byte(x), byte(y) * 3, seed ^ byte(x+y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// PNGHeader returns a PNG signature and IHDR chunk declaring w x h RGB pixels, without any data:
// a decompression bomb's header when w*h is large.
func PNGHeader(w, h uint32) []byte {
	var ihdr bytes.Buffer
	ihdr.WriteString("IHDR")
	binary.Write(&ihdr, binary.BigEndian, w)
	binary.Write(&ihdr, binary.BigEndian, h)
	ihdr.Write([]byte{8, 2, 0, 0, 0})
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(ihdr.Len()-4))
	b.Write(ihdr.Bytes())
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr.Bytes()))
	return b.Bytes()
}
