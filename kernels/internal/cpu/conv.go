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

// im2col writes one sample's column matrix [InC*KH*KW][OutH*OutW] from x [InC][InH][InW]; row r
// starts at col[r*ld].
func im2col(col, x []float32, g ConvGeom, ld int) {
	oh, ow := g.OutH(), g.OutW()
	for c := range g.InC {
		plane := x[c*g.InH*g.InW : (c+1)*g.InH*g.InW]
		for ki := range g.KH {
			for kj := range g.KW {
				row := col[((c*g.KH+ki)*g.KW+kj)*ld:][:oh*ow]
				for y := range oh {
					iy := y*g.Stride - g.Pad + ki
					dst := row[y*ow : (y+1)*ow]
					if iy < 0 || iy >= g.InH {
						clear(dst)
						continue
					}
					src := plane[iy*g.InW : (iy+1)*g.InW]
					if g.Stride == 1 {
						// Output columns [x0, x1) read inputs x0-Pad+kj onwards; the rest is padding.
						x0 := min(max(g.Pad-kj, 0), ow)
						x1 := max(min(g.InW+g.Pad-kj, ow), x0)
						clear(dst[:x0])
						if x1 > x0 {
							copy(dst[x0:x1], src[x0-g.Pad+kj:])
						}
						clear(dst[x1:])
						continue
					}
					for xx := range ow {
						ix := xx*g.Stride - g.Pad + kj
						if ix < 0 || ix >= g.InW {
							dst[xx] = 0
						} else {
							dst[xx] = src[ix]
						}
					}
				}
			}
		}
	}
}

// col2im adds one sample's column-matrix gradient (row r at col[r*ld]) back into dx
// [InC][InH][InW] (which it first clears), in a fixed order.
func col2im(dx, col []float32, g ConvGeom, ld int) {
	clear(dx)
	oh, ow := g.OutH(), g.OutW()
	for c := range g.InC {
		plane := dx[c*g.InH*g.InW : (c+1)*g.InH*g.InW]
		for ki := range g.KH {
			for kj := range g.KW {
				row := col[((c*g.KH+ki)*g.KW+kj)*ld:][:oh*ow]
				for y := range oh {
					iy := y*g.Stride - g.Pad + ki
					if iy < 0 || iy >= g.InH {
						continue
					}
					dst := plane[iy*g.InW : (iy+1)*g.InW]
					src := row[y*ow : (y+1)*ow]
					for xx := range ow {
						ix := xx*g.Stride - g.Pad + kj
						if ix >= 0 && ix < g.InW {
							dst[ix] += src[xx]
						}
					}
				}
			}
		}
	}
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
	in, out := g.InC*g.InH*g.InW, g.OutC*cols
	col, yt := ws[:rows*nc], ws[rows*nc:(rows+g.OutC)*nc]
	For(g.N, rows*cols, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			im2col(col[n*cols:], x[n*in:(n+1)*in], g, nc)
		}
	})
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
	in, out := g.InC*g.InH*g.InW, g.OutC*cols
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
	For(g.N, rows*cols, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			col2im(dx[n*in:(n+1)*in], col[n*cols:], g, nc)
		}
	})
}

// PoolGeom is the shape of a max pooling over NCHW data.
type PoolGeom struct {
	N, C, H, W, K, Stride int
}

// OutH is the output height.
func (g PoolGeom) OutH() int { return (g.H-g.K)/g.Stride + 1 }

// OutW is the output width.
func (g PoolGeom) OutW() int { return (g.W-g.K)/g.Stride + 1 }

// MaxPool2D writes each window's maximum to y and its position within the input plane to arg
// (the first maximum on ties; NaN never wins over a number).
func MaxPool2D(y []float32, arg []int32, x []float32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	For(g.N*g.C, g.H*g.W, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane := x[p*g.H*g.W : (p+1)*g.H*g.W]
			yp, ap := y[p*oh*ow:(p+1)*oh*ow], arg[p*oh*ow:(p+1)*oh*ow]
			for oy := range oh {
				for ox := range ow {
					best := (oy*g.Stride)*g.W + ox*g.Stride
					for ky := range g.K {
						r := (oy*g.Stride+ky)*g.W + ox*g.Stride
						for kx := range g.K {
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
	})
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
