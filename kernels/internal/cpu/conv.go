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

// im2col writes one sample's column matrix [InC*KH*KW][OutH*OutW] from x [InC][InH][InW].
func im2col(col, x []float32, g ConvGeom) {
	oh, ow := g.OutH(), g.OutW()
	for c := range g.InC {
		plane := x[c*g.InH*g.InW : (c+1)*g.InH*g.InW]
		for ki := range g.KH {
			for kj := range g.KW {
				row := col[((c*g.KH+ki)*g.KW+kj)*oh*ow:][:oh*ow]
				for y := range oh {
					iy := y*g.Stride - g.Pad + ki
					dst := row[y*ow : (y+1)*ow]
					if iy < 0 || iy >= g.InH {
						clear(dst)
						continue
					}
					src := plane[iy*g.InW : (iy+1)*g.InW]
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

// col2im adds one sample's column-matrix gradient back into dx [InC][InH][InW] (which it first
// clears), in a fixed order.
func col2im(dx, col []float32, g ConvGeom) {
	clear(dx)
	oh, ow := g.OutH(), g.OutW()
	for c := range g.InC {
		plane := dx[c*g.InH*g.InW : (c+1)*g.InH*g.InW]
		for ki := range g.KH {
			for kj := range g.KW {
				row := col[((c*g.KH+ki)*g.KW+kj)*oh*ow:][:oh*ow]
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

// Conv2D computes y [N][OutC][OutH][OutW] = conv(x, w) + bias, leaving each sample's column
// matrix in ws ([N][ColRows][ColCols]) for Conv2DBackward. bias may be nil.
func Conv2D(y, x, w, bias, ws []float32, g ConvGeom) {
	rows, cols := g.ColRows(), g.ColCols()
	in, out := g.InC*g.InH*g.InW, g.OutC*cols
	For(g.N, rows*cols*g.OutC, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			col := ws[n*rows*cols : (n+1)*rows*cols]
			im2col(col, x[n*in:(n+1)*in], g)
			yn := y[n*out : (n+1)*out]
			Gemm(false, false, g.OutC, cols, rows, 1, w, col, 0, yn)
			if bias != nil {
				for c, b := range bias {
					r := yn[c*cols : (c+1)*cols]
					for i := range r {
						r[i] += b
					}
				}
			}
		}
	})
}

// Conv2DBackward computes the weight gradient dw (overwritten), the bias gradient dbias
// (overwritten; nil to skip) and the input gradient dx (overwritten; nil to skip) from dy and the
// column matrices that Conv2D left in ws. It overwrites ws.
func Conv2DBackward(dx, dw, dbias, dy, w, ws []float32, g ConvGeom) {
	rows, cols := g.ColRows(), g.ColCols()
	in, out := g.InC*g.InH*g.InW, g.OutC*cols
	// dw = sum over n of dy_n [OutC][cols] x col_n^T, added in sample order; each product is one
	// whole GEMM (Gemm parallelizes it), since splitting dw's rows would repack col_n per part.
	for n := range g.N {
		beta := float32(1)
		if n == 0 {
			beta = 0
		}
		Gemm(false, true, g.OutC, rows, cols, 1, dy[n*out:(n+1)*out], ws[n*rows*cols:(n+1)*rows*cols], beta, dw)
	}
	if dbias != nil {
		BiasGrad(dbias, dy[:g.N*out], g.N, cols)
	}
	if dx == nil {
		return
	}
	For(g.N, rows*cols*g.OutC, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			col := ws[n*rows*cols : (n+1)*rows*cols]
			Gemm(true, false, rows, cols, g.OutC, 1, w, dy[n*out:(n+1)*out], 0, col)
			col2im(dx[n*in:(n+1)*in], col, g)
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
