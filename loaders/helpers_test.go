package loaders

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// pngImage encodes a w x h RGB image whose pixels depend on seed.
func pngImage(t testing.TB, w, h int, seed byte) []byte {
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
