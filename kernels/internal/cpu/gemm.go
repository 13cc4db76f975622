package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gemm computes c = alpha*op(a)*op(b) + beta*c for packed row-major matrices: op(a) is m×k,
// op(b) is k×n, c is m×n. gonum's Sgemm partitions c into fixed 64×64 blocks and sums each
// block's k in order, so its results do not depend on the number of cores.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 { // gonum rejects the empty a and b of this case
		if beta == 0 {
			clear(c[:m*n])
		} else {
			Scale(c[:m*n], beta)
		}
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	lda, ldb := k, n
	if transA {
		ta, lda = blas.Trans, m
	}
	if transB {
		tb, ldb = blas.Trans, k
	}
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, max(lda, 1), b, max(ldb, 1), beta, c, n)
}
