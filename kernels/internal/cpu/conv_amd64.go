//go:build !noasm

package cpu

import (
	"math"
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
	"golang.org/x/sys/cpu"
)

// directSet is one instruction set's direct convolution kernels (conv_amd64.s).
type directSet struct {
	name string
	// Its tile kernel (see tile) computes chans output channels by three runs of up to lanes
	// outputs; it may read slack floats past a run's last input.
	lanes, chans int
	slack        int
	// dw3 and dw5 sum the weight gradient of 3 or 5 kernel columns for dwChans output channels
	// (see dwRows5AVX512).
	dw3, dw5 func(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)
	dwChans  int
}

var (
	avx512Direct = &directSet{name: "avx512", lanes: 16, chans: 8,
		dw3: dwRows3AVX512, dw5: dwRows5AVX512, dwChans: 32}
	avx2Direct = &directSet{name: "avx2", lanes: 8, chans: 4, slack: 7,
		dw3: dwRows3AVX2, dw5: dwRows5AVX2, dwChans: 16}
)

// directSets lists the sets this CPU runs, the fastest first; directKernels is the one in use
// (nil: none, the implicit GEMM computes every convolution).
var (
	directSets = func() (s []*directSet) {
		if cpu.X86.HasAVX512F {
			s = append(s, avx512Direct)
		}
		if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
			s = append(s, avx2Direct)
		}
		return s
	}()
	directKernels = func() *directSet {
		if len(directSets) == 0 {
			return nil
		}
		return directSets[0]
	}()
)

// convTile is what the tile kernels read of a tile besides the weights: three runs of up to 16
// consecutive outputs of one output row, each with its first input (kernel offset 0), its first
// output in the tile's first channel and its lanes (bit i: output i). Its layout is the
// assembly's.
type convTile struct {
	x    [3]*float32
	y    [3]*float32
	mask [3]uint16
}

// tile runs the set's tile kernel (see convTileAVX512). It calls the assembly directly, not
// through a func value, so that t stays on its caller's stack (through a func value the escape
// analysis cannot see the kernels' noescape, and every parallel part allocated its tile: 48
// allocations a CNN step).
func (ks *directSet) tile(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32) {
	if ks == avx512Direct {
		convTileAVX512(k, a, offs, t, ldy, beta, bias)
	} else {
		convTileAVX2(k, a, offs, t, ldy, beta, bias)
	}
}

//go:noescape
func convTileAVX512(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32)

//go:noescape
func convTileAVX2(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32)

//go:noescape
func dwRows5AVX512(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)

//go:noescape
func dwRows3AVX512(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)

//go:noescape
func dwRows5AVX2(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)

//go:noescape
func dwRows3AVX2(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)

// negZeros is the bias of a pass that adds none (see negZero).
var negZeros = [8]float32{negZero, negZero, negZero, negZero, negZero, negZero, negZero, negZero}

// directScratch holds a direct convolution's packed weights and input offsets; pooled, so
// that a convolution allocates nothing in steady state.
type directScratch struct {
	w    []float32
	offs []int32
}

var directScratches = sync.Pool{New: func() any { return new(directScratch) }}

// direct reports whether convDirect computes g once its input is padded: a direct set, stride
// 1, output channels in the set's blocks, and output rows that fill at least 3/4 of the runs
// they are cut into (with 16 lanes, rows 12-16, 24-32, 36-48, ... wide). On narrower rows most
// lanes would idle: resnet18's 8, 4 and 2 px planes at 64 px took its step from 13 to 17 ms a
// sample with AVX-512, and stay with the GEMM.
func direct(g ConvGeom) bool {
	ks := directKernels
	if ks == nil {
		return false
	}
	ow, l := g.OutW(), ks.lanes
	return g.Stride == 1 && g.OutC%ks.chans == 0 && 4*ow >= 3*l*((ow+l-1)/l) &&
		g.PaddedLen()/max(g.N, 1) <= math.MaxInt32
}

// convDirect computes y [N][OutC][OutH][OutW] = conv(xpad, w) + bias (nil: none) for a stride-1
// geometry g over an input already padded (Pad 0), with the tile kernel reading the input in
// place: no column matrix is packed, and y is written in its own layout (no transpose from the
// GEMM's). It reports false, doing nothing, where the CPU or g does not suit it (see direct), or
// where xpad's capacity leaves fewer floats past its end than the kernel may read. The result is
// the implicit GEMM's bit for bit: the same passes over the kernel offsets (gemm.PassDepth),
// each summed by FMA from zero in offset order, and the bias added last.
func convDirect(y, xpad, w, bias []float32, g ConvGeom) bool {
	return convDirectBlocked(y, xpad, w, bias, g, nil)
}

