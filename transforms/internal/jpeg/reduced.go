package jpeg

import "math"

// Reduced-size inverse DCTs (as libjpeg's scale_denom 2 and 4): an n x n block is reconstructed
// from the n x n lowest-frequency coefficients with the n-point IDCT, normalized like the 8-point
// one, which samples the band-limited block at the centres of n x n groups of pixels.

// idctTables[n][x*n+u] = C(u) cos((2x+1)uπ/2n) / 2, C(0) = 1/√2.
var idctTables = func() (t [5][]float32) {
	for _, n := range []int{2, 4} {
		t[n] = make([]float32, n*n)
		for x := range n {
			for u := range n {
				cu := 1.0
				if u == 0 {
					cu = 1 / math.Sqrt2
				}
				t[n][x*n+u] = float32(cu * math.Cos(float64(2*x+1)*float64(u)*math.Pi/float64(2*n)) / 2)
			}
		}
	}
	return t
}()

// idctReduced writes the n x n pixels of dequantized block b (natural order) to dst.
func idctReduced(dst []byte, stride int, b *block, n int) {
	t := idctTables[n]
	var tmp [16]float32 // tmp[v*n+x]: rows transformed
	for v := range n {
		for x := range n {
			s := float32(0)
			for u := range n {
				s += t[x*n+u] * float32(b[v*8+u])
			}
			tmp[v*n+x] = s
		}
	}
	for y := range n {
		row := dst[y*stride : y*stride+n]
		for x := range n {
			s := float32(128.5)
			for v := range n {
				s += t[y*n+v] * tmp[v*n+x]
			}
			switch {
			case s <= 0:
				row[x] = 0
			case s >= 255:
				row[x] = 255
			default:
				row[x] = uint8(s)
			}
		}
	}
}
