//go:build !noasm

package cpu

import "math"

//go:noescape
func winoInputAVX512(v *float32, vstride int, x *float32, w int, offs *int32, n int)

//go:noescape
func winoOutputAVX512(y *float32, ow int, m *float32, mstride int, offs *int32, n int, bias float32)

//go:noescape
func winoFiltersAVX512(u *float32, ustride int, w *float32, n int)

// winoFiltersAsm transforms kernels [lo, hi) as winoFilters does (the same bits), 16 at a time
// with AVX-512; it reports false, doing nothing, without AVX-512.
func winoFiltersAsm(u []float32, su int, w []float32, lo, hi int) bool {
	if !hasAVX512 {
		return false
	}
	_, _ = u[15*su+hi-1], w[9*hi-1]
	winoFiltersAVX512(&u[lo], su, &w[9*lo], hi-lo)
	return true
}

// winoTilesAsm reports whether the AVX-512 input and output transforms handle g (padded): every
// tile inside the input and the output (even output sizes), and every offset an int32.
func winoTilesAsm(g ConvGeom) bool {
	return hasAVX512 && g.OutH()%2 == 0 && g.OutW()%2 == 0 &&
		g.N*g.InC*g.InH*g.InW <= math.MaxInt32 && g.N*g.OutC*g.ColCols() <= math.MaxInt32
}

// winoInputAsm transforms channels [lo, hi) of every sample into V as winoInput does (the same
// bits); offs holds each tile's first input in channel 0 (see winoOffsets).
func winoInputAsm(v []float32, sv int, xpad []float32, g ConvGeom, offs []int32, lo, hi int) {
	p, hw := len(offs), g.InH*g.InW
	_, _ = v[15*sv+(hi-1)*p+p-1], xpad[g.N*g.InC*hw-1]
	for c := lo; c < hi; c++ {
		winoInputAVX512(&v[c*p], sv, &xpad[c*hw], g.InW, &offs[0], p)
	}
}

// winoOutputAsm writes output channels [lo, hi) of every sample from M as winoOutput does (the
// same bits); offs holds each tile's first output in channel 0 (see winoOffsets).
func winoOutputAsm(y, m []float32, sm int, bias []float32, g ConvGeom, offs []int32, lo, hi int) {
	p, cols := len(offs), g.ColCols()
	_, _ = m[15*sm+(hi-1)*p+p-1], y[g.N*g.OutC*cols-1]
	for o := lo; o < hi; o++ {
		bs := float32(math.Copysign(0, -1))
		if bias != nil {
			bs = bias[o]
		}
		winoOutputAVX512(&y[o*cols], g.OutW(), &m[o*p], sm, &offs[0], p, bs)
	}
}
