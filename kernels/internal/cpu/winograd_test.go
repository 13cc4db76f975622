package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestWinogradConv holds winogradConv to the float64 convolution on edge shapes: odd output
// sizes (tiles hanging over the edge), planes of 1 and 2 pixels, one sample, channel counts
// not in eights, with and without a bias.
func TestWinogradConv(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for _, g := range []ConvGeom{
		{N: 1, InC: 1, InH: 1, InW: 1, OutC: 1},
		{N: 2, InC: 3, InH: 2, InW: 2, OutC: 5},
		{N: 1, InC: 7, InH: 1, InW: 5, OutC: 3},
		{N: 3, InC: 5, InH: 7, InW: 9, OutC: 6},
		{N: 2, InC: 9, InH: 6, InW: 3, OutC: 11},
		{N: 4, InC: 16, InH: 8, InW: 8, OutC: 24},
		{N: 2, InC: 64, InH: 4, InW: 4, OutC: 40},
		{N: 3, InC: 130, InH: 2, InW: 3, OutC: 17},
		{N: 2, InC: 4, InH: 33, InW: 70, OutC: 3}, // rows wider than the stack buffer
	} {
		g.KH, g.KW, g.Stride, g.Pad = 3, 3, 1, 1
		for _, withBias := range []bool{true, false} {
			x, w := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows())
			var b []float32
			var b64 []float64
			if withBias {
				b = randVec(r, g.OutC)
				b64 = to64(b)
			} else {
				b64 = make([]float64, g.OutC)
			}
			xpad := make([]float32, g.PaddedLen())
			padInput(xpad, x, g)
			y := make([]float32, g.N*g.OutC*g.ColCols())
			winogradConv(y, xpad, w, b, g.padded(), false)
			closeTo(t, fmt.Sprintf("%+v bias %v", g, withBias), y, conv64(to64(x), to64(w), b64, g), 1e-4)
		}
	}
}

// BenchmarkWinograd compares, per layer, the convolution convolve ran before Winograd (the
// direct kernel or the implicit GEMM) with winogradConv, both over the padded input.
func BenchmarkWinograd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range resnetLayers {
		g.KH, g.KW, g.Stride, g.Pad = 3, 3, 1, 1
		x, w, bias := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
		xpad := make([]float32, g.PaddedLen())
		padInput(xpad, x, g)
		y := make([]float32, g.N*g.OutC*g.ColCols())
		yt := make([]float32, len(y))
		gp := g.padded()
		name := fmt.Sprintf("N%d_C%d_%dpx", g.N, g.InC, g.InH)
		b.Run(name+"/old", func(b *testing.B) {
			for range b.N {
				if !convDirect(y, xpad, w, bias, gp) {
					src := newColSource(xpad, gp)
					gemmConv(y, src, w, bias, yt, gp)
					src.free()
				}
			}
		})
		b.Run(name+"/winograd", func(b *testing.B) {
			for range b.N {
				winogradConv(y, xpad, w, bias, gp, false)
			}
		})
	}
}

// dx64 is the float64 input gradient of conv64: dx[n][c][iy][ix] sums dy[n][o][oy][ox] *
// w[o][c][ki][kj] over the outputs that read input (iy, ix).
func dx64(dy, w []float64, g ConvGeom) []float64 {
	oh, ow := g.OutH(), g.OutW()
	dx := make([]float64, g.N*g.InC*g.InH*g.InW)
	for n := range g.N {
		for o := range g.OutC {
			for oy := range oh {
				for ox := range ow {
					d := dy[((n*g.OutC+o)*oh+oy)*ow+ox]
					for c := range g.InC {
						for ki := range g.KH {
							for kj := range g.KW {
								iy, ix := oy*g.Stride-g.Pad+ki, ox*g.Stride-g.Pad+kj
								if iy >= 0 && iy < g.InH && ix >= 0 && ix < g.InW {
									dx[((n*g.InC+c)*g.InH+iy)*g.InW+ix] += d * w[((o*g.InC+c)*g.KH+ki)*g.KW+kj]
								}
							}
						}
					}
				}
			}
		}
	}
	return dx
}

// TestWinogradConv2D holds Conv2D's y and Conv2DBackward's dx to the float64 convolution on
// shapes that Winograd computes both of (on AVX-512: 64 channels or more; in the builds without
// assembly: all): planes of 2 px, odd sizes, one sample, channels not in eights, unpadded.
func TestWinogradConv2D(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	for _, g := range []ConvGeom{
		{N: 2, InC: 64, InH: 4, InW: 6, OutC: 64, Pad: 1},
		{N: 1, InC: 64, InH: 2, InW: 2, OutC: 72, Pad: 1},
		{N: 3, InC: 70, InH: 6, InW: 2, OutC: 65, Pad: 1},
		{N: 2, InC: 64, InH: 6, InW: 8, OutC: 64, Pad: 0},
		{N: 2, InC: 64, InH: 5, InW: 3, OutC: 66, Pad: 1},
		{N: 3, InC: 64, InH: 1, InW: 4, OutC: 64, Pad: 1},
	} {
		g.KH, g.KW, g.Stride = 3, 3, 1
		if dg, ok := dxConv(g, (g.ColRows()+g.OutC)*g.N*g.ColCols()); winoTilesAsm(g.padded()) && !(winograd(g.padded()) && ok && winograd(dg.padded())) {
			t.Fatalf("%+v: Winograd does not compute y and dx", g)
		}
		x, w, b := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
		dy := randVec(r, g.N*g.OutC*g.ColCols())
		y, ws := make([]float32, len(dy)), make([]float32, g.WorkspaceLen())
		dx, dw := make([]float32, len(x)), make([]float32, len(w))
		Conv2D(y, x, w, b, ws, g)
		closeTo(t, fmt.Sprintf("%+v: y", g), y, conv64(to64(x), to64(w), to64(b), g), 1e-4)
		Conv2DBackward(dx, dw, nil, dy, w, ws, g)
		closeTo(t, fmt.Sprintf("%+v: dx", g), dx, dx64(to64(dy), to64(w), g), 1e-4)
	}
}

