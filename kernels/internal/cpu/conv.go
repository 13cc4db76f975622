package cpu

import (
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

// ConvGeom is the shape of a 2-D convolution over NCHW data with OIHW weights (see
// kernels.Conv2D, which this mirrors).
type ConvGeom struct {
	N, InC, InH, InW, OutC, KH, KW, Stride, Pad int
}

// OutH and OutW are the output height and width.
func (g ConvGeom) OutH() int { return (g.InH+2*g.Pad-g.KH)/g.Stride + 1 }

// OutW is the output width.
func (g ConvGeom) OutW() int { return (g.InW+2*g.Pad-g.KW)/g.Stride + 1 }

// ColRows is the row count of one sample's column matrix (InC*KH*KW); ColCols its column count
// (OutH*OutW).
func (g ConvGeom) ColRows() int { return g.InC * g.KH * g.KW }

// ColCols is OutH*OutW.
func (g ConvGeom) ColCols() int { return g.OutH() * g.OutW() }

// colSource is the batch's column matrix [InC*KH*KW][N*OutH*OutW] as a gemm.Source: the GEMM
// packs its rows straight from a zero-padded copy of the input (g is the geometry of that copy:
// Pad 0), so the matrix is never written out (the implicit GEMM), and every output row's
// segment is one run of the copy with no bounds to clip. Only Conv2D and Conv2DBackward make
// them, from a pool, so that an op allocates nothing.
type colSource struct {
	x              []float32
	g              ConvGeom
	oh, ow, cols   int
	hw, in, kernel int
}

var colSources = sync.Pool{New: func() any { return new(colSource) }}

func newColSource(xpad []float32, g ConvGeom) *colSource {
	g = g.padded()
	s := colSources.Get().(*colSource)
	*s = colSource{x: xpad, g: g, oh: g.OutH(), ow: g.OutW(), cols: g.ColCols(), hw: g.InH * g.InW,
		in: g.InC * g.InH * g.InW, kernel: g.KH * g.KW}
	return s
}

func (s *colSource) free() {
	*s = colSource{}
	colSources.Put(s)
}

// padded is the geometry of the same convolution over the input with its padding written out.
func (g ConvGeom) padded() ConvGeom {
	g.InH, g.InW, g.Pad = g.InH+2*g.Pad, g.InW+2*g.Pad, 0
	return g
}

// PaddedLen is the float32 count of the zero-padded copy of x [N][InC][InH+2Pad][InW+2Pad].
func (g ConvGeom) PaddedLen() int { return g.N * g.InC * (g.InH + 2*g.Pad) * (g.InW + 2*g.Pad) }

// padInput writes x into xpad with Pad zeros around every plane.
func padInput(xpad, x []float32, g ConvGeom) {
	hp, wp, hw := g.InH+2*g.Pad, g.InW+2*g.Pad, g.InH*g.InW
	For(g.N*g.InC, hp*wp, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			dst, src := xpad[p*hp*wp:(p+1)*hp*wp], x[p*hw:(p+1)*hw]
			if g.Pad == 0 {
				copy(dst, src)
				continue
			}
			// Clearing the whole plane and copying the rows in one call beat a clear and a copy
			// per row (the CNN's rows are 14 floats): 3.3 to 1.7 ms of the CNN's step.
			clear(dst)
			copyRows(dst[g.Pad*wp+g.Pad:], src, g.InH, g.InW, wp, g.InW)
		}
	})
}

