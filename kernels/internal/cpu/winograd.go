package cpu

import (
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

// winoScratch holds a Winograd convolution's U (V and M too when the caller's scratch is too
// short for them) and tile offsets, and the call in
// progress for its parts, which For runs: bound once (when the pool makes it) and reading the
// call from the scratch, so that a convolution allocates nothing in steady state.
type winoScratch struct {
	buf, vm []float32 // U; V and M when the caller's scratch is short
	xe, ye  []float32 // an odd-sized convolution's extended input and output (see winoOdd)
	offs    []int32

	y, x, w, bias, u, v, m   []float32
	g                        ConvGeom
	su, sv, sm               int
	asm                      bool
	filters, inputs, outputs func(lo, hi int)
	extend, crop             func(lo, hi int)
}

// winoPooled is the most floats of V and M that go in the pooled scratch rather than the
// caller's workspace: 32 MiB. One buffer that every layer reuses stays in the cache, where each
// layer's own workspace did not: with resnet18's (up to 17 MB) in the workspaces its step took
// 10.6-10.7 CPU ms a sample instead of 10.2-10.4.
const winoPooled = 1 << 23

var winoScratches = sync.Pool{New: func() any {
	s := new(winoScratch)
	s.filters, s.inputs, s.outputs = s.filterPart, s.inputPart, s.outputPart
	s.extend, s.crop = s.extendPart, s.cropPart
	return s
}}

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
// V and M go in the pooled scratch, which always holds U, up to winoPooled floats, else in
// scratch (the caller's free workspace) where it is long enough.
func winogradConv(y, xpad, w, bias []float32, g ConvGeom, flip bool, scratch []float32) {
	winogradConvU(y, xpad, w, bias, g, flip, scratch, nil)
}

// winogradConvU is winogradConv with the transformed filters packed already (a ConvPlan's: not
// flipped), or transformed and packed by the call when pu is nil.
func winogradConvU(y, xpad, w, bias []float32, g ConvGeom, flip bool, scratch []float32, pu *[16]*gemm.Packed) {
	if e := winoEven(g); e != g && winoTilesAsm(g) {
		winoOdd(y, xpad, w, bias, g, e, flip, scratch, pu)
		return
	}
	_, _, per := winoTiles(g)
	p := g.N * per
	s := winoScratches.Get().(*winoScratch)
	defer winoScratches.Put(s)
	s.su, s.sv, s.sm = winoStride(g.OutC*g.InC), winoStride(g.InC*p), winoStride(g.OutC*p)
	nu, nv, nm := 16*s.su, 16*s.sv, 16*s.sm
	if pu == nil {
		s.buf = grow(s.buf, nu)
	}
	vm := scratch
	if len(vm) < nv+nm || nv+nm <= winoPooled {
		s.vm = grow(s.vm, nv+nm)
		vm = s.vm
	}
	s.y, s.x, s.w, s.bias, s.g = y, xpad, w, bias, g
	s.u, s.v, s.m = s.buf, vm[:nv], vm[nv:nv+nm]
	if s.asm = winoTilesAsm(g); s.asm {
		s.offs = grow(s.offs, 2*p)
		winoOffsets(s.offs[:p], s.offs[p:], g)
	}
	if pu == nil {
		For(g.OutC*g.InC, 64, s.filters)
	}
	For(g.InC, 40*p, s.inputs)
	for xi := range 16 {
		if pu != nil {
			pu[xi].Sgemm(false, p, 1, s.v[xi*s.sv:], p, 0, s.m[xi*s.sm:], p)
			continue
		}
		a, lda := s.u[xi*s.su:], max(g.InC, 1)
		if flip {
			swap := [4]int{3, 1, 2, 0}
			a, lda = s.u[(4*swap[xi/4]+swap[xi%4])*s.su:], max(g.OutC, 1)
		}
		gemm.Sgemm(flip, false, g.OutC, p, g.InC, 1, a, lda, s.v[xi*s.sv:], p, 0, s.m[xi*s.sm:], p)
	}
	For(g.OutC, 40*p, s.outputs)
	s.clearCall()
}

// clearCall drops the references of the call in progress, keeping the buffers and the bound
// parts. Buffers past winoPooled floats (V and M that the caller's scratch could not hold, an odd
// convolution's extended copies) are dropped too, so that the pool never keeps more than
// winoPooled floats of them, whatever the layer.
func (s *winoScratch) clearCall() {
	*s = winoScratch{buf: s.buf, vm: pooled(s.vm), xe: pooled(s.xe), ye: pooled(s.ye), offs: s.offs,
		filters: s.filters, inputs: s.inputs, outputs: s.outputs, extend: s.extend, crop: s.crop}
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
func winoOdd(y, xpad, w, bias []float32, g, e ConvGeom, flip bool, scratch []float32, pu *[16]*gemm.Packed) {
	s := winoScratches.Get().(*winoScratch)
	defer winoScratches.Put(s)
	s.xe = grow(s.xe, e.N*e.InC*e.InH*e.InW)
	s.ye = grow(s.ye, e.N*e.OutC*e.ColCols())
	s.x, s.y, s.g = xpad, y, g
	For(g.N*g.InC, e.InH*e.InW, s.extend)
	winogradConvU(s.ye, s.xe, w, bias, e, flip, scratch, pu)
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

// inputPart transforms input channels [lo, hi) of the call's samples into V.
func (s *winoScratch) inputPart(lo, hi int) {
	if s.asm {
		winoInputAsm(s.v, s.sv, s.x, s.g, s.offs[:len(s.offs)/2], lo, hi)
		return
	}
	winoInputGo(s.v, s.sv, s.x, s.g, lo, hi)
}

// outputPart writes output channels [lo, hi) of the call's samples from M.
func (s *winoScratch) outputPart(lo, hi int) {
	if s.asm {
		winoOutputAsm(s.y, s.m, s.sm, s.bias, s.g, s.offs[len(s.offs)/2:], lo, hi)
		return
	}
	winoOutputGo(s.y, s.m, s.sm, s.bias, s.g, lo, hi)
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

// winoPack returns the transformed filters of w (OutC x InC 3x3 kernels), each of the 16
// matrices packed as the GEMMs of winogradConv read them: a ConvPlan's, made once.
func winoPack(w []float32, g ConvGeom) *[16]*gemm.Packed {
	su := winoStride(g.OutC * g.InC)
	u := make([]float32, 16*su)
	For(g.OutC*g.InC, 64, func(lo, hi int) {
		if !winoFiltersAsm(u, su, w, lo, hi) {
			winoFiltersGo(u, su, w, lo, hi)
		}
	})
	var pu [16]*gemm.Packed
	for xi := range pu {
		pu[xi] = gemm.Pack(false, g.OutC, g.InC, u[xi*su:], max(g.InC, 1))
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

// winoInputGo writes V [16][InC][N*tiles] (matrices cp apart) for input channels [lo, hi):
// V[xi][c][n*tiles+t] = (B^T d B)[xi] for the 4x4 tile d of tile t of sample n's channel c,
// zeros beyond the input's edges.
func winoInputGo(v []float32, cp int, xpad []float32, g ConvGeom, lo, hi int) {
	th, tw, per := winoTiles(g)
	p := g.N * per
	hw := g.InH * g.InW
	var vs [16][]float32
	for c := lo; c < hi; c++ {
		for n := range g.N {
			nc := n*g.InC + c
			plane := xpad[nc*hw : (nc+1)*hw]
			at := c*p + n*per
			for xi := range vs {
				vs[xi] = v[xi*cp+at:][:per]
			}
			t := 0
			for ty := range th {
				for tx := range tw {
					var d [16]float32
					y0, x0 := 2*ty, 2*tx
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
					for r := range 4 {
						b0, b1, b2, b3 := d[4*r], d[4*r+1], d[4*r+2], d[4*r+3]
						vs[4*r][t] = b0 - b2
						vs[4*r+1][t] = b1 + b2
						vs[4*r+2][t] = b2 - b1
						vs[4*r+3][t] = b1 - b3
					}
					t++
				}
			}
		}
	}
}

// winoOutputGo writes output channels [lo, hi) of y [N][OutC][OutH][OutW] = A^T M A + bias
// from M [16][OutC][N*tiles] (matrices op apart), dropping the outputs of edge tiles beyond
// the output's edges.
func winoOutputGo(y, m []float32, op int, bias []float32, g ConvGeom, lo, hi int) {
	th, tw, per := winoTiles(g)
	p := g.N * per
	oh, ow := g.OutH(), g.OutW()
	cols := oh * ow
	var ms [16][]float32
	for o := lo; o < hi; o++ {
		for n := range g.N {
			no := n*g.OutC + o
			bs := negZero
			if bias != nil {
				bs = bias[o]
			}
			plane := y[no*cols : (no+1)*cols]
			at := o*p + n*per
			for xi := range ms {
				ms[xi] = m[xi*op+at:][:per]
			}
			t := 0
			for ty := range th {
				for tx := range tw {
					// s = A^T M (2x4), then s A (2x2).
					var s0, s1 [4]float32
					for j := range 4 {
						a, b, c, d := ms[j][t], ms[4+j][t], ms[8+j][t], ms[12+j][t]
						s0[j] = a + b + c
						s1[j] = b - c - d
					}
					t++
					y0, x0 := 2*ty, 2*tx
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
	}
}