// TestWinogradNoAllocs checks that a Winograd convolution allocates nothing once its pooled
// scratch has grown (on one core: For starts no goroutines).
func TestWinogradNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled objects at random")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := rand.New(rand.NewPCG(97, 98))
	for _, g := range []ConvGeom{
		{N: 2, InC: 64, InH: 6, InW: 6, OutC: 64},
		{N: 2, InC: 3, InH: 5, InW: 7, OutC: 4},
		{N: 2, InC: 64, InH: 7, InW: 5, OutC: 64},
	} {
		g.KH, g.KW, g.Stride = 3, 3, 1
		x, w := randVec(r, g.PaddedLen()), randVec(r, g.OutC*g.ColRows())
		y := make([]float32, g.N*g.OutC*g.ColCols())
		if a := testing.AllocsPerRun(20, func() { winogradConv(y, x, w, nil, g, false) }); a > 0 {
			t.Errorf("%+v: %v allocations a call", g, a)
		}
	}
}

// TestWinogradBlocks runs winogradConv on a batch of several blocks of tiles, the last partial
// and a block boundary inside a sample, holds it to the float64 convolution, and to the bits of
// each sample alone (other blocks) and of the blocks run in parallel rather than one at a time:
// the blocks must not change a sum.
func TestWinogradBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(99, 100))
	g := ConvGeom{N: 3, InC: 64, InH: 22, InW: 20, OutC: 72, KH: 3, KW: 3, Stride: 1, Pad: 1}
	_, _, per := winoTiles(g.padded())
	if pb := winoBlock(g, g.N*per); g.N*per <= 2*pb || per%pb == 0 {
		t.Fatalf("%d tiles in blocks of %d: want more than two blocks, one across samples", g.N*per, pb)
	}
	x, w, b := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
	xpad := make([]float32, g.PaddedLen())
	padInput(xpad, x, g)
	y := make([]float32, g.N*g.OutC*g.ColCols())
	winogradConv(y, xpad, w, b, g.padded(), false)
	closeTo(t, "y", y, conv64(to64(x), to64(w), to64(b), g), 1e-4)
	// With one core the blocks are the parallel loop's parts (blocksPart); with more, too few for
	// that, each is shared by the cores.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	y1 := make([]float32, len(y))
	winogradConv(y1, xpad, w, b, g.padded(), false)
	for i := range y {
		if math.Float32bits(y1[i]) != math.Float32bits(y[i]) {
			t.Fatalf("y[%d] = %v on one core, %v on %d", i, y1[i], y[i], runtime.NumCPU())
		}
	}
	one := g
	one.N = 1
	in, out := one.PaddedLen(), g.OutC*g.ColCols()
	for n := range g.N {
		yn := make([]float32, out)
		winogradConv(yn, xpad[n*in:(n+1)*in], w, b, one.padded(), false)
		for i, v := range yn {
			if math.Float32bits(v) != math.Float32bits(y[n*out+i]) {
				t.Fatalf("sample %d: y[%d] = %v alone, %v in the batch", n, i, v, y[n*out+i])
			}
		}
	}
}

// TestWinogradNarrow holds the products of a convolution of fewer tiles than winoNarrow, which
// run transposed (productsT), to the bits of the same samples in a batch wide enough for the
// plain products: forward, with a plan's filters and without, and flipped (an input gradient's,
// w read as the weights [InC][OutC] of the convolution it is the gradient of).
func TestWinogradNarrow(t *testing.T) {
	r := rand.New(rand.NewPCG(103, 104))
	w := randVec(r, 64*72*9)
	plan := NewConvPlan(w)
	for _, flip := range []bool{false, true} {
		g := ConvGeom{N: 4, InC: 72, InH: 7, InW: 7, OutC: 64, KH: 3, KW: 3, Stride: 1} // padded: 16 tiles a sample
		if flip {
			g.InC, g.OutC = 64, 72
		}
		one := g
		one.N = 1
		if _, _, per := winoTiles(g); per >= winoNarrow || g.N*per < winoNarrow {
			t.Fatalf("%d tiles a sample, %d in the batch: want the sample narrow, the batch not", per, g.N*per)
		}
		x := randVec(r, g.N*g.InC*g.InH*g.InW)
		y := make([]float32, g.N*g.OutC*g.ColCols())
		winogradConv(y, x, w, nil, g, flip)
		in, out := g.InC*g.InH*g.InW, g.OutC*g.ColCols()
		plans := []*ConvPlan{nil, plan}
		if flip {
			plans = plans[:1] // a plan holds a forward convolution's filters
		}
		for n := range g.N {
			for _, p := range plans {
				yn := make([]float32, out)
				winogradConvU(yn, x[n*in:(n+1)*in], w, nil, one, flip, p)
				for i, v := range yn {
					if math.Float32bits(v) != math.Float32bits(y[n*out+i]) {
						t.Fatalf("flip %v, plan %v, sample %d: y[%d] = %v alone (narrow), %v in the batch", flip, p != nil, n, i, v, y[n*out+i])
					}
				}
			}
		}
	}
}
