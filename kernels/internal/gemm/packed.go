package gemm

import "fmt"

// Packed is an A operand packed once, as Sgemm packs it at every call: slivers of mr rows for
// each pass over k. A multiply whose A does not change between calls (a model's weights at
// inference, a convolution's transformed filters) then packs only B: packing A took 13% of
// resnet18's forward pass at batch 1. The products are Sgemm's bit for bit, since the kernel
// reads the same values in the same order.
type Packed struct {
	kern *kernel
	m, k int
	mpad int       // m rounded up to whole slivers
	data []float32 // pass pc (depth kc) at pc*mpad: sliver s (rows s..s+mr) at pc*mpad + s*kc
}

// Pack packs op(A) (m x k; A is k x m when transA) with leading dimension lda for the kernel that
// Sgemm would use for m rows. It panics on invalid arguments as Sgemm does. The result keeps no
// reference to a.
func Pack(transA bool, m, k int, a []float32, lda int) *Packed {
	if m < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d k=%d", m, k))
	}
	checkA(transA, m, k, a, lda, true)
	return pack(active.forRows(m), transA, m, k, a, lda)
}

// pack is Pack for kernel kern.
func pack(kern *kernel, transA bool, m, k int, a []float32, lda int) *Packed {
	p := &Packed{kern: kern, m: m, k: k, mpad: tiles(m, kern.mr) * kern.mr}
	p.data = make([]float32, p.mpad*k)
	kc0 := kBlock(k)
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		dst := p.data[pc*p.mpad:]
		full := 0
		if !transA && kern.packA != nil {
			full = m / kern.mr * kern.mr
			for s := 0; s < full; s += kern.mr {
				kern.packA(dst[s*kc:(s+kern.mr)*kc], a[s*lda+pc:], lda, kc)
			}
		}
		packA(dst[full*kc:], kern, transA, a, lda, full, m-full, pc, kc)
	}
	return p
}

// Rows and Depth are m and k of the packed op(A).
func (p *Packed) Rows() int { return p.m }

// Depth is k, the columns of op(A).
func (p *Packed) Depth() int { return p.k }

// Sgemm computes C = alpha*op(A)*op(B) + beta*C as the package's Sgemm does, with the packed A.
func (p *Packed) Sgemm(transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if ldb == 0 { // check's mark of a Source
		panic("gemm: ldb=0")
	}
	p.check(transB, n, b, ldb, c, ldc)
	whole := part{kern: p.kern, packed: p, transB: transB, m1: p.m, n1: n, k: p.k, alpha: alpha, beta: beta, b: b, c: c, ldb: ldb, ldc: ldc}
	p.multiply(&whole, n)
}

// SgemmSource is Sgemm with B supplied by src, as the package's SgemmSource.
func (p *Packed) SgemmSource(transB bool, n int, alpha float32, src Source, beta float32, c []float32, ldc int) {
	p.check(transB, n, nil, 0, c, ldc)
	whole := part{kern: p.kern, packed: p, transB: transB, m1: p.m, n1: n, k: p.k, alpha: alpha, beta: beta, src: src, c: c, ldc: ldc}
	p.multiply(&whole, n)
}

// check checks the arguments of a multiply by p; Pack checked A.
func (p *Packed) check(transB bool, n int, b []float32, ldb int, c []float32, ldc int) {
	if n < 0 {
		panic(fmt.Sprintf("gemm: negative dimension n=%d", n))
	}
	checkBC(transB, p.m, n, p.k, b, ldb, c, ldc)
}

func (p *Packed) multiply(whole *part, n int) {
	if p.m == 0 || n == 0 {
		return
	}
	threads, done := share()
	defer done()
	whole.multiply(threads)
}

// PackedB is a B operand packed once, as Sgemm packs it at every call: slivers of nr columns for
// each pass over k. A multiply whose B does not change between calls (a linear layer's weights
// at inference, B = W^T) then packs only A, or nothing: packing B took 12% of convnext_tiny's
// forward pass at batch 1. The products are Sgemm's bit for bit.
type PackedB struct {
	nr   int // the column sliver of the kernels it was packed for (Sgemm's for any m)
	n, k int
	npad int       // n rounded up to whole slivers
	data []float32 // pass pc (depth kc) at pc*npad: sliver s (columns s..s+nr) at pc*npad + s*kc
}

// PackB packs op(B) (k x n; B is n x k when transB) with leading dimension ldb for the kernels
// Sgemm uses (whose column slivers are as wide whatever m). It panics on invalid arguments as
// Sgemm does. The result keeps no reference to b.
func PackB(transB bool, n, k int, b []float32, ldb int) *PackedB {
	if n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension n=%d k=%d", n, k))
	}
	checkBC(transB, 1, n, k, b, ldb, make([]float32, n), max(n, 1))
	return packB1(active, transB, n, k, b, ldb)
}

// packB1 is PackB for kernel kern.
func packB1(kern *kernel, transB bool, n, k int, b []float32, ldb int) *PackedB {
	p := &PackedB{nr: kern.nr, n: n, k: k, npad: tiles(n, kern.nr) * kern.nr}
	p.data = make([]float32, p.npad*k)
	kc0 := kBlock(k)
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		packB(p.data[pc*p.npad:], kern, transB, b, ldb, pc, kc, 0, n)
	}
	return p
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C as the package's Sgemm does, with the packed B.
func (p *PackedB) Sgemm(transA bool, m int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	if m < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d", m))
	}
	checkA(transA, m, p.k, a, lda, false)
	checkBC(false, m, p.n, p.k, nil, 0, c, ldc)
	checkA(transA, m, p.k, a, lda, m > 0 && p.n > 0)
	if m == 0 || p.n == 0 {
		return
	}
	p.multiply(active.forRows(m), transA, m, alpha, a, lda, beta, c, ldc)
}

// multiply is Sgemm with kernel kern, whose column slivers must be p's.
func (p *PackedB) multiply(kern *kernel, transA bool, m int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int) {
	if kern.nr != p.nr {
		panic(fmt.Sprintf("gemm: B packed for slivers of %d columns, multiplied by the %s kernel", p.nr, kern.name))
	}
	threads, done := share()
	defer done()
	whole := part{kern: kern, packedB: p, transA: transA, m1: m, n1: p.n, k: p.k, alpha: alpha, beta: beta, a: a, c: c, lda: lda, ldc: ldc}
	whole.multiply(threads)
}