// Row writes columns [j0, j0+len(dst)) of row r of the column matrix: the im2row row of kernel
// offset r over the samples' output positions, in order. It divides only once per call: the
// segments (one per output row) are as short as 14 values in the CNN.
func (s *colSource) Row(dst []float32, r, j0 int) {
	g := s.g
	c, ki, kj := r/s.kernel, (r/g.KW)%g.KH, r%g.KW
	n, pos := j0/s.cols, j0%s.cols
	off := c*s.hw + ki*g.InW + kj // kernel offset r's first input in a sample
	if g.KW == 1 && g.Stride == 1 && s.ow == g.InW {
		// A 1x1 unpadded stride-1 kernel reads whole planes in order.
		for len(dst) > 0 {
			seg := min(len(dst), s.cols-pos)
			copy(dst[:seg], s.x[n*s.in+off+pos:][:seg])
			dst = dst[seg:]
			n, pos = n+1, 0
		}
		return
	}
	y, x0 := pos/s.ow, pos%s.ow
	rowStep := g.Stride * g.InW
	at := n*s.in + off + y*rowStep + x0*g.Stride // input index of output (n, y, x0)
	for len(dst) > 0 {
		seg := min(len(dst), s.ow-x0)
		if g.Stride <= 2 && x0 == 0 && seg == s.ow {
			// Whole output rows of this sample, in one call.
			rows := min(len(dst)/s.ow, s.oh-y)
			if g.Stride == 1 {
				copyRows(dst, s.x[at:], rows, s.ow, s.ow, rowStep)
			} else {
				copyRows2(dst, s.x[at:], rows, s.ow, s.ow, rowStep)
			}
			dst = dst[rows*s.ow:]
			if y += rows; y < s.oh {
				at += rows * rowStep
			} else {
				y, n = 0, n+1
				at = n*s.in + off
			}
			continue
		}
		d := dst[:seg]
		if g.Stride == 1 {
			src := s.x[at : at+seg]
			if seg < 32 {
				for i, v := range src {
					d[i] = v
				}
			} else {
				copy(d, src)
			}
		} else {
			src := s.x[at : at+(seg-1)*g.Stride+1]
			for i := range d {
				d[i] = src[i*g.Stride]
			}
		}
		dst = dst[seg:]
		if x0 += seg; x0 < s.ow {
			continue // dst is full
		}
		// Next output row, or the next sample's first.
		x0 = 0
		if y++; y < s.oh {
			at = n*s.in + off + y*rowStep
		} else {
			y, n = 0, n+1
			at = n*s.in + off
		}
	}
}

// row2im adds a column-matrix row of kernel offset (ki, kj) back into one input plane's gradient,
// the inverse of im2row (oh, ow as there).
func row2im(plane, src []float32, g ConvGeom, ki, kj, oh, ow int) {
	if g.Stride == 1 {
		// Output rows [y0, y1) and columns [x0, x1) land inside the plane: one call adds them.
		x0 := min(max(g.Pad-kj, 0), ow)
		x1 := max(min(g.InW+g.Pad-kj, ow), x0)
		y0 := min(max(g.Pad-ki, 0), oh)
		y1 := max(min(g.InH+g.Pad-ki, oh), y0)
		if x1 > x0 && y1 > y0 {
			addRows(plane[(y0-g.Pad+ki)*g.InW+x0-g.Pad+kj:], src[y0*ow+x0:], y1-y0, x1-x0, g.InW, ow)
		}
		return
	}
	for y := range oh {
		iy := y*g.Stride - g.Pad + ki
		if iy < 0 || iy >= g.InH {
			continue
		}
		dst := plane[iy*g.InW : (iy+1)*g.InW]
		s := src[y*ow : (y+1)*ow]
		for xx := range ow {
			ix := xx*g.Stride - g.Pad + kj
			if ix >= 0 && ix < g.InW {
				dst[ix] += s[xx]
			}
		}
	}
}

// col2im overwrites dx with the column-matrix gradient col added back to the input positions. Each
// part owns whole input channels; an element's terms are added in kernel-offset order, whatever
// the partition.
func col2im(dx, col []float32, g ConvGeom) {
	cols, oh, ow := g.ColCols(), g.OutH(), g.OutW()
	nc, in, hw := g.N*cols, g.InC*g.InH*g.InW, g.InH*g.InW
	For(g.InC, g.KH*g.KW*nc, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			for n := range g.N {
				clear(dx[n*in+c*hw:][:hw])
			}
			for ki := range g.KH {
				for kj := range g.KW {
					r := (c*g.KH+ki)*g.KW + kj
					for n := range g.N {
						row2im(dx[n*in+c*hw:][:hw], col[r*nc+n*cols:][:cols], g, ki, kj, oh, ow)
					}
				}
			}
		}
	})
}

// WorkspaceLen is the float32 count Conv2D and Conv2DBackward need in ws: a zero-padded copy of
// x (PaddedLen), then scratch with room for the column matrix of the whole batch,
// [InC*KH*KW][N*OutH*OutW] (sample n's columns at n*OutH*OutW of each row), and a
// [OutC][N*OutH*OutW] matrix for the output (or its gradient) in the same layout. One GEMM over
// the whole batch then does each product, instead of a small GEMM per sample. The scratch after
// the copy also lets the AVX2 direct kernel read a few floats past its end (see directSet).
func (g ConvGeom) WorkspaceLen() int {
	return g.PaddedLen() + (g.ColRows()+g.OutC)*g.N*g.ColCols()
}

// split cuts ws into the padded copy of x, whose capacity runs on to the end of ws, and the
// scratch after it.
func (g ConvGeom) split(ws []float32) (xpad, scratch []float32) {
	return ws[:g.PaddedLen()], ws[g.PaddedLen():][:(g.ColRows()+g.OutC)*g.N*g.ColCols()]
}

