package cpu

// DepthwiseGeom is the shape of a depthwise convolution over NCHW data: channel c of the output
// sees channel c of the input through its own K×K kernel, over the input padded with Pad zeros,
// every Stride (>= 1) pixels.
type DepthwiseGeom struct {
	N, C, H, W, K, Stride, Pad int
}

// OutH is the output height.
func (g DepthwiseGeom) OutH() int { return (g.H+2*g.Pad-g.K)/g.Stride + 1 }

// OutW is the output width.
func (g DepthwiseGeom) OutW() int { return (g.W+2*g.Pad-g.K)/g.Stride + 1 }

// taps returns the outputs [lo, hi) of a row (or column) of n outputs whose tap k lands inside
// an input of size in: o*stride - pad + k in [0, in).
func taps(k, n, in, stride, pad int) (lo, hi int) {
	lo = max(0, (pad-k+stride-1)/stride)
	if in-1+pad-k < 0 {
		return lo, lo
	}
	return lo, max(lo, min(n, (in-1+pad-k)/stride+1))
}

// tapRanges returns taps' [lo, hi) for every tap 0..K-1 of the rows (r[2k], r[2k+1]) and of the
// columns (c[2k], c[2k+1]): computed once per call, not per row.
func (g DepthwiseGeom) tapRanges() (r, c []int) {
	r, c = make([]int, 2*g.K), make([]int, 2*g.K)
	for k := range g.K {
		r[2*k], r[2*k+1] = taps(k, g.OutH(), g.H, g.Stride, g.Pad)
		c[2*k], c[2*k+1] = taps(k, g.OutW(), g.W, g.Stride, g.Pad)
	}
	return r, c
}

// DepthwiseConv2D computes y = the depthwise convolution of x with w ([C][K][K]) plus bias ([C],
// or nil: 0), one plane (sample, channel) at a time, in parallel over planes. Each output is its
// bias plus its window's products, added in float32 in row-major tap order with the padding taps
// left out: the plane starts as the bias and each tap adds its product to the outputs it reaches
// (a run of contiguous outputs, an AXPY over a row with stride 1). With AVX2 (depthwise_amd64.go)
// the planes are computed 8 channels at a time, to the same bits.
func DepthwiseConv2D(y, x, w, bias []float32, g DepthwiseGeom) {
	if depthwiseSIMD(y, x, w, bias, g) {
		return
	}
	rows, cols := g.tapRanges()
	For(g.N*g.C, g.OutH()*g.OutW()*g.K*g.K, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			depthwisePlane(y, x, w, bias, g, p, rows, cols)
		}
	})
}

// depthwisePlane computes plane p (sample, channel) of DepthwiseConv2D's y, rows and cols being
// g.tapRanges().
func depthwisePlane(y, x, w, bias []float32, g DepthwiseGeom, p int, rows, cols []int) {
	oh, ow := g.OutH(), g.OutW()
	hw, ohw, kk := g.H*g.W, oh*ow, g.K*g.K
	c := p % g.C
	yp, xp, wc := y[p*ohw:(p+1)*ohw], x[p*hw:(p+1)*hw], w[c*kk:(c+1)*kk]
	b := float32(0)
	if bias != nil {
		b = bias[c]
	}
	for i := range yp {
		yp[i] = b
	}
	for kh := range g.K {
		oy0, oy1 := rows[2*kh], rows[2*kh+1]
		for oy := oy0; oy < oy1; oy++ {
			yr, xr := yp[oy*ow:(oy+1)*ow], xp[(oy*g.Stride-g.Pad+kh)*g.W:][:g.W]
			for kw := range g.K {
				ox0, ox1 := cols[2*kw], cols[2*kw+1]
				if ox0 >= ox1 {
					continue
				}
				axpyTap(yr[ox0:ox1], wc[kh*g.K+kw], xr, ox0*g.Stride-g.Pad+kw, g.Stride)
			}
		}
	}
}

// axpyTap adds a*xr[off + i*stride] to each ys[i].
func axpyTap(ys []float32, a float32, xr []float32, off, stride int) {
	if stride == 1 {
		xs := xr[off : off+len(ys)]
		for i := range ys {
			ys[i] += float32(a * xs[i]) // rounded: never fused (GOAMD64=v3), as on CUDA (--fmad=false)
		}
		return
	}
	_ = xr[off+(len(ys)-1)*stride]
	for i := range ys {
		ys[i] += float32(a * xr[off+i*stride])
	}
}

