//go:build !amd64 || noasm

package cpu

// hasAVX2 is false: there is no assembly in this build.
const hasAVX2 = false

func reluSIMD(y, x []float32) int { return 0 }

func reluGradSIMD(dx, dy, y []float32) int { return 0 }

// copyRows copies n rows of w floats from src (row i at i*srcStride) to dst (row i at
// i*dstStride).
func copyRows(dst, src []float32, n, w, dstStride, srcStride int) {
	copyRowsGo(dst, src, n, w, dstStride, srcStride)
}

// addRows adds n rows of w floats from src (row i at i*srcStride) to dst (row i at
// i*dstStride).
func addRows(dst, src []float32, n, w, dstStride, srcStride int) {
	addRowsGo(dst, src, n, w, dstStride, srcStride)
}

func sumAddSIMD(s *sums, x []float32) int { return 0 }

func sumSquaresSIMD(s *sums, x []float32, mean float64) int { return 0 }

func sumProductsSIMD(s *sums, dy, x []float32, mean, inv float32) int { return 0 }

func addConstSIMD(dst, src []float32, b float32) int { return 0 }

func scaleShiftSIMD(y, x []float32, a, b float32) int { return 0 }

func bnDxSIMD(dx, dy, x []float32, k, bmean, mean, inv, bx float32) int { return 0 }

// copyRows2 copies n rows of w floats taken every other one from src (row i from
// src[i*srcStride], its j-th value at 2*j) to dst (row i at i*dstStride).
func copyRows2(dst, src []float32, n, w, dstStride, srcStride int) {
	copyRows2Go(dst, src, n, w, dstStride, srcStride)
}

func expShiftSIMD(row []float32, shift float32, lanes *[8]float32) int { return 0 }

func maxSIMD(row []float32, mx float32) (float32, int) { return mx, 0 }

func geluSIMD(y, x []float32) int { return 0 }

func geluGradSIMD(dx, dy, x []float32) int { return 0 }

func sigmoidSIMD(y, x []float32) int { return 0 }

func sigmoidGradSIMD(dx, dy, x []float32) int { return 0 }

func siluSIMD(y, x []float32) int { return 0 }

func siluGradSIMD(dx, dy, x []float32) int { return 0 }

func binarySIMD(f BinaryOp, z, x, y []float32, n, sx, sy int) int { return 0 }

func sgdSIMD(w, g, v []float32, lr, momentum, wd float32, nesterov bool) int { return 0 }