// Conv2D computes y [N][OutC][OutH][OutW] = conv(x, w) + bias, leaving a zero-padded copy of x in
// ws for Conv2DBackward. bias may be nil.
func Conv2D(y, x, w, bias, ws []float32, g ConvGeom) {
	conv2D(y, x, w, bias, ws, g, nil)
}

// conv2D is Conv2D with the weights' prepared forms from plan (nil: none).
func conv2D(y, x, w, bias, ws []float32, g ConvGeom, plan *ConvPlan) {
	if g.N == 0 {
		return
	}
	xpad, scratch := g.split(ws)
	if plan != nil && g.Pad == 0 && cap(x) >= len(x)+directSlack() {
		xpad = x // a plan's forward pass leaves nothing in ws for a backward pass: no copy
	} else {
		padInput(xpad, x, g)
	}
	gp := g.padded()
	if winograd(gp) {
		winogradConvU(y, xpad, w, bias, gp, false, plan)
		return
	}
	rows, nc := g.ColRows(), g.N*g.ColCols()
	if patches(gp) {
		toPatches(scratch[:rows*nc], xpad, gp)
		out := columns(y, scratch[rows*nc:], g)
		if a := plan.packed(g); a != nil {
			a.Sgemm(true, nc, 1, scratch[:rows*nc], rows, 0, out, nc)
		} else {
			gemm.Sgemm(false, true, g.OutC, nc, rows, 1, w, rows, scratch[:rows*nc], rows, 0, out, nc)
		}
		fromColumns(y, out, bias, gp)
		return
	}
	convolvePlanned(y, xpad, w, bias, scratch[rows*nc:], gp, plan)
}

// patches reports whether a padded geometry's kernels tile the input without overlap with a
// stride above 2 (a ViT's patch embedding): there the column matrix is written out as patches
// [N*OutH*OutW][ColRows] (toPatches), runs of KW floats read in order, instead of packed a
// row at a time by colSource, whose gathers of every Stride-th float took 7% of a small ViT's
// step. The GEMMs pack the same values either way: the same bits.
func patches(g ConvGeom) bool { return g.Stride > 2 && g.KH == g.Stride && g.KW == g.Stride }

// toPatches writes col [N*OutH*OutW][InC*KH*KW], each output position's inputs in the
// weights' order, from xpad, the padded input of g (Pad 0).
func toPatches(col, xpad []float32, g ConvGeom) {
	oh, ow, rows := g.OutH(), g.OutW(), g.ColRows()
	For(g.N*oh, ow*rows, func(lo, hi int) {
		for ny := lo; ny < hi; ny++ {
			n, y := ny/oh, ny%oh
			for c := range g.InC {
				for ki := range g.KH {
					src := xpad[((n*g.InC+c)*g.InH+y*g.Stride+ki)*g.InW:]
					dst := col[ny*ow*rows+(c*g.KH+ki)*g.KW:]
					for x := range ow { // copy, not copyRows: its masked stores are slow on AMD
						copy(dst[x*rows:x*rows+g.KW], src[x*g.Stride:])
					}
				}
			}
		}
	})
}

// convolve writes y = conv(xpad, w) + bias (nil: none) for a geometry whose input is already
// padded (Pad 0) and that Winograd does not compute (see winograd): with the direct kernel where
// the CPU and the geometry allow it (AVX-512 or AVX2, stride 1, output channels in the kernel
// set's blocks; see direct), else with the implicit GEMM, whose [OutC][N*OutH*OutW] product goes
// to yt first. Both give the same bits. The GEMM packs the column matrix straight from xpad (an
// implicit GEMM): the matrix is never written out, which took a third off the CNN's forward
// convolution; the direct kernel does not pack it at all and writes y in its own layout, which
// took the CNN's first convolution from 3.1 to 1.6 ms a batch and its second from 25.7 to 21-22
// ms.
func convolve(y, xpad, w, bias, yt []float32, g ConvGeom) {
	convolvePlanned(y, xpad, w, bias, yt, g, nil)
}

// convolvePlanned is convolve with the weights' prepared forms from plan (nil: none).
func convolvePlanned(y, xpad, w, bias, yt []float32, g ConvGeom, plan *ConvPlan) {
	if convDirectBlocked(y, xpad, w, bias, g, plan.blocked(g)) {
		return
	}
	src := newColSource(xpad, g)
	if a := plan.packed(g); a != nil {
		yt = columns(y, yt, g)
		a.SgemmSource(false, g.N*g.ColCols(), 1, src, 0, yt, g.N*g.ColCols())
		fromColumns(y, yt, bias, g)
	} else {
		gemmConv(y, src, w, bias, yt, g)
	}
	src.free()
}