// convDirectBlocked is convDirect with the weights in the kernel's blocks already (a ConvPlan's,
// from directBlocks), or blocked by the call when blocked is nil.
func convDirectBlocked(y, xpad, w, bias []float32, g ConvGeom, blocked []float32) bool {
	ks := directKernels
	in, k := g.InC*g.InH*g.InW, g.ColRows()
	if !direct(g) || g.Pad != 0 || cap(xpad) < g.N*in+ks.slack {
		return false
	}
	oh, ow := g.OutH(), g.OutW()
	cols, out := oh*ow, g.OutC*oh*ow
	_, _, _ = xpad[:g.N*in+ks.slack][g.N*in+ks.slack-1], y[g.N*out-1], w[g.OutC*k-1]
	if bias != nil {
		_ = bias[g.OutC-1]
	}
	d := directScratches.Get().(*directScratch)
	defer directScratches.Put(d)
	// Input p's offset from a run's first input, and the weights in blocks (blockWeights).
	d.offs = grow(d.offs, k)
	for p := range k {
		c, ki, kj := p/(g.KH*g.KW), (p/g.KW)%g.KH, p%g.KW
		d.offs[p] = int32(c*g.InH*g.InW + ki*g.InW + kj)
	}
	ch := ks.chans
	if blocked == nil {
		d.w = grow(d.w, g.OutC*k)
		blockWeights(d.w, w, g)
		blocked = d.w
	}
	// Runs of lanes outputs along each output row, three to a tile; the last tile's missing
	// runs have no lanes.
	l := ks.lanes
	per := (ow + l - 1) / l
	runs := g.N * oh * per
	kc := gemm.PassDepth(k)
	For((runs+2)/3, 6*l*k*g.OutC, func(lo, hi int) {
		var t convTile
		var at [3]int // each run's first output in channel 0
		for tile := lo; tile < hi; tile++ {
			for v := range 3 {
				r := min(3*tile+v, runs-1)
				n, oy, ox := r/(oh*per), r/per%oh, r%per*l
				t.x[v], at[v] = &xpad[n*in+oy*g.InW+ox], n*out+oy*ow+ox
				t.mask[v] = uint16(1<<min(l, ow-ox) - 1)
				if 3*tile+v >= runs {
					t.mask[v] = 0
				}
			}
			for b := 0; b < g.OutC; b += ch {
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
					ks.tile(depth, &blocked[b*k+p0*ch], &d.offs[p0], &t, cols, add, bs)
				}
			}
		}
	})
	return true
}

// directSlack is how many floats past its input's end the direct kernel in use may read.
func directSlack() int {
	if directKernels == nil {
		return 0
	}
	return directKernels.slack
}

// blockWeights writes w [OutC][k] to dst in the direct kernel's blocks of chans channels,
// input-major within a block (channel i's weight of input p at [p*chans+i]).
func blockWeights(dst, w []float32, g ConvGeom) {
	ch, k := directKernels.chans, g.ColRows()
	for b := 0; b < g.OutC; b += ch {
		blk := dst[b*k : (b+ch)*k]
		for i := range ch {
			for p, v := range w[(b+i)*k : (b+i+1)*k] {
				blk[p*ch+i] = v
			}
		}
	}
}

// directBlocks returns w in the direct kernel's blocks for g (a ConvPlan's), or nil where the
// direct kernel does not compute g.
func directBlocks(w []float32, g ConvGeom) []float32 {
	if !direct(g) {
		return nil
	}
	dst := make([]float32, g.OutC*g.ColRows())
	blockWeights(dst, w, g)
	return dst
}

// directWeightGrad reports whether weightGradDirect computes g's weight gradient with scratch
// floats.
func directWeightGrad(g ConvGeom, scratch int) bool {
	ks := directKernels
	return ks != nil && g.OutC%ks.dwChans == 0 && (g.KW == 3 || g.KW == 5) &&
		min(parts, g.N)*g.OutC*(g.ColCols()+g.ColRows()) <= scratch && g.PaddedLen()/max(g.N, 1) <= math.MaxInt32
}

// weightGradDirect computes dw [OutC][InC*KH*KW] (overwritten) for g from dy and the zero-padded
// copy of x with the row kernels, reading the input in place: no column matrix is packed. The
// batch is cut into a fixed number of parts (whatever the core count); each part transposes one
// sample's dy at a time to position-major (into scratch, where the kernels read it from the
// cache) and sums its samples' gradient, by FMA in sample and position order, into a gradient
// of its own; the parts' gradients are then added in part order. It reports false, doing
// nothing, where the CPU or g does not suit it (see directWeightGrad).
func weightGradDirect(dw, dy, xpad, scratch []float32, g ConvGeom) bool {
	if !directWeightGrad(g, len(scratch)) {
		return false
	}
	ks := directKernels
	rows, cols := g.ColRows(), g.ColCols()
	kern := ks.dw5
	if g.KW == 3 {
		kern = ks.dw3
	}
	gp := g.padded()
	hw := gp.InH * gp.InW
	in, out, grad := g.InC*hw, g.OutC*cols, g.OutC*rows
	_, _ = xpad[g.N*in-1], dy[g.N*out-1]
	oh, ow := g.OutH(), g.OutW()
	np := min(parts, g.N)
	For(np, g.N/np*out*rows, func(lo, hi int) {
		for part := lo; part < hi; part++ {
			dwT, dyT := scratch[part*(grad+out):][:grad], scratch[part*(grad+out)+grad:][:out]
			clear(dwT)
			for n := part * g.N / np; n < (part+1)*g.N/np; n++ {
				gemm.Transpose(dyT, g.OutC, dy[n*out:], cols, g.OutC, cols)
				for ck := range g.InC * g.KH { // input row ki of channel c: dwT's rows (c, ki, 0..KW-1)
					x := &xpad[n*in+ck/g.KH*hw+ck%g.KH*gp.InW]
					for o := 0; o < g.OutC; o += ks.dwChans {
						kern(oh, ow, x, g.Stride, g.Stride*gp.InW, &dyT[o], g.OutC, &dwT[ck*g.KW*g.OutC+o], g.OutC)
					}
				}
			}
		}
	})
	// The parts' gradients added in part order into the first's, then transposed to dw.
	sum := scratch[:grad]
	For(grad, 2*np, func(lo, hi int) {
		dst := sum[lo:hi]
		for part := 1; part < np; part++ {
			for i, v := range scratch[part*(grad+out)+lo:][:len(dst)] {
				dst[i] += v
			}
		}
	})
	gemm.Transpose(dw, rows, sum, g.OutC, rows, g.OutC)
	return true
}
