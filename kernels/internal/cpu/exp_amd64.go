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
func geluAVX2(y, x *float32, n int)

//go:noescape
func geluGradAVX2(dx, dy, x *float32, n int)

// geluSIMD does gelu's whole blocks of 8 with AVX2 and returns how many values it did.
func geluSIMD(y, x []float32) int {
	n := len(x) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	geluAVX2(&y[0], &x[0], n)
	return n
}

// geluGradSIMD is geluSIMD for geluGrad.
func geluGradSIMD(dx, dy, x []float32) int {
	n := len(x) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = dx[n-1], dy[n-1]
	geluGradAVX2(&dx[0], &dy[0], &x[0], n)
	return n
}
