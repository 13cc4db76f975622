package transforms

import "math"

// The pixel steps of a Plan, run on the output after its geometry has been resampled.

// rotatePixels writes into dst the image src turned by angle radians counterclockwise about its
// centre, with nearest-neighbour sampling and zeros where the turned image does not reach (as
// torchvision's rotate with its defaults).
func rotatePixels(dst, src []byte, angle float64, nc, w, h, pix, row, chanStride int) {
	sin, cos := math.Sincos(angle)
	cx, cy := float64(w-1)/2, float64(h-1)/2
	for y := range h {
		dy := float64(y) - cy
		for x := range w {
			dx := float64(x) - cx
			// The inverse turn: where output pixel (x, y) comes from.
			sx := int(math.Round(cos*dx - sin*dy + cx))
			sy := int(math.Round(sin*dx + cos*dy + cy))
			d := y*row + x*pix
			if sx < 0 || sx >= w || sy < 0 || sy >= h {
				for c := range nc {
					dst[d+c*chanStride] = 0
				}
				continue
			}
			s := sy*row + sx*pix
			for c := range nc {
				dst[d+c*chanStride] = src[s+c*chanStride]
			}
		}
	}
}

// jitterPixels applies one of ColorJitter's steps to the n pixels of dst in place. Brightness and
// contrast are lookup tables; saturation blends each pixel with its own grey value.
func jitterPixels(dst []byte, op pixelOp, nc, n, pix, chanStride int) {
	switch op.kind {
	case opBrightness, opContrast:
		var lut [256]byte
		mean := 0.0
		if op.kind == opContrast {
			var sum uint64
			for i := range n {
				sum += uint64(grey(dst, i*pix, nc, chanStride))
			}
			mean = math.Floor(float64(sum)/float64(n) + 0.5)
		}
		for v := range lut {
			lut[v] = round8(mean + op.f*(float64(v)-mean))
		}
		for c := range nc {
			for i := range n {
				d := i*pix + c*chanStride
				dst[d] = lut[dst[d]]
			}
		}
	case opSaturation:
		if nc != 3 {
			return
		}
		f := float32(op.f)
		for i := range n {
			g := float32(grey(dst, i*pix, 3, chanStride))
			for c := range 3 {
				d := i*pix + c*chanStride
				dst[d] = round8(float64(g + f*(float32(dst[d])-g)))
			}
		}
	}
}

// grey is PIL's ITU-R 601-2 luma of the pixel at offset d.
func grey(dst []byte, d, nc, chanStride int) byte {
	if nc == 1 {
		return dst[d]
	}
	r, g, b := uint32(dst[d]), uint32(dst[d+chanStride]), uint32(dst[d+2*chanStride])
	return byte((r*19595 + g*38470 + b*7471 + 1<<15) >> 16)
}

func round8(v float64) byte {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return byte(v + 0.5)
}
