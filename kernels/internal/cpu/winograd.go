package cpu

import (
	"runtime"
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

// Winograd F(2x2,3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2016): each 2x2 block of outputs of a 3x3 stride-1 convolution is A^T [(G w G^T) . (B^T d B)] A
// of the 4x4 input tile d under it (tiles step by 2), where
//
//	B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//	G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//	A^T = [1 1 1 0; 0 1 -1 -1]
//
// Summed over the input channels, the 16 elementwise products become 16 matrix products, one
// per element xi of the 4x4 transformed tile: M[xi] [OutC][P] = U[xi] [OutC][InC] x V[xi]
// [InC][P], with U the transformed filters and V the transformed tiles of the whole batch (P
// tiles), which gemm.Sgemm computes: 16 multiplies of 16*OutC*InC*P multiply-adds in all,
// against 36*OutC*InC*P for the direct sum (2.25 times fewer).

// winoScratch holds a Winograd convolution's U and tile offsets, and the call in progress for
// its parts, which For runs: bound once (when the pool makes it) and reading the call from the
// scratch, so that a convolution allocates nothing in steady state.
type winoScratch struct {
	buf    []float32 // U
	xe, ye []float32 // an odd-sized convolution's extended input and output (see winoOdd)
	offs   []int32

	y, x, w, bias, u []float32
	pa               *[16]*gemm.Packed  // a plan's filters for wide blocks (nil: U, made by the call)
	pt               *[16]*gemm.PackedB // a plan's filters for a narrow call's block
	narrow           bool               // the call's one block is narrow (see winoNarrow)
	g                ConvGeom
	su, p, pb        int
	asm, flip        bool
	// The block in progress when the blocks run one after the other (see winogradConvU).
	v, m            []float32
	t0, t1, sv, sm  int
	filters, blocks func(lo, hi int)
	inputs, outputs func(lo, hi int)
	extend, crop    func(lo, hi int)
}

// winoPooled is the most floats of an odd convolution's extended copies that stay in the pool.
const winoPooled = 1 << 23

var winoScratches = sync.Pool{New: func() any {
	s := new(winoScratch)
	s.filters, s.blocks = s.filterPart, s.blocksPart
	s.inputs, s.outputs = s.inputPart, s.outputPart
	s.extend, s.crop = s.extendPart, s.cropPart
	return s
}}

// winoVM is one block's V and M (see winoBlock), and M^T for a narrow block's products
// (productsT), pooled.
type winoVM struct{ vm, mt []float32 }

var winoVMs = sync.Pool{New: func() any { return new(winoVM) }}

// winoBlockFloats is the most floats of V and M a block of tiles takes: 1 MiB, a core's L2. The
// whole batch's V and M at once (resnet18's first layers at batch 32: 200 MB) went through
// memory at every transform and product: its inference ran at 18.6 images/s at batch 32, slower
// than at batch 1.
const winoBlockFloats = 1 << 18

// winoBlock is the tiles of a block of g's p tiles: what fits winoBlockFloats, in whole slivers
// of the GEMM (32 columns), at least one.
func winoBlock(g ConvGeom, p int) int {
	pb := winoBlockFloats / (16 * (g.InC + g.OutC)) / 32 * 32
	return min(max(pb, 32), p)
}

// winoTiles returns the tile grid of g (padded, Pad 0): tiles down, across, and per sample.
func winoTiles(g ConvGeom) (th, tw, per int) {
	th, tw = (g.OutH()+1)/2, (g.OutW()+1)/2
	return th, tw, th * tw
}

// winoStride is the distance between the 16 matrices of n floats each in U, V or M: n rounded
// up to a cache line, plus one, so that the 16 streams a transform writes or reads at once do not
// fall into the same cache sets (at power-of-two sizes they all did: the transforms ran several
// times slower).
func winoStride(n int) int { return (n+15)/16*16 + 16 }

// winogradConv writes y [N][OutC][OutH][OutW] = conv(xpad, w) + bias (nil: none) for a 3x3
// stride-1 geometry g over an input already padded (Pad 0), by Winograd F(2x2,3x3). Tiles that
// hang over the input's bottom or right edge (odd output sizes) read zeros there, and their
// outputs beyond the edge are dropped. Every sum runs in a fixed order whatever the core count
// (the transforms are elementwise per tile, the GEMM deterministic), so the result is the same
// bit for bit on every run; it differs from the direct sum by rounding.
//
// With flip, w is instead the weights [InC][OutC][3][3] of the convolution whose input gradient
// g computes (see convBackData), and g's weights are those turned by 180 degrees and transposed,
// which are never written out: turning a kernel swaps rows 0 and 3 of G (G J = P G), so the
// transformed turned kernels are U[P xi P]^T of w's, which the GEMMs read transposed.
//
// The tiles are taken a block at a time (winoBlock), the blocks in parallel: each block's input
// transform, 16 products and output transform run over its V and M in the cache. The products
// of a column of M do not depend on the other columns (gemm's passes over k depend on k alone),
// so the blocks give the bits of the whole batch at once.
func winogradConv(y, xpad, w, bias []float32, g ConvGeom, flip bool) {
	winogradConvU(y, xpad, w, bias, g, flip, nil)
}

// winogradConvU is winogradConv with the transformed filters prepared by plan (not flipped), or
// transformed by the call when plan is nil.
func winogradConvU(y, xpad, w, bias []float32, g ConvGeom, flip bool, plan *ConvPlan) {
	if e := winoEven(g); e != g && winoTilesAsm(g) {
		winoOdd(y, xpad, w, bias, g, e, flip, plan)
		return
	}
	_, _, per := winoTiles(g)
	s := winoScratches.Get().(*winoScratch)
	defer winoScratches.Put(s)
	s.y, s.x, s.w, s.bias, s.g, s.flip = y, xpad, w, bias, g, flip
	s.p = g.N * per
	s.pb = winoBlock(g, s.p)
	s.narrow = s.p < winoNarrow
	switch {
	case plan != nil && s.narrow:
		s.pt = plan.winogradT(g)
	case plan != nil:
		s.pa = plan.winograd(g)
	default:
		s.su = winoStride(g.OutC * g.InC)
		s.buf = grow(s.buf, 16*s.su)
		s.u = s.buf
		For(g.OutC*g.InC, 64, s.filters)
	}
	if s.asm = winoTilesAsm(g); s.asm {
		s.offs = grow(s.offs, 2*s.p)
		winoOffsets(s.offs[:s.p], s.offs[s.p:], g)
	}
	nb := (s.p + s.pb - 1) / s.pb
	if nb >= 4*runtime.GOMAXPROCS(0) {
		For(nb, 16*s.pb*(g.InC+g.OutC), s.blocks)
	} else {
		// Too few blocks to share evenly: one at a time, each over every core.
		b := winoVMs.Get().(*winoVM)
		for blk := range nb {
			s.block(b, blk, true)
		}
		winoVMs.Put(b)
	}
	s.clearCall()
}

// blocksPart computes the blocks of tiles [lo, hi) of the call, each through a V and M of its
// own, on this goroutine.
func (s *winoScratch) blocksPart(lo, hi int) {
	b := winoVMs.Get().(*winoVM)
	defer winoVMs.Put(b)
	for blk := lo; blk < hi; blk++ {
		s.block(b, blk, false)
	}
}

// block computes block blk of the call's tiles through b's V and M, its transforms split over
// the cores when shared (the blocks then run one at a time: the call's fields hold the block).
func (s *winoScratch) block(b *winoVM, blk int, shared bool) {
	g := s.g
	t0 := blk * s.pb
	t1 := min(t0+s.pb, s.p)
	n := t1 - t0
	sv, sm := winoStride(g.InC*n), winoStride(g.OutC*n)
	b.vm = grow(b.vm, 16*(sv+sm))
	v, m := b.vm[:16*sv], b.vm[16*sv:]
	if shared {
		s.v, s.m, s.t0, s.t1, s.sv, s.sm = v, m, t0, t1, sv, sm
		For(g.InC, 40*n, s.inputs)
	} else {
		winoInput(v, sv, s, t0, t1, 0, g.InC)
	}
	if s.narrow {
		s.productsT(b, v, sv, m, sm, n)
	} else {
		for xi := range 16 {
			if s.pa != nil {
				s.pa[xi].Sgemm(false, n, 1, v[xi*sv:], n, 0, m[xi*sm:], n)
				continue
			}
			a, lda := s.filter(xi)
			gemm.Sgemm(s.flip, false, g.OutC, n, g.InC, 1, a, lda, v[xi*sv:], n, 0, m[xi*sm:], n)
		}
	}
	if shared {
		For(g.OutC, 40*n, s.outputs)
	} else {
		winoOutput(m, sm, s, t0, t1, 0, g.OutC)
	}
}

// winoNarrow is the fewest tiles of a convolution whose products run as M = U V: fewer (the last
// layers of a batch of one: resnet18's 7 px planes are 16 tiles, one block) would fill a
// fraction of the GEMM kernel's 32-wide B slivers, so their products run transposed instead,
// M^T = V^T U^T, the tiles then the kernel's rows (in slivers of 8), and M^T is transposed back.
const winoNarrow = 32

// filter returns U's matrix xi as the products' A, with its leading dimension: for flip, the
// transposed turned kernels (see winogradConv).
func (s *winoScratch) filter(xi int) ([]float32, int) {
	if s.flip {
		swap := [4]int{3, 1, 2, 0}
		return s.u[(4*swap[xi/4]+swap[xi%4])*s.su:], max(s.g.OutC, 1)
	}
	return s.u[xi*s.su:], max(s.g.InC, 1)
}

// productsT computes a narrow block's M (winoNarrow) from V as M^T = V^T U^T, through b's room
// for M^T. Each element is the same sum of the same products in the same order as U V's (gemm's
// passes over k depend on k alone, and a product rounds the same whichever operand is A), so the
// bits are those of the wide products.
func (s *winoScratch) productsT(b *winoVM, v []float32, sv int, m []float32, sm, n int) {
	g := s.g
	b.mt = grow(b.mt, n*g.OutC)
	for xi := range 16 {
		if s.pt != nil {
			s.pt[xi].Sgemm(true, n, 1, v[xi*sv:], n, 0, b.mt, g.OutC)
		} else {
			a, lda := s.filter(xi)
			gemm.Sgemm(true, !s.flip, n, g.OutC, g.InC, 1, v[xi*sv:], n, a, lda, 0, b.mt, g.OutC)
		}
		gemm.Transpose(m[xi*sm:], n, b.mt, g.OutC, n, g.OutC)
	}
}

// inputPart transforms input channels [lo, hi) of the block in progress.
func (s *winoScratch) inputPart(lo, hi int) { winoInput(s.v, s.sv, s, s.t0, s.t1, lo, hi) }

// outputPart writes output channels [lo, hi) of the block in progress.
func (s *winoScratch) outputPart(lo, hi int) { winoOutput(s.m, s.sm, s, s.t0, s.t1, lo, hi) }

// winoInput writes V of the call's tiles [t0, t1) for input channels [lo, hi).
func winoInput(v []float32, sv int, s *winoScratch, t0, t1, lo, hi int) {
	if s.asm {
		winoInputAsm(v, sv, s.x, s.g, s.offs[t0:t1], lo, hi)
		return
	}
	winoInputGo(v, sv, s.x, s.g, t0, t1, lo, hi)
}

// winoOutput writes output channels [lo, hi) of the call's tiles [t0, t1) from M.
func winoOutput(m []float32, sm int, s *winoScratch, t0, t1, lo, hi int) {
	if s.asm {
		winoOutputAsm(s.y, m, sm, s.bias, s.g, s.offs[s.p+t0:s.p+t1], lo, hi)
		return
	}
	winoOutputGo(s.y, m, sm, s.bias, s.g, t0, t1, lo, hi)
}

// clearCall drops the references of the call in progress, keeping the buffers and the bound
// parts. An odd convolution's extended copies past winoPooled floats are dropped too, so that
// the pool never keeps more than winoPooled floats of them, whatever the layer.
func (s *winoScratch) clearCall() {
	*s = winoScratch{buf: s.buf, xe: pooled(s.xe), ye: pooled(s.ye), offs: s.offs,
		filters: s.filters, blocks: s.blocks, inputs: s.inputs, outputs: s.outputs, extend: s.extend, crop: s.crop}
}

// pooled is b if it may stay in the pool (at most winoPooled floats), else nil.
func pooled(b []float32) []float32 {
	if cap(b) > winoPooled {
		return nil
	}
	return b
}

// winoEven is g (padded) with its input one row and one column longer where its output size is
// odd: the same convolution on an input with a zero row or column more, whose outputs, but for
// the last row or column, are g's.
func winoEven(g ConvGeom) ConvGeom {
	g.InH += g.OutH() % 2
	g.InW += g.OutW() % 2
	return g
}

// winoOdd computes g, of odd output size, by the AVX-512 transforms (which take whole tiles)
// over e = winoEven(g): xpad extended by zeros, then e's output cropped to y.
func winoOdd(y, xpad, w, bias []float32, g, e ConvGeom, flip bool, plan *ConvPlan) {
	s := winoScratches.Get().(*winoScratch)
	defer winoScratches.Put(s)
	s.xe = grow(s.xe, e.N*e.InC*e.InH*e.InW)
	s.ye = grow(s.ye, e.N*e.OutC*e.ColCols())
	s.x, s.y, s.g = xpad, y, g
	For(g.N*g.InC, e.InH*e.InW, s.extend)
	winogradConvU(s.ye, s.xe, w, bias, e, flip, plan)
	For(g.N*g.OutC, g.ColCols(), s.crop)
	s.clearCall()
}

// extendPart copies input planes [lo, hi) of the call's xpad into xe with a zero row and column
// where winoEven added them.
func (s *winoScratch) extendPart(lo, hi int) {
	g := s.g
	e := winoEven(g)
	hw, ehw := g.InH*g.InW, e.InH*e.InW
	for p := lo; p < hi; p++ {
		dst := s.xe[p*ehw : (p+1)*ehw]
		copyRows(dst, s.x[p*hw:(p+1)*hw], g.InH, g.InW, e.InW, g.InW)
		if e.InW > g.InW {
			for r := range g.InH {
				dst[r*e.InW+g.InW] = 0
			}
		}
		clear(dst[g.InH*e.InW:])
	}
}

// cropPart copies output planes [lo, hi) of ye into the call's y without winoEven's extra row
// and column.
func (s *winoScratch) cropPart(lo, hi int) {
	g := s.g
	e := winoEven(g)
	oh, ow, ew := g.OutH(), g.OutW(), e.OutW()
	for p := lo; p < hi; p++ {
		copyRows(s.y[p*oh*ow:(p+1)*oh*ow], s.ye[p*e.ColCols():], oh, ow, ow, ew)
	}
}

// filterPart transforms kernels [lo, hi) of the call's weights into U.
func (s *winoScratch) filterPart(lo, hi int) {
	if !winoFiltersAsm(s.u, s.su, s.w, lo, hi) {
		winoFiltersGo(s.u, s.su, s.w, lo, hi)
	}
}

// winoOffsets writes, for each tile p = n*tiles + t, the index of its first input in sample n's
// channel 0 of the padded input (in) and of its first output in sample n's channel 0 of y (out).
func winoOffsets(in, out []int32, g ConvGeom) {
	th, tw, _ := winoTiles(g)
	ow, p := g.OutW(), 0
	for n := range g.N {
		for ty := range th {
			for tx := range tw {
				in[p] = int32(n*g.InC*g.InH*g.InW + 2*ty*g.InW + 2*tx)
				out[p] = int32(n*g.OutC*g.ColCols() + 2*ty*ow + 2*tx)
				p++
			}
		}
	}
}

// winoFilters returns the transformed filters U of w (OutC x InC 3x3 kernels), matrices su apart.
func winoFilters(w []float32, g ConvGeom) (u []float32, su int) {
	su = winoStride(g.OutC * g.InC)
	u = make([]float32, 16*su)
	For(g.OutC*g.InC, 64, func(lo, hi int) {
		if !winoFiltersAsm(u, su, w, lo, hi) {
			winoFiltersGo(u, su, w, lo, hi)
		}
	})
	return u, su
}

// winoPack returns w's transformed filters, each of the 16 matrices packed as the products of
// wide blocks read them (A): a ConvPlan's, made once.
func winoPack(w []float32, g ConvGeom) *[16]*gemm.Packed {
	u, su := winoFilters(w, g)
	var pu [16]*gemm.Packed
	for xi := range pu {
		pu[xi] = gemm.Pack(false, g.OutC, g.InC, u[xi*su:], max(g.InC, 1))
	}
	return &pu
}

// winoPackT returns w's transformed filters packed as the products of narrow blocks read them
// (U^T as B, see productsT): a ConvPlan's, made once.
func winoPackT(w []float32, g ConvGeom) *[16]*gemm.PackedB {
	u, su := winoFilters(w, g)
	var pu [16]*gemm.PackedB
	for xi := range pu {
		pu[xi] = gemm.PackB(true, g.OutC, g.InC, u[xi*su:], max(g.InC, 1))
	}
	return &pu
}

// winoFiltersGo transforms the kernels [lo, hi) of w into U (matrices su apart).
func winoFiltersGo(u []float32, su int, w []float32, lo, hi int) {
	var us [16][]float32
	for xi := range us {
		us[xi] = u[xi*su+lo : xi*su+hi]
	}
	k := w[lo*9 : hi*9]
	for i := range hi - lo {
		q := (*[9]float32)(k[i*9:])
		// t = G q (4x3, rows t0..t3), then each row r of t G^T.
		for r := range 4 {
			var a, b, c float32
			switch r {
			case 0:
				a, b, c = q[0], q[1], q[2]
			case 1:
				a, b, c = 0.5*(q[0]+q[3]+q[6]), 0.5*(q[1]+q[4]+q[7]), 0.5*(q[2]+q[5]+q[8])
			case 2:
				a, b, c = 0.5*(q[0]-q[3]+q[6]), 0.5*(q[1]-q[4]+q[7]), 0.5*(q[2]-q[5]+q[8])
			default:
				a, b, c = q[6], q[7], q[8]
			}
			us[4*r][i] = a
			us[4*r+1][i] = 0.5 * (a + b + c)
			us[4*r+2][i] = 0.5 * (a - b + c)
			us[4*r+3][i] = c
		}
	}
}

// winoInputGo writes V [16][InC][t1-t0] (matrices cp apart), input channels [lo, hi), for the
// tiles [t0, t1) of the batch (tile n*tiles+t is tile t of sample n): V[xi][c][i] = (B^T d B)[xi]
// for the 4x4 tile d of tile t0+i in channel c, zeros beyond the input's edges.
func winoInputGo(v []float32, cp int, xpad []float32, g ConvGeom, t0, t1, lo, hi int) {
	_, tw, per := winoTiles(g)
	n, hw := t1-t0, g.InH*g.InW
	for c := lo; c < hi; c++ {
		for i := range n {
			smp, t := (t0+i)/per, (t0+i)%per
			nc := smp*g.InC + c
			plane := xpad[nc*hw : (nc+1)*hw]
			var d [16]float32
			y0, x0 := 2*(t/tw), 2*(t%tw)
			if y0+4 <= g.InH && x0+4 <= g.InW {
				for r := range 4 {
					copy(d[4*r:4*r+4], plane[(y0+r)*g.InW+x0:])
				}
			} else {
				for r := range min(4, g.InH-y0) {
					copy(d[4*r:4*r+min(4, g.InW-x0)], plane[(y0+r)*g.InW+x0:])
				}
			}
			// b = B^T d (rows), then each row of b B.
			for j := range 4 {
				d0, d1, d2, d3 := d[j], d[4+j], d[8+j], d[12+j]
				d[j], d[4+j], d[8+j], d[12+j] = d0-d2, d1+d2, d2-d1, d1-d3
			}
			at := c*n + i
			for r := range 4 {
				b0, b1, b2, b3 := d[4*r], d[4*r+1], d[4*r+2], d[4*r+3]
				v[(4*r)*cp+at] = b0 - b2
				v[(4*r+1)*cp+at] = b1 + b2
				v[(4*r+2)*cp+at] = b2 - b1
				v[(4*r+3)*cp+at] = b1 - b3
			}
		}
	}
}

// winoOutputGo writes output channels [lo, hi) of the tiles [t0, t1) of the batch into y
// [N][OutC][OutH][OutW] = A^T M A + bias from M [16][OutC][t1-t0] (matrices op apart), dropping
// the outputs of edge tiles beyond the output's edges.
func winoOutputGo(y, m []float32, op int, bias []float32, g ConvGeom, t0, t1, lo, hi int) {
	_, tw, per := winoTiles(g)
	n := t1 - t0
	oh, ow := g.OutH(), g.OutW()
	cols := oh * ow
	for o := lo; o < hi; o++ {
		bs := negZero
		if bias != nil {
			bs = bias[o]
		}
		for i := range n {
			smp, t := (t0+i)/per, (t0+i)%per
			no := smp*g.OutC + o
			plane := y[no*cols : (no+1)*cols]
			at := o*n + i
			// s = A^T M (2x4), then s A (2x2).
			var s0, s1 [4]float32
			for j := range 4 {
				a, b, c, d := m[j*op+at], m[(4+j)*op+at], m[(8+j)*op+at], m[(12+j)*op+at]
				s0[j] = a + b + c
				s1[j] = b - c - d
			}
			y0, x0 := 2*(t/tw), 2*(t%tw)
			z00 := s0[0] + s0[1] + s0[2] + bs
			z01 := s0[1] - s0[2] - s0[3] + bs
			z10 := s1[0] + s1[1] + s1[2] + bs
			z11 := s1[1] - s1[2] - s1[3] + bs
			if y0+2 <= oh && x0+2 <= ow {
				r0 := plane[y0*ow+x0 : y0*ow+x0+2]
				r1 := plane[(y0+1)*ow+x0 : (y0+1)*ow+x0+2]
				r0[0], r0[1], r1[0], r1[1] = z00, z01, z10, z11
				continue
			}
			plane[y0*ow+x0] = z00
			if x0+1 < ow {
				plane[y0*ow+x0+1] = z01
			}
			if y0+1 < oh {
				plane[(y0+1)*ow+x0] = z10
				if x0+1 < ow {
					plane[(y0+1)*ow+x0+1] = z11
				}
			}
		}
	}
}
