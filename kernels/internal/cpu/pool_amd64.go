//go:build !noasm

package cpu

import "golang.org/x/sys/cpu"

// poolAVX512 selects the AVX-512 poolings of pool_amd64.s, whole planes at a time; without it
// the AVX2 loops take the rows of 8 outputs or more.
var poolAVX512 = cpu.X86.HasAVX512F

//go:noescape
func maxPool2x2AVX512(y *float32, arg *int32, x *float32, planes, h, w, oh, ow int)

//go:noescape
func maxPoolBack2x2AVX512(dx, dy *float32, arg *int32, planes, h, w, oh, ow int)

//go:noescape
func maxPoolBack2x2AVX2(dx, dy *float32, arg *int32, planes, h, w, oh, ow int)

// maxPool2x2SIMD does maxPool2x2 over planes consecutive h×w planes if it can and reports
// whether it did.
func maxPool2x2SIMD(y []float32, arg []int32, x []float32, planes, h, w, oh, ow int) bool {
	if !poolAVX512 || !poolFits(len(y), len(arg), len(x), planes, h, w, oh, ow) {
		return false
	}
	maxPool2x2AVX512(&y[0], &arg[0], &x[0], planes, h, w, oh, ow)
	return true
}

// maxPoolBack2x2SIMD writes the inputs within the 2x2 windows of planes h×w planes of dx (0 + dy
// at the window's arg, +0 at the others: the Go loop's add to a cleared dx) if it can and reports
// whether it did; the inputs outside every window are the caller's.
func maxPoolBack2x2SIMD(dx, dy []float32, arg []int32, planes, h, w, oh, ow int) bool {
	if !poolFits(len(dy), len(arg), len(dx), planes, h, w, oh, ow) {
		return false
	}
	switch {
	case poolAVX512:
		maxPoolBack2x2AVX512(&dx[0], &dy[0], &arg[0], planes, h, w, oh, ow)
	case hasAVX2 && ow >= 8:
		maxPoolBack2x2AVX2(&dx[0], &dy[0], &arg[0], planes, h, w, oh, ow)
	default:
		return false
	}
	return true
}

// poolFits reports whether planes h×w planes of 2x2 windows, oh×ow of them each, lie within
// outputs of ny and na and inputs of nx values (the assembly checks no bounds).
func poolFits(ny, na, nx, planes, h, w, oh, ow int) bool {
	return planes > 0 && oh > 0 && ow > 0 && 2*oh <= h && 2*ow <= w &&
		planes*h*w <= nx && planes*oh*ow <= ny && planes*oh*ow <= na
}

//go:noescape
func maxPoolRowAVX2(y *float32, arg *int32, row0, row1 *float32, n, w, base int)

// maxPoolRowSIMD does the outputs of one output row of maxPool2x2 that it can and returns how
// many (all of a row of at least 8: the last block of 8 overlaps the one before, writing the
// same values again); row0 and row1 are the two input rows, base row0's index in the plane.
func maxPoolRowSIMD(y []float32, arg []int32, row0, row1 []float32, w, base int) int {
	n := len(y) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _, _ = arg[len(y)-1], row0[2*len(y)-1], row1[2*len(y)-1]
	maxPoolRowAVX2(&y[0], &arg[0], &row0[0], &row1[0], n, w, base)
	if t := len(y) - 8; t > n-8 {
		maxPoolRowAVX2(&y[t], &arg[t], &row0[2*t], &row1[2*t], 8, w, base+2*t)
	}
	return len(y)
}

//go:noescape
func maxPoolRow3AVX2(y *float32, arg *int32, row *float32, n, base int, first bool)

// maxPoolRow3SIMD is one input row's part in the outputs y of a 3-wide stride-2 pooling whose
// windows lie inside row (output i reads row[2i:2i+3]; base is row's first index in the plane),
// stored if first, else kept where greater (maxPoolPlane's steps), if it can; it reports whether
// it did. A row of outputs not a multiple of 8 ends with a block that overlaps the one before,
// which does the same again: a row's maximum never beats itself.
func maxPoolRow3SIMD(y []float32, arg []int32, row []float32, base int, first bool) bool {
	n := len(y) &^ 7
	if !hasAVX2 || n == 0 {
		return false
	}
	_, _ = arg[len(y)-1], row[2*len(y)]
	maxPoolRow3AVX2(&y[0], &arg[0], &row[0], n, base, first)
	if t := len(y) - 8; t > n-8 {
		maxPoolRow3AVX2(&y[t], &arg[t], &row[2*t], 8, base+2*t, first)
	}
	return true
}