// gemmConv is convolve's implicit GEMM.
func gemmConv(y []float32, src *colSource, w, bias, yt []float32, g ConvGeom) {
	rows, nc := g.ColRows(), g.N*g.ColCols()
	yt = columns(y, yt, g)
	gemm.SgemmSource(false, false, g.OutC, nc, rows, 1, w, max(rows, 1), src, 0, yt, nc)
	fromColumns(y, yt, bias, g)
}

// columns is where a product over the batch, [OutC][N*cols], goes for fromColumns: yt, or for one
// sample, whose y has that layout, y itself (a copy less: 2% of efficientnet_b0's inference at
// batch 1).
func columns(y, yt []float32, g ConvGeom) []float32 {
	if g.N == 1 {
		return y[:g.OutC*g.ColCols()]
	}
	return yt
}

// fromColumns writes y [N][OutC][cols] = yt [OutC][N][cols] + bias (nil: none); yt may be y
// (columns), where it adds the bias in place.
func fromColumns(y, yt, bias []float32, g ConvGeom) {
	cols := g.ColCols()
	nc, out := g.N*cols, g.OutC*cols
	if g.N == 1 && len(yt) > 0 && &yt[0] == &y[0] {
		if bias != nil {
			For(g.OutC, cols, func(lo, hi int) {
				for c := lo; c < hi; c++ {
					addConst(y[c*cols:(c+1)*cols], y[c*cols:(c+1)*cols], bias[c])
				}
			})
		}
		return
	}
	For(g.N, out, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for c := range g.OutC {
				dst, src := y[n*out+c*cols:n*out+(c+1)*cols], yt[c*nc+n*cols:c*nc+(n+1)*cols]
				if bias == nil {
					copy(dst, src)
					continue
				}
				addConst(dst, src, bias[c])
			}
		}
	})
}

// toColumns writes dyt [OutC][N][cols] from dy [N][OutC][cols].
func toColumns(dyt, dy []float32, g ConvGeom) {
	cols := g.ColCols()
	nc, out := g.N*cols, g.OutC*cols
	For(g.OutC, nc, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			for n := range g.N {
				copy(dyt[c*nc+n*cols:c*nc+(n+1)*cols], dy[n*out+c*cols:n*out+(c+1)*cols])
			}
		}
	})
}

// Conv2DBackward computes the weight gradient dw (overwritten), the bias gradient dbias
// (overwritten; nil to skip) and the input gradient dx (overwritten; nil to skip) from dy and
// the padded copy of x that Conv2D left in ws. It overwrites the scratch after that copy.
func Conv2DBackward(dx, dw, dbias, dy, w, ws []float32, g ConvGeom) {
	if g.N == 0 {
		// An empty batch: no gradient (the kernels below assume a sample).
		clear(dw)
		clear(dbias)
		return
	}
	rows, cols := g.ColRows(), g.ColCols()
	nc := g.N * cols
	xpad, scratch := g.split(ws)
	col, dyt := scratch[:rows*nc], scratch[rows*nc:]
	haveDyt := false
	if !weightGradDirect(dw, dy, xpad, scratch, g) {
		// dw = dyt [OutC][N*cols] x col^T: one GEMM sums over samples and positions, packing
		// the column matrix from the padded input again (cheaper than writing it out and
		// reading it).
		toColumns(dyt, dy, g)
		haveDyt = true
		if gp := g.padded(); patches(gp) {
			toPatches(col, xpad, gp)
			gemm.Sgemm(false, false, g.OutC, rows, nc, 1, dyt, nc, col, rows, 0, dw, rows)
		} else {
			src := newColSource(xpad, g)
			gemm.SgemmSource(false, true, g.OutC, rows, nc, 1, dyt, max(nc, 1), src, 0, dw, rows)
			src.free()
		}
	}
	if dbias != nil {
		BiasGrad(dbias, dy[:nc*g.OutC], g.N, cols)
	}
	if dx == nil {
		return
	}
	if dg, ok := dxConv(g, len(scratch)); ok {
		convBackData(dx, dy, w, scratch, g, dg)
		return
	}
	if !haveDyt {
		toColumns(dyt, dy, g)
	}
	// dcol = w^T x dyt, then scattered back, a few samples at a time so that their part of the
	// column matrix is still in the cache when col2im reads it (the whole batch's went out to
	// memory and back: 160 MB a step for the CNN's second convolution). Each element of dcol
	// is the same dot product and each of dx gets its terms in the same order, whatever the
	// chunk.
	// Each chunk packs w^T again: chunks stay large enough (at least 4*OutC columns, rounded
	// up to whole samples) for that to cost at most a quarter of the chunk's matrix (the last
	// ResNet stages' weights are megabytes). Rounded down, the CNN's second convolution ran one
	// 196-column sample a chunk: w^T packed 128 times a step and an eighth of the GEMM spent on
	// the padding of its last 32-column sliver; two samples a chunk took 2% off the CNN's step.
	nb := max(1, colChunk/max(rows*cols, 1), (4*g.OutC+cols-1)/max(cols, 1))
	in := g.InC * g.InH * g.InW
	for n0 := 0; n0 < g.N; n0 += nb {
		gc := g
		gc.N = min(nb, g.N-n0)
		dcol := col[:rows*gc.N*cols]
		gemm.Sgemm(true, false, rows, gc.N*cols, g.OutC, 1, w, max(rows, 1), dyt[n0*cols:], max(nc, 1), 0, dcol, gc.N*cols)
		col2im(dx[n0*in:(n0+gc.N)*in], dcol, gc)
	}
}

