//go:build !noasm

package cpu

import (
	"math"
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
	"golang.org/x/sys/cpu"
)

// hasAVX512 selects the direct convolution of conv_amd64.s.
var hasAVX512 = cpu.X86.HasAVX512F

// convTile is what convTileAVX512 reads of a tile besides the weights: three runs of up to 16
// consecutive outputs of one output row, each with its first input (kernel offset 0), its first
// output in the tile's first channel and its lanes. Its layout is the assembly's.
type convTile struct {
	x    [3]*float32
	y    [3]*float32
	mask [3]uint16
}

//go:noescape
func convTileAVX512(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32)

// negZeros is the bias of a pass that adds none: x + -0 is x for every x, -0 included.
var negZeros = func() (z [8]float32) {
	for i := range z {
		z[i] = float32(math.Copysign(0, -1))
	}
	return z
}()

// directScratch holds a direct convolution's packed weights and input offsets; pooled, so
// that a convolution allocates nothing in steady state.
type directScratch struct {
	w    []float32
	offs []int32
}

var directScratches = sync.Pool{New: func() any { return new(directScratch) }}

// convDirect computes y [N][OutC][OutH][OutW] = conv(xpad, w) + bias (nil: none) for a stride-1
// geometry g over an input already padded (Pad 0), with the AVX-512 tile kernel reading the
// input in place: no column matrix is packed, and y is written in its own layout (no transpose
// from the GEMM's). It reports false, doing nothing, where the CPU or g does not suit it (no
// AVX-512, a stride, output channels not a multiple of 8). The result is the implicit GEMM's bit
// for bit: the same passes over the kernel offsets (gemm.PassDepth), each summed by FMA from
// zero in offset order, and the bias added last.
func convDirect(y, xpad, w, bias []float32, g ConvGeom) bool {
	if !direct(g) || g.Pad != 0 {
		return false
	}
	in, k := g.InC*g.InH*g.InW, g.ColRows()
	oh, ow := g.OutH(), g.OutW()
	cols, out := oh*ow, g.OutC*oh*ow
	_, _, _ = xpad[g.N*in-1], y[g.N*out-1], w[g.OutC*k-1]
	if bias != nil {
		_ = bias[g.OutC-1]
	}
	d := directScratches.Get().(*directScratch)
	defer directScratches.Put(d)
	// Input p's offset from a run's first input, and the weights in blocks of 8 channels,
	// input-major within a block (channel i's weight of input p at [p*8+i]).
	d.offs = grow(d.offs, k)
	for p := range k {
		c, ki, kj := p/(g.KH*g.KW), (p/g.KW)%g.KH, p%g.KW
		d.offs[p] = int32(c*g.InH*g.InW + ki*g.InW + kj)
	}
	d.w = grow(d.w, g.OutC*k)
	for b := 0; b < g.OutC; b += 8 {
		blk := d.w[b*k : (b+8)*k]
		for i := range 8 {
			for p, v := range w[(b+i)*k : (b+i+1)*k] {
				blk[p*8+i] = v
			}
		}
	}
	// Runs of 16 outputs along each output row, three to a tile; the last tile's missing
	// runs have no lanes.
	per := (ow + 15) / 16
	runs := g.N * oh * per
	kc := gemm.PassDepth(k)
	For((runs+2)/3, 48*k*g.OutC, func(lo, hi int) {
		var t convTile
		var at [3]int // each run's first output in channel 0
		for tile := lo; tile < hi; tile++ {
			for v := range 3 {
				r := min(3*tile+v, runs-1)
				n, oy, ox := r/(oh*per), r/per%oh, r%per*16
				t.x[v], at[v] = &xpad[n*in+oy*g.InW+ox], n*out+oy*ow+ox
				t.mask[v] = uint16(1<<min(16, ow-ox) - 1)
				if 3*tile+v >= runs {
					t.mask[v] = 0
				}
			}
			for b := 0; b < g.OutC; b += 8 {
				for v, o := range at {
					t.y[v] = &y[o+b*cols]
				}
				for p0 := 0; p0 < k; p0 += kc {
					depth, add := min(kc, k-p0), 0
					bs := &negZeros[0]
					if p0 > 0 {
						add = 1
					}
					if p0+depth == k && bias != nil {
						bs = &bias[b]
					}
					convTileAVX512(depth, &d.w[b*k+p0*8], &d.offs[p0], &t, cols, add, bs)
				}
			}
		}
	})
	return true
}

// direct reports whether convDirect computes g once its input is padded.
func direct(g ConvGeom) bool {
	return hasAVX512 && g.Stride == 1 && g.OutC%8 == 0 && g.PaddedLen()/max(g.N, 1) <= math.MaxInt32
}

// grow returns s resized to n, reallocated only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
