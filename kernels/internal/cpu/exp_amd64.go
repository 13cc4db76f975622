//go:build !noasm

package cpu

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

// geluSIMD does gelu's whole blocks of 8 with AVX2 and returns how many values it did; the
// others likewise for their functions and gradients.
func geluSIMD(y, x []float32) int    { return unarySIMD(geluAVX2, y, x) }
func sigmoidSIMD(y, x []float32) int { return unarySIMD(sigmoidAVX2, y, x) }
func siluSIMD(y, x []float32) int    { return unarySIMD(siluAVX2, y, x) }

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
