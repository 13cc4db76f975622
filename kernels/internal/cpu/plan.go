package cpu

import (
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

// ConvPlan is a convolution's weights prepared for forward passes that do not change them
// (inference), in the forms Conv2D makes of them at every call: Winograd's transformed filters,
// packed for its 16 GEMMs (as A for wide blocks of tiles, as B for narrow ones); the implicit GEMM's packed A; the direct kernel's blocks. Each form is
// made from the weights the first time a call needs it, and kept: at resnet18's batch 1 the
// filter transforms and the packing were 30% of the forward pass. Its Conv2D gives Conv2D's bits.
//
// A plan is safe for concurrent use; the weights must not change once a call has read them.
type ConvPlan struct {
	w []float32

	mu     sync.Mutex
	wino   *[16]*gemm.Packed
	winoT  *[16]*gemm.PackedB
	gemm   *gemm.Packed
	blocks []float32
	direct bool // blocks was made (it stays nil where the direct kernel does not run)
}

// NewConvPlan returns the plan of the convolutions over weights w [OutC][InC][KH][KW], which it
// reads at its calls, not now.
func NewConvPlan(w []float32) *ConvPlan { return &ConvPlan{w: w} }

// Conv2D is Conv2D over the plan's weights; g's weight geometry (OutC, InC, KH, KW) must be the
// same at every call, its batch, input size, stride and padding may differ. It leaves nothing in
// ws for Conv2DBackward (an unpadded input is read in place, not copied): a backward pass needs
// Conv2D's forward pass.
func (p *ConvPlan) Conv2D(y, x, bias, ws []float32, g ConvGeom) {
	conv2D(y, x, p.w, bias, ws, g, p)
}

// winograd returns the transformed filters for g (padded), packed for wide blocks' products.
func (p *ConvPlan) winograd(g ConvGeom) *[16]*gemm.Packed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wino == nil {
		p.wino = winoPack(p.w, g)
	}
	return p.wino
}

// winogradT returns the transformed filters for g (padded), packed for narrow blocks' products
// (see productsT).
func (p *ConvPlan) winogradT(g ConvGeom) *[16]*gemm.PackedB {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.winoT == nil {
		p.winoT = winoPackT(p.w, g)
	}
	return p.winoT
}

// packed returns the weights packed as the implicit GEMM's A, or nil for a nil plan.
func (p *ConvPlan) packed(g ConvGeom) *gemm.Packed {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gemm == nil {
		k := g.ColRows()
		p.gemm = gemm.Pack(false, g.OutC, k, p.w, max(k, 1))
	}
	return p.gemm
}

// blocked returns the weights in the direct kernel's blocks where it computes g, else (or for a
// nil plan) nil.
func (p *ConvPlan) blocked(g ConvGeom) []float32 {
	if p == nil || !direct(g) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.direct {
		p.blocks, p.direct = directBlocks(p.w, g), true
	}
	return p.blocks
}

// GemmPlan is a matrix product's B operand (a linear layer's weights, transposed) packed for the
// GEMM at its first call and kept, for inference. Its products are Gemm's bit for bit. It is
// safe for concurrent use; b must not change once a call has read it.
type GemmPlan struct {
	b      []float32
	transB bool
	n, k   int

	once   sync.Once
	packed *gemm.PackedB
}

// NewGemmPlan returns the plan of the products by B = b (k x n, n x k when transB), which it
// reads at its first call, not now.
func NewGemmPlan(transB bool, n, k int, b []float32) *GemmPlan {
	return &GemmPlan{b: b, transB: transB, n: n, k: k}
}

// Gemm is Gemm(transA, transB, m, n, k, alpha, a, b, beta, c) by the plan's B.
func (p *GemmPlan) Gemm(transA bool, m int, alpha float32, a []float32, beta float32, c []float32) {
	if m == 0 {
		return
	}
	p.once.Do(func() {
		ldb := p.n
		if p.transB {
			ldb = p.k
		}
		p.packed = gemm.PackB(p.transB, p.n, p.k, p.b, max(ldb, 1))
	})
	lda := p.k
	if transA {
		lda = m
	}
	p.packed.Sgemm(transA, m, alpha, a, max(lda, 1), beta, c, p.n)
}
