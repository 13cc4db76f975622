package cpu

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

// im2row writes the column-matrix row of kernel offset (ki, kj) for one input plane: dst[y*OutW+x]
// is plane[(y*Stride-Pad+ki)*InW + x*Stride-Pad+kj], or 0 in the padding. oh and ow are g.OutH()
// and g.OutW(), computed once by the caller (two divisions per call were 8% of a ResNet step).
func im2row(dst, plane []float32, g ConvGeom, ki, kj, oh, ow int) {
	for y := range oh {
		iy := y*g.Stride - g.Pad + ki
		d := dst[y*ow : (y+1)*ow]
		if iy < 0 || iy >= g.InH {
			clear(d)
			continue
		}
		src := plane[iy*g.InW : (iy+1)*g.InW]
		if g.Stride == 1 {
			// Output columns [x0, x1) read inputs x0-Pad+kj onwards; the rest is padding.
			x0 := min(max(g.Pad-kj, 0), ow)
			x1 := max(min(g.InW+g.Pad-kj, ow), x0)
			clear(d[:x0])
			if x1 > x0 {
				copy(d[x0:x1], src[x0-g.Pad+kj:])
			}
			clear(d[x1:])
			continue
		}
		for xx := range ow {
			ix := xx*g.Stride - g.Pad + kj
			if ix < 0 || ix >= g.InW {
				d[xx] = 0
			} else {
				d[xx] = src[ix]
			}
		}
	}
}

// row2im adds a column-matrix row of kernel offset (ki, kj) back into one input plane's gradient,
// the inverse of im2row (oh, ow as there).
func row2im(plane, src []float32, g ConvGeom, ki, kj, oh, ow int) {
	for y := range oh {
		iy := y*g.Stride - g.Pad + ki
		if iy < 0 || iy >= g.InH {
			continue
		}
		dst := plane[iy*g.InW : (iy+1)*g.InW]
		s := src[y*ow : (y+1)*ow]
		if g.Stride == 1 {
			x0 := min(max(g.Pad-kj, 0), ow)
			x1 := max(min(g.InW+g.Pad-kj, ow), x0)
			if x1 > x0 {
				d, sv := dst[x0-g.Pad+kj:x1-g.Pad+kj], s[x0:x1]
				sv = sv[:len(d)]
				for i, v := range sv {
					d[i] += v
				}
			}
			continue
		}
		for xx := range ow {
			ix := xx*g.Stride - g.Pad + kj
			if ix >= 0 && ix < g.InW {
				dst[ix] += s[xx]
			}
		}
	}
}

// im2col writes the batch's column matrix col [InC*KH*KW][N*OutH*OutW] from x. Each part owns
// whole rows, which it writes front to back (sample after sample).
func im2col(col, x []float32, g ConvGeom) {
	cols, oh, ow := g.ColCols(), g.OutH(), g.OutW()
	nc, in, hw := g.N*cols, g.InC*g.InH*g.InW, g.InH*g.InW
	For(g.ColRows(), nc, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c, ki, kj := r/(g.KH*g.KW), (r/g.KW)%g.KH, r%g.KW
			for n := range g.N {
				im2row(col[r*nc+n*cols:][:cols], x[n*in+c*hw:][:hw], g, ki, kj, oh, ow)
			}
		}
	})
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

// WorkspaceLen is the float32 count Conv2D and Conv2DBackward need in ws: the column matrix of the
// whole batch, [InC*KH*KW][N*OutH*OutW] (sample n's columns at n*OutH*OutW of each row), then a
// [OutC][N*OutH*OutW] matrix for the output (or its gradient) in the same layout. One GEMM over
// the whole batch then does each product, instead of a small GEMM per sample.
func (g ConvGeom) WorkspaceLen() int { return (g.ColRows() + g.OutC) * g.N * g.ColCols() }

// Conv2D computes y [N][OutC][OutH][OutW] = conv(x, w) + bias, leaving the batch's column matrix
// in ws for Conv2DBackward. bias may be nil.
func Conv2D(y, x, w, bias, ws []float32, g ConvGeom) {
	rows, cols := g.ColRows(), g.ColCols()
	nc := g.N * cols
	out := g.OutC * cols
	col, yt := ws[:rows*nc], ws[rows*nc:(rows+g.OutC)*nc]
	im2col(col, x, g)
	Gemm(false, false, g.OutC, nc, rows, 1, w, col, 0, yt)
	// yt is [OutC][N][cols]; y is [N][OutC][cols].
	For(g.N, out, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for c := range g.OutC {
				dst, src := y[n*out+c*cols:n*out+(c+1)*cols], yt[c*nc+n*cols:c*nc+(n+1)*cols]
				if bias == nil {
					copy(dst, src)
					continue
				}
				b := bias[c]
				for i, v := range src {
					dst[i] = v + b
				}
			}
		}
	})
}

