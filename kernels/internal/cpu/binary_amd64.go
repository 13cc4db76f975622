//go:build !noasm

package cpu

//go:noescape
func binaryAVX2(f BinaryOp, z, x, y *float32, n, sx, sy int)

// binarySIMD does binaryRow's whole blocks of 8 with AVX2 where z is packed and x and y are
// packed or one value (stride 0), and returns how many values it did.
func binarySIMD(f BinaryOp, z, x, y []float32, n, sx, sy int) int {
	n &^= 7
	if !hasAVX2 || n == 0 || sx > 1 || sy > 1 {
		return 0
	}
	_, _, _ = z[n-1], x[(n-1)*sx], y[(n-1)*sy]
	binaryAVX2(f, &z[0], &x[0], &y[0], n, sx, sy)
	return n
}
