package cpu

// The plain convolution that Conv2D's implicit GEMM replaced, kept as the reference it is held to.

// im2row writes the column-matrix row of kernel offset (ki, kj) for one input plane: dst[y*OutW+x]
// is plane[(y*Stride-Pad+ki)*InW + x*Stride-Pad+kj], or 0 in the padding. oh and ow are g.OutH()
// and g.OutW(), computed once by the caller (two divisions per call were 8% of a ResNet step).
func im2row(dst, plane []float32, g ConvGeom, ki, kj, oh, ow int) {
	for y := range oh {
		im2seg(dst[y*ow:(y+1)*ow], plane, g, ki, kj, y, 0)
	}
}

// im2seg writes output columns [x0, x0+len(d)) of output row y of im2row's row: d[i] is
// plane[(y*Stride-Pad+ki)*InW + (x0+i)*Stride-Pad+kj], or 0 in the padding.
func im2seg(d, plane []float32, g ConvGeom, ki, kj, y, x0 int) {
	iy := y*g.Stride - g.Pad + ki
	if iy < 0 || iy >= g.InH {
		clear(d)
		return
	}
	src := plane[iy*g.InW : (iy+1)*g.InW]
	if g.Stride == 1 {
		// d[i] reads input column x0+i-Pad+kj; [lo, hi) are those inside the plane.
		lo := min(max(g.Pad-kj-x0, 0), len(d))
		hi := max(min(g.InW+g.Pad-kj-x0, len(d)), lo)
		clear(d[:lo])
		if hi > lo {
			copy(d[lo:hi], src[x0+lo-g.Pad+kj:])
		}
		clear(d[hi:])
		return
	}
	for i := range d {
		ix := (x0+i)*g.Stride - g.Pad + kj
		if ix < 0 || ix >= g.InW {
			d[i] = 0
		} else {
			d[i] = src[ix]
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

// refConv2D is the plain convolution: im2col writes the column matrix of x, one GEMM multiplies.
// It returns the matrix for refConv2DBackward.
func refConv2D(y, x, w, bias []float32, g ConvGeom) (col []float32) {
	rows, nc := g.ColRows(), g.N*g.ColCols()
	col, yt := make([]float32, rows*nc), make([]float32, g.OutC*nc)
	im2col(col, x, g)
	Gemm(false, false, g.OutC, nc, rows, 1, w, col, 0, yt)
	fromColumns(y, yt, bias, g)
	return col
}

// refConv2DBackward is Conv2DBackward reading the column matrix refConv2D wrote (and, for dx by
// convolution, writing out that convolution's).
func refConv2DBackward(dx, dw, dbias, dy, w, col []float32, g ConvGeom) {
	rows, nc := g.ColRows(), g.N*g.ColCols()
	dyt := make([]float32, g.OutC*nc)
	toColumns(dyt, dy, g)
	Gemm(false, true, g.OutC, rows, nc, 1, dyt, col, 0, dw)
	BiasGrad(dbias, dy, g.N, g.ColCols())
	if dg, ok := dxConv(g, (rows+g.OutC)*nc); ok {
		// convBackData's convolution, its column matrix written out.
		wt := make([]float32, len(w))
		flipWeights(wt, w, g)
		refConv2D(dx, dy, wt, nil, dg)
		return
	}
	Gemm(true, false, rows, nc, g.OutC, 1, w, dyt, 0, col)
	col2im(dx, col, g)
}
