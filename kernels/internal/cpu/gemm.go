package cpu

import "github.com/stoke-ml/stoke/kernels/internal/gemm"

// Gemm computes c = alpha*op(a)*op(b) + beta*c for packed row-major matrices: op(a) is m×k,
// op(b) is k×n, c is m×n. kernels/internal/gemm partitions the work independently of the number
// of cores, so results are bit-for-bit repeatable.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) {
	if m == 0 || n == 0 {
		return
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	gemm.Sgemm(transA, transB, m, n, k, alpha, a, max(lda, 1), b, max(ldb, 1), beta, c, n)
}
