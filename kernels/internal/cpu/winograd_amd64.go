//go:build !noasm

package cpu

import (
	"fmt"
	"math"

	"golang.org/x/sys/cpu"
)

// winoAVX512 selects the AVX-512 transforms of winograd_amd64.s, and Winograd with them.
var winoAVX512 = cpu.X86.HasAVX512F

//go:noescape
func winoInputAVX512(v *float32, vstride int, x *float32, w int, offs *int32, n int)

//go:noescape
func winoOutputAVX512(y *float32, ow int, m *float32, mstride int, offs *int32, n int, bias float32)

//go:noescape
func winoFiltersAVX512(u *float32, ustride int, w *float32, n int)

// winograd reports whether Conv2D computes g (padded: Pad 0) by Winograd: a 3x3 stride-1 kernel
// and, with AVX-512 (its transforms), at least 64 input and output channels; without it (the Go
// transforms), at least 128.
//
// Measured with AVX-512 on one core against the direct kernel or the implicit GEMM, batch 32
// (resnet18 at 64 px): 64 channels at 16 px 4.6 -> 3.3 ms, 128 at 8 px 5.6 -> 2.8, 256 at 4 px
// 5.6 -> 2.6, 512 at 2 px 6.4 -> 4.4; batch 128, 64 channels at 8 px 9.1 -> 3.7. With 32
// channels or fewer (the CIFAR ResNets' first stages) the 16 GEMMs are too thin: 32 at 16 px
// 4.9 -> 6.6, 16 at 28 px 3.9 -> 7.1. With AVX-512 masked off (the AVX2 GEMM and direct
// kernels), Conv2D forward and backward, ms: 128 channels at 8 px 9.7 -> 8.0 and 24.5 -> 20.9,
// 256 at 4 px 13.6 -> 7.1 and 26.4 -> 17.2, 512 at 2 px 11.6 -> 11.3 and 31.1 -> 24.3; but 64
// at 16 px 10.2 -> 12.3 and 64 at 8 px (batch 128) 8.4 -> 14.3. Odd sizes (AVX-512, through
// winoOdd): 512 channels at 7 px (resnet18 at 224 px, batch 32) 55 -> 43.5 ms, 64 at 7 px (batch
// 128, resnet8) 5.0-5.3 -> 4.8-5.4 (resnet8's step unchanged within the noise: 6 pairs,
// 1.40-1.43 -> 1.37-1.45 CPU ms a sample).
func winograd(g ConvGeom) bool {
	if g.KH != 3 || g.KW != 3 || g.Stride != 1 {
		return false
	}
	if winoAVX512 {
		return g.InC >= 64 && g.OutC >= 64 && winoTilesAsm(g)
	}
	return g.InC >= 128 && g.OutC >= 128
}

// winoFiltersAsm transforms kernels [lo, hi) as winoFilters does (the same bits), 16 at a time
// with AVX-512; it reports false, doing nothing, without AVX-512.
func winoFiltersAsm(u []float32, su int, w []float32, lo, hi int) bool {
	if !winoAVX512 {
		return false
	}
	_, _ = u[15*su+hi-1], w[9*hi-1]
	winoFiltersAVX512(&u[lo], su, &w[9*lo], hi-lo)
	return true
}

// winoTilesAsm reports whether the AVX-512 input and output transforms handle g (padded; odd
// output sizes through winoEven's extended copy): every offset an int32.
func winoTilesAsm(g ConvGeom) bool {
	e := winoEven(g)
	return winoAVX512 && e.N*e.InC*e.InH*e.InW <= math.MaxInt32 && e.N*e.OutC*e.ColCols() <= math.MaxInt32
}

// winoInputAsm transforms channels [lo, hi) of every sample into V as winoInput does (the same
// bits); offs holds each tile's first input in channel 0 (see winoOffsets).
func winoInputAsm(v []float32, sv int, xpad []float32, g ConvGeom, offs []int32, lo, hi int) {
	p, hw := len(offs), g.InH*g.InW
	mustBeEven(g)
	_, _ = v[15*sv+(hi-1)*p+p-1], xpad[g.N*g.InC*hw-1]
	for c := lo; c < hi; c++ {
		winoInputAVX512(&v[c*p], sv, &xpad[c*hw], g.InW, &offs[0], p)
	}
}

// winoOutputAsm writes output channels [lo, hi) of every sample from M as winoOutput does (the
// same bits); offs holds each tile's first output in channel 0 (see winoOffsets).
func winoOutputAsm(y, m []float32, sm int, bias []float32, g ConvGeom, offs []int32, lo, hi int) {
	p, cols := len(offs), g.ColCols()
	mustBeEven(g)
	_, _ = m[15*sm+(hi-1)*p+p-1], y[g.N*g.OutC*cols-1]
	for o := lo; o < hi; o++ {
		bs := negZero
		if bias != nil {
			bs = bias[o]
		}
		winoOutputAVX512(&y[o*cols], g.OutW(), &m[o*p], sm, &offs[0], p, bs)
	}
}

// mustBeEven panics unless g's output has even sides: the assembly's tiles read and write whole
// 2x2 output blocks, past the planes of an odd geometry (winogradConv sends those to winoOdd).
func mustBeEven(g ConvGeom) {
	if winoEven(g) != g {
		panic(fmt.Sprintf("cpu: Winograd assembly on an odd geometry %+v", g))
	}
}
