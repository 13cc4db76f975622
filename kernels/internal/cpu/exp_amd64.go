//go:build !noasm

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func expShiftAVX2(x *float32, n int, shift float32, lanes *[8]float32)

// expShiftSIMD does expShift's whole blocks of 8 with AVX2, leaving the lanes' sums in lanes,
// and returns how many values it did.
func expShiftSIMD(row []float32, shift float32, lanes *[8]float32) int {
	n := len(row) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	expShiftAVX2(&row[0], n, shift, lanes)
	return n
}

//go:noescape
func maxAVX2(x *float32, n int, mx float32) float32

// maxSIMD is rowMax over row's whole blocks of 8 with AVX2; it returns the maximum and how many
// values it read.
func maxSIMD(row []float32, mx float32) (float32, int) {
	n := len(row) &^ 7
	if !hasAVX2 || n == 0 {
		return mx, 0
	}
	return maxAVX2(&row[0], n, mx), n
}

//go:noescape
func geluAVX2(y, x *float32, n int)

//go:noescape
func geluGradAVX2(dx, dy, x *float32, n int)

//go:noescape
func sigmoidAVX2(y, x *float32, n int)

//go:noescape
func sigmoidGradAVX2(dx, dy, x *float32, n int)

//go:noescape
func siluAVX2(y, x *float32, n int)

//go:noescape
func siluGradAVX2(dx, dy, x *float32, n int)

//go:noescape
func sigmoidAVX512(y, x *float32, n int)

//go:noescape
func siluAVX512(y, x *float32, n int)

// unaryAVX512 selects the 16-lane sigmoid and SiLU forward kernels (the same bits as the 8-lane
// ones): 1.6x the 8-lane kernels' values per second on a Zen 4 core, whose AVX-512 is two halves.
var unaryAVX512 = cpu.X86.HasAVX512F

// geluSIMD does gelu's whole blocks of 8 with AVX2 and returns how many values it did; the
// others likewise for their functions and gradients.
func geluSIMD(y, x []float32) int    { return unarySIMD(geluAVX2, y, x) }
func sigmoidSIMD(y, x []float32) int { return unarySIMD512(sigmoidAVX512, sigmoidAVX2, y, x) }
func siluSIMD(y, x []float32) int    { return unarySIMD512(siluAVX512, siluAVX2, y, x) }

func geluGradSIMD(dx, dy, x []float32) int    { return unaryGradSIMD(geluGradAVX2, dx, dy, x) }
func sigmoidGradSIMD(dx, dy, x []float32) int { return unaryGradSIMD(sigmoidGradAVX2, dx, dy, x) }
func siluGradSIMD(dx, dy, x []float32) int    { return unaryGradSIMD(siluGradAVX2, dx, dy, x) }

// unarySIMD runs f over the whole blocks of 8 of x and returns how many values it did.
func unarySIMD(f func(y, x *float32, n int), y, x []float32) int {
	n := len(x) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	f(&y[0], &x[0], n)
	return n
}

// unarySIMD512 runs f512 over the whole blocks of 16 of x where unaryAVX512 is set, then f over
// the whole blocks of 8 left, and returns how many values it did.
func unarySIMD512(f512, f func(y, x *float32, n int), y, x []float32) int {
	n := len(x) &^ 15
	if !unaryAVX512 || n == 0 {
		return unarySIMD(f, y, x)
	}
	_ = y[n-1]
	f512(&y[0], &x[0], n)
	return n + unarySIMD(f, y[n:], x[n:])
}

// unaryGradSIMD is unarySIMD for a gradient's f.
func unaryGradSIMD(f func(dx, dy, x *float32, n int), dx, dy, x []float32) int {
	n := len(x) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = dx[n-1], dy[n-1]
	f(&dx[0], &dy[0], &x[0], n)
	return n
}