// colChunk is the float32 count of the column matrix Conv2DBackward computes and scatters at a
// time: 1 MiB, which stays in a core's L2 cache.
const colChunk = 1 << 18

// dxConv returns the geometry of the convolution that computes a stride-1 convolution's input
// gradient (see convBackData), and whether Conv2DBackward computes it that way: when Winograd
// (see winograd) or the direct kernel (see direct: the input channels in the set's blocks)
// computes that convolution, for a square kernel with Pad < K, when scratch floats hold the
// padded dy (and for the direct kernel the flipped weights and the implicit GEMM's product).
// Otherwise col2im scatters the column matrix's gradient (by the implicit GEMM, the flipped
// convolution was no faster than that: the GEMM packs as many values as col2im adds, and its m,
// the input channels, is often small).
func dxConv(g ConvGeom, scratch int) (ConvGeom, bool) {
	dg := ConvGeom{N: g.N, InC: g.OutC, InH: g.OutH(), InW: g.OutW(), OutC: g.InC, KH: g.KH, KW: g.KW,
		Stride: 1, Pad: g.KH - 1 - g.Pad}
	if g.Stride != 1 || g.KH != g.KW || dg.Pad < 0 {
		return dg, false
	}
	if winograd(dg.padded()) {
		return dg, dg.PaddedLen() <= scratch
	}
	ok := direct(dg) && g.OutC*g.ColRows()+dg.PaddedLen()+g.InC*g.N*g.InH*g.InW <= scratch
	return dg, ok
}

// convBackData computes dx for a stride-1 convolution g as the convolution dg (from dxConv) of
// dy, padded by K-1-Pad, with the weights flipped and transposed (w'[c][o][ki][kj] =
// w[o][c][K-1-ki][K-1-kj]): the sums col2im would form, in another order, but by the direct
// kernel (or the implicit GEMM) instead of a multiply to a column matrix and a scatter. scratch
// holds w', the padded dy and the GEMM's product.
func convBackData(dx, dy, w, scratch []float32, g, dg ConvGeom) {
	if winograd(dg.padded()) {
		// Winograd reads w turned and transposed as it is; its V and M may go after dypad.
		dypad := scratch[:dg.PaddedLen()]
		padInput(dypad, dy, dg)
		winogradConv(dx, dypad, w, nil, dg.padded(), true)
		return
	}
	kk := g.KH * g.KW
	wt := scratch[:g.OutC*g.InC*kk]
	dypad := scratch[len(wt):][:dg.PaddedLen()]
	yt := scratch[len(wt)+len(dypad):][:g.InC*g.N*g.InH*g.InW]
	flipWeights(wt, w, g)
	padInput(dypad, dy, dg)
	convolve(dx, dypad, wt, nil, yt, dg.padded())
}

// flipWeights writes wt [InC][OutC][KH][KW] = w [OutC][InC][KH][KW] with each kernel turned
// by 180 degrees.
func flipWeights(wt, w []float32, g ConvGeom) {
	kk := g.KH * g.KW
	for o := range g.OutC {
		for c := range g.InC {
			src, dst := w[(o*g.InC+c)*kk:][:kk], wt[(c*g.OutC+o)*kk:][:kk]
			for t, v := range src {
				dst[kk-1-t] = v
			}
		}
	}
}