// Conv2DBackward computes the weight gradient dw (overwritten), the bias gradient dbias
// (overwritten; nil to skip) and the input gradient dx (overwritten; nil to skip) from dy and the
// column matrix that Conv2D left in ws. It overwrites ws.
func Conv2DBackward(dx, dw, dbias, dy, w, ws []float32, g ConvGeom) {
	rows, cols := g.ColRows(), g.ColCols()
	nc := g.N * cols
	out := g.OutC * cols
	col, dyt := ws[:rows*nc], ws[rows*nc:(rows+g.OutC)*nc]
	For(g.OutC, nc, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			for n := range g.N {
				copy(dyt[c*nc+n*cols:c*nc+(n+1)*cols], dy[n*out+c*cols:n*out+(c+1)*cols])
			}
		}
	})
	// dw = dyt [OutC][N*cols] x col^T: one GEMM sums over samples and positions.
	Gemm(false, true, g.OutC, rows, nc, 1, dyt, col, 0, dw)
	if dbias != nil {
		BiasGrad(dbias, dy[:g.N*out], g.N, cols)
	}
	if dx == nil {
		return
	}
	// dcol = w^T x dyt, into the column matrix's place, then scattered back per sample.
	Gemm(true, false, rows, nc, g.OutC, 1, w, dyt, 0, col)
	col2im(dx, col, g)
}

// PoolGeom is the shape of a max pooling over NCHW data, with Pad pixels of -Inf on each side.
type PoolGeom struct {
	N, C, H, W, K, Stride, Pad int
}

// OutH is the output height.
func (g PoolGeom) OutH() int { return (g.H+2*g.Pad-g.K)/g.Stride + 1 }

// OutW is the output width.
func (g PoolGeom) OutW() int { return (g.W+2*g.Pad-g.K)/g.Stride + 1 }

// MaxPool2D writes each window's maximum to y and its position within the input plane to arg
// (the first maximum on ties; NaN never wins over a number). Padding never wins: every window
// holds at least one input pixel when Pad <= K/2.
func MaxPool2D(y []float32, arg []int32, x []float32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	For(g.N*g.C, g.H*g.W, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane := x[p*g.H*g.W : (p+1)*g.H*g.W]
			yp, ap := y[p*oh*ow:(p+1)*oh*ow], arg[p*oh*ow:(p+1)*oh*ow]
			if g.K == 2 && g.Stride == 2 && g.Pad == 0 {
				maxPool2x2(yp, ap, plane, g.W, oh, ow)
			} else {
				maxPoolPlane(yp, ap, plane, g, oh, ow)
			}
		}
	})
}

// maxPoolPlane is MaxPool2D over one plane, any window.
func maxPoolPlane(yp []float32, ap []int32, plane []float32, g PoolGeom, oh, ow int) {
	for oy := range oh {
		y0 := oy*g.Stride - g.Pad
		ky0, ky1 := max(0, -y0), min(g.K, g.H-y0)
		for ox := range ow {
			x0 := ox*g.Stride - g.Pad
			kx0, kx1 := max(0, -x0), min(g.K, g.W-x0)
			best := (y0+ky0)*g.W + x0 + kx0
			for ky := ky0; ky < ky1; ky++ {
				r := (y0+ky)*g.W + x0
				for kx := kx0; kx < kx1; kx++ {
					if plane[r+kx] > plane[best] {
						best = r + kx
					}
				}
			}
			yp[oy*ow+ox] = plane[best]
			ap[oy*ow+ox] = int32(best)
		}
	}
}

// maxPool2x2 is MaxPool2D's 2x2 stride-2 unpadded window (the CNN's pooling) over one plane of
// width w: the same comparisons in the same order as the general loop (first maximum wins, NaN
// never wins), written so that the compiler selects the index with a conditional move instead
// of a branch that the random signs of activations mispredict (the general loop spent ~18 ns
// per output there).
func maxPool2x2(y []float32, arg []int32, plane []float32, w, oh, ow int) {
	for oy := range oh {
		r := 2 * oy * w
		row0, row1 := plane[r:r+2*ow], plane[r+w:r+w+2*ow]
		yr, ar := y[oy*ow:(oy+1)*ow], arg[oy*ow:(oy+1)*ow]
		for ox := range yr {
			j := 2 * ox
			a, b, c, d := row0[j], row0[j+1], row1[j], row1[j+1]
			best, bv := 0, a
			if b > bv {
				best = 1
			}
			bv = max4(best, a, b, c, d)
			if c > bv {
				best = 2
			}
			bv = max4(best, a, b, c, d)
			if d > bv {
				best = 3
			}
			yr[ox] = max4(best, a, b, c, d)
			ar[ox] = int32(r + j + (best>>1)*w + best&1)
		}
	}
}

// max4 returns the best-th of a, b, c, d.
func max4(best int, a, b, c, d float32) float32 {
	v := [4]float32{a, b, c, d}
	return v[best&3]
}

// MaxPool2DBackward writes dx (cleared first) with each dy routed to its window's maximum.
func MaxPool2DBackward(dx, dy []float32, arg []int32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	For(g.N*g.C, g.H*g.W, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane := dx[p*g.H*g.W : (p+1)*g.H*g.W]
			clear(plane)
			for i, a := range arg[p*oh*ow : (p+1)*oh*ow] {
				plane[a] += dy[p*oh*ow+i]
			}
		}
	})
}
