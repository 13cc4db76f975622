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
