package gemm

// kernel is a micro-kernel: fn computes C = alpha*(A sliver * B sliver) + beta*C for one mr x nr
// tile of C (row-major, leading dimension ldc) from an mr x k sliver of A, whose element (i, p)
// is a[i*rs+p*ps] (packed: rs = 1, ps = mr; row-major A read in place: rs = lda, ps = 1), and a
// k x nr sliver of packed B (row by row). beta == 0 must not read C. k >= 1.
//
// packBT, if not nil, packs a k x nr sliver of B^T faster than the generic gather: dst[p*nr+c] =
// b[c*ldb+p] for the first w <= nr columns c, zero for the others (it is passed nr and w).
//
// packA, if not nil, packs a full mr x k sliver of row-major A (dst[p*mr+r] = a[r*lda+p]);
// when nil, the kernel reads row-major A in place (rs = lda, ps = 1) instead.
//
// scatter, if not nil, copies n rows of w floats (w even) from src (row i at
// i*srcStride) to dst (row i at i*dstStride), faster than copy per row: the packing of row-major
// B and of A^T, which moves whole rows of a sliver.
//
// narrow, if not nil, is a kernel with fewer rows that forRows prefers when m would leave
// too much of the last row sliver empty.
type kernel struct {
	name    string
	mr, nr  int
	fn      func(k int, a []float32, rs, ps int, b, c []float32, ldc int, alpha, beta float32)
	packBT  func(dst, b []float32, ldb, k, nr, w int)
	packA   func(dst, a []float32, lda, k int)
	scatter func(dst, src []float32, n, dstStride, srcStride, w int)
	narrow  *kernel
}

// generic is the pure-Go kernel, used where no assembly kernel fits the CPU. 4x4 keeps its 16
// accumulators in registers on most architectures.
var generic = &kernel{name: "go4x4", mr: 4, nr: 4, fn: kernelGo4x4}

// active is the kernel Sgemm uses, chosen once from the CPU's features (see selectKernel).
var active = selectKernel()

// forRows returns k or its narrow variant, whichever suits m rows better: the narrow one when the
// wide one's padded rows exceed the narrow one's by more than 8%, about what the wide kernel gains
// per multiply-add. It depends on m alone, so results stay independent of the partition.
func (k *kernel) forRows(m int) *kernel {
	if n := k.narrow; n != nil && tiles(m, k.mr)*k.mr*100 > tiles(m, n.mr)*n.mr*108 {
		return n
	}
	return k
}

func kernelGo4x4(k int, a []float32, rs, ps int, b, c []float32, ldc int, alpha, beta float32) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	a0s, a1s, a2s, a3s := a[0:], a[rs:], a[2*rs:], a[3*rs:]
	b = b[:4*k]
	for p, o := 0, 0; p+4 <= len(b); p, o = p+4, o+ps {
		a0, a1, a2, a3 := a0s[o], a1s[o], a2s[o], a3s[o]
		bp := b[p : p+4 : p+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	store4(c[0*ldc:0*ldc+4], alpha, beta, c00, c01, c02, c03)
	store4(c[1*ldc:1*ldc+4], alpha, beta, c10, c11, c12, c13)
	store4(c[2*ldc:2*ldc+4], alpha, beta, c20, c21, c22, c23)
	store4(c[3*ldc:3*ldc+4], alpha, beta, c30, c31, c32, c33)
}

func store4(c []float32, alpha, beta, x0, x1, x2, x3 float32) {
	c = c[:4]
	if beta == 0 {
		c[0], c[1], c[2], c[3] = alpha*x0, alpha*x1, alpha*x2, alpha*x3
		return
	}
	c[0] = alpha*x0 + beta*c[0]
	c[1] = alpha*x1 + beta*c[1]
	c[2] = alpha*x2 + beta*c[2]
	c[3] = alpha*x3 + beta*c[3]
}