// DepthwiseConv2DBackward overwrites dw ([C][K][K]) and, when not nil, dx (as x) and dbias ([C])
// from dy, the forward input x and the weights w. dx is computed plane by plane as the forward
// pass in reverse: each tap adds its weight times dy to the inputs it read, so every dx is a
// float32 sum of its taps in row-major tap order. dw and dbias are sums over the samples and the
// output plane in float64 (samples, then rows, then columns), one channel per parallel item
// (with AVX2, depthwise_amd64.go: 8 channels, in the same order, to the same bits).
func DepthwiseConv2DBackward(dx, dw, dbias, dy, x, w []float32, g DepthwiseGeom) {
	if depthwiseBackwardSIMD(dx, dw, dbias, dy, x, w, g) {
		return
	}
	ohw, kk := g.OutH()*g.OutW(), g.K*g.K
	rows, cols := g.tapRanges()
	if dx != nil {
		For(g.N*g.C, ohw*kk, func(lo, hi int) {
			for p := lo; p < hi; p++ {
				depthwiseGradPlane(dx, dy, w, g, p, rows, cols)
			}
		})
	}
	For(g.C, g.N*ohw*(kk+1), func(lo, hi int) {
		acc := make([]float64, kk)
		for c := lo; c < hi; c++ {
			depthwiseWeightGrad(dw, dy, x, g, c, acc, rows)
			if dbias != nil {
				depthwiseBiasGrad(dbias, dy, g, c)
			}
		}
	})
}

// depthwiseGradPlane computes plane p (sample, channel) of DepthwiseConv2DBackward's dx, rows
// and cols being g.tapRanges().
func depthwiseGradPlane(dx, dy, w []float32, g DepthwiseGeom, p int, rows, cols []int) {
	oh, ow := g.OutH(), g.OutW()
	hw, ohw, kk := g.H*g.W, oh*ow, g.K*g.K
	c := p % g.C
	dxp, dyp, wc := dx[p*hw:(p+1)*hw], dy[p*ohw:(p+1)*ohw], w[c*kk:(c+1)*kk]
	for i := range dxp {
		dxp[i] = 0
	}
	for kh := range g.K {
		oy0, oy1 := rows[2*kh], rows[2*kh+1]
		for oy := oy0; oy < oy1; oy++ {
			dyr, dxr := dyp[oy*ow:(oy+1)*ow], dxp[(oy*g.Stride-g.Pad+kh)*g.W:][:g.W]
			for kw := range g.K {
				ox0, ox1 := cols[2*kw], cols[2*kw+1]
				if ox0 >= ox1 {
					continue
				}
				scatterTap(dxr, ox0*g.Stride-g.Pad+kw, g.Stride, wc[kh*g.K+kw], dyr[ox0:ox1])
			}
		}
	}
}

// depthwiseWeightGrad computes channel c of DepthwiseConv2DBackward's dw with acc (K*K floats)
// as scratch, rows being g.tapRanges()'s.
func depthwiseWeightGrad(dw, dy, x []float32, g DepthwiseGeom, c int, acc []float64, rows []int) {
	oh, ow := g.OutH(), g.OutW()
	hw, ohw, kk := g.H*g.W, oh*ow, g.K*g.K
	clear(acc)
	for n := range g.N {
		p := n*g.C + c
		dyp, xp := dy[p*ohw:(p+1)*ohw], x[p*hw:(p+1)*hw]
		for kh := range g.K {
			for oy := rows[2*kh]; oy < rows[2*kh+1]; oy++ {
				dwRow(acc[kh*g.K:(kh+1)*g.K], dyp[oy*ow:(oy+1)*ow], xp[(oy*g.Stride-g.Pad+kh)*g.W:][:g.W], g.Stride, g.Pad)
			}
		}
	}
	for i, v := range acc {
		dw[c*kk+i] = float32(v)
	}
}

// depthwiseBiasGrad computes channel c of DepthwiseConv2DBackward's dbias: a float64 sum over the
// samples, then the output plane.
func depthwiseBiasGrad(dbias, dy []float32, g DepthwiseGeom, c int) {
	ohw := g.OutH() * g.OutW()
	var s float64
	for n := range g.N {
		for _, v := range dy[(n*g.C+c)*ohw : (n*g.C+c+1)*ohw] {
			s += float64(v)
		}
	}
	dbias[c] = float32(s)
}

// dwRow adds one output row's products to the weight gradients of one kernel row: acc[kw] +=
// dyr[ox]·xr[ox*stride - pad + kw] for every ox whose tap kw lies inside xr, column after column.
// The K sums are independent chains (not one latency-bound sum per tap), and each still adds its
// terms in column order.
func dwRow(acc []float64, dyr, xr []float32, stride, pad int) {
	for ox, v := range dyr {
		d, base := float64(v), ox*stride-pad
		k0, k1 := max(0, -base), min(len(acc), len(xr)-base)
		if k0 >= k1 {
			continue
		}
		as, xs := acc[k0:k1], xr[base+k0:base+k1]
		for i := range as {
			as[i] += d * float64(xs[i])
		}
	}
}

// scatterTap adds a*dys[i] to dxr[off + i*stride].
func scatterTap(dxr []float32, off, stride int, a float32, dys []float32) {
	if stride == 1 {
		xs := dxr[off : off+len(dys)]
		for i, v := range dys {
			xs[i] += float32(a * v)
		}
		return
	}
	_ = dxr[off+(len(dys)-1)*stride]
	for i, v := range dys {
		dxr[off+i*stride] += float32(a * v)
	}
}
