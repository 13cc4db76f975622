package transforms

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// hwc makes an H x W x C image whose pixel values are f(y, x, c).
func hwc(h, w, c int, f func(y, x, c int) byte) Input {
	pix := make([]byte, h*w*c)
	for y := range h {
		for x := range w {
			for k := range c {
				pix[(y*w+x)*c+k] = f(y, x, k)
			}
		}
	}
	return Input{Pixels: pix, H: h, W: w, C: c}
}

// chw rearranges an HWC input into the CHW bytes Apply should produce for the identity.
func chw(in Input) []byte {
	out := make([]byte, len(in.Pixels))
	n := in.H * in.W
	for i := range n {
		for c := range in.C {
			out[c*n+i] = in.Pixels[i*in.C+c]
		}
	}
	return out
}

func toImage(in Input) *image.NRGBA {
	im := image.NewNRGBA(image.Rect(0, 0, in.W, in.H))
	for y := range in.H {
		for x := range in.W {
			p := in.Pixels[(y*in.W+x)*in.C:]
			c := color.NRGBA{p[0], p[0], p[0], 255}
			if in.C >= 3 {
				c.G, c.B = p[1], p[2]
			}
			im.SetNRGBA(x, y, c)
		}
	}
	return im
}

func encodeJPEG(t testing.TB, im image.Image, quality int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, im, &jpeg.Options{Quality: quality}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withOrientation inserts an APP1 Exif segment carrying orientation o after SOI.
func withOrientation(j []byte, o int, bo binary.ByteOrder) []byte {
	tiff := make([]byte, 8+2+12+4)
	if bo == binary.LittleEndian {
		copy(tiff, "II*\x00")
	} else {
		copy(tiff, "MM\x00*")
	}
	bo.PutUint32(tiff[4:], 8)
	bo.PutUint16(tiff[8:], 1)
	bo.PutUint16(tiff[10:], 0x0112)
	bo.PutUint16(tiff[12:], 3)
	bo.PutUint32(tiff[14:], 1)
	bo.PutUint16(tiff[18:], uint16(o))
	seg := append([]byte("Exif\x00\x00"), tiff...)
	out := []byte{0xff, 0xd8, 0xff, 0xe1, 0, 0}
	binary.BigEndian.PutUint16(out[4:], uint16(len(seg)+2))
	out = append(out, seg...)
	return append(out, j[2:]...)
}

func absDiff(a, b byte) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}
