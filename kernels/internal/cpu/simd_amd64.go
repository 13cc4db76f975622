//go:build !noasm

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 selects the AVX2 loops of simd_amd64.s.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func reluAVX2(y, x *float32, n int)

//go:noescape
func reluGradAVX2(dx, dy, y *float32, n int)

// reluSIMD does ReLU on the longest prefix of x the assembly handles and returns its length.
func reluSIMD(y, x []float32) int {
	n := len(x) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	reluAVX2(&y[0], &x[0], n)
	return n
}

// reluGradSIMD is reluSIMD for ReLUGrad.
func reluGradSIMD(dx, dy, y []float32) int {
	n := len(y) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = dx[n-1], dy[n-1]
	reluGradAVX2(&dx[0], &dy[0], &y[0], n)
	return n
}

//go:noescape
func copyRowsAVX(dst, src *float32, n, w, dstStride, srcStride int)

//go:noescape
func addRowsAVX(dst, src *float32, n, w, dstStride, srcStride int)

// copyRows copies n rows of w floats from src (row i at i*srcStride) to dst (row i at
// i*dstStride).
func copyRows(dst, src []float32, n, w, dstStride, srcStride int) {
	if rowsInBounds(dst, src, n, w, dstStride, srcStride) {
		copyRowsAVX(&dst[0], &src[0], n, w, dstStride, srcStride)
	} else if n > 0 && w > 0 {
		copyRowsGo(dst, src, n, w, dstStride, srcStride)
	}
}

// addRows adds n rows of w floats from src (row i at i*srcStride) to dst (row i at
// i*dstStride).
func addRows(dst, src []float32, n, w, dstStride, srcStride int) {
	if rowsInBounds(dst, src, n, w, dstStride, srcStride) {
		addRowsAVX(&dst[0], &src[0], n, w, dstStride, srcStride)
	} else if n > 0 && w > 0 {
		addRowsGo(dst, src, n, w, dstStride, srcStride)
	}
}

// rowsInBounds reports whether the assembly should move the rows: there are some, the CPU has
// AVX2, and the last row of each slice is inside it (it panics otherwise, as the Go loop would).
func rowsInBounds(dst, src []float32, n, w, dstStride, srcStride int) bool {
	if n <= 0 || w <= 0 || !hasAVX2 {
		return false
	}
	_, _ = dst[(n-1)*dstStride+w-1], src[(n-1)*srcStride+w-1]
	return true
}

//go:noescape
func sumAddAVX2(s *sums, x *float32, n int)

//go:noescape
func sumSquaresAVX2(s *sums, x *float32, n int, mean float64)

//go:noescape
func sumProductsAVX2(s *sums, dy, x *float32, n int, mean, inv float32)

// sumAddSIMD does sums.add's whole blocks of 16 and returns how many values it added.
func sumAddSIMD(s *sums, x []float32) int {
	n := len(x) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	sumAddAVX2(s, &x[0], n)
	return n
}

// sumSquaresSIMD is sumAddSIMD for sums.addSquares.
func sumSquaresSIMD(s *sums, x []float32, mean float64) int {
	n := len(x) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	sumSquaresAVX2(s, &x[0], n, mean)
	return n
}

// sumProductsSIMD is sumAddSIMD for sums.addProducts (len(x) >= len(dy)).
func sumProductsSIMD(s *sums, dy, x []float32, mean, inv float32) int {
	n := len(dy) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = x[n-1]
	sumProductsAVX2(s, &dy[0], &x[0], n, mean, inv)
	return n
}

//go:noescape
func addConstAVX2(dst, src *float32, n int, b float32)

// addConstSIMD does addConst's longest prefix the assembly handles and returns its length.
func addConstSIMD(dst, src []float32, b float32) int {
	n := len(src) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	addConstAVX2(&dst[0], &src[0], n, b)
	return n
}

//go:noescape
func scaleShiftAVX2(y, x *float32, n int, a, b float32)

//go:noescape
func bnDxAVX2(dx, dy, x *float32, n int, k, bmean, mean, inv, bx float32)

// scaleShiftSIMD does scaleShift's whole blocks of 16 and returns how many values it wrote.
func scaleShiftSIMD(y, x []float32, a, b float32) int {
	n := len(x) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	scaleShiftAVX2(&y[0], &x[0], n, a, b)
	return n
}

// bnDxSIMD does bnDx's whole blocks of 16 and returns how many values it wrote.
func bnDxSIMD(dx, dy, x []float32, k, bmean, mean, inv, bx float32) int {
	n := len(dy) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = dx[n-1], x[n-1]
	bnDxAVX2(&dx[0], &dy[0], &x[0], n, k, bmean, mean, inv, bx)
	return n
}

//go:noescape
func copyRows2AVX(dst, src *float32, n, w8, dstStride, srcStride int)

// copyRows2 copies n rows of w floats taken every other one from src (row i from
// src[i*srcStride], its j-th value at 2*j) to dst (row i at i*dstStride).
func copyRows2(dst, src []float32, n, w, dstStride, srcStride int) {
	if n <= 0 || w <= 0 {
		return
	}
	_, _ = dst[(n-1)*dstStride+w-1], src[(n-1)*srcStride+2*(w-1)]
	k := 0
	// The assembly reads 16 source values per 8: whole blocks whose reads stay in the slice.
	if hasAVX2 && (n-1)*srcStride+2*(w&^7) <= len(src) {
		k = w &^ 7
		copyRows2AVX(&dst[0], &src[0], n, k/8, dstStride, srcStride)
	}
	if k < w {
		copyRows2Go(dst[k:], src[2*k:], n, w-k, dstStride, srcStride)
	}
}
