//go:build !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// depthwiseBothPaths runs the depthwise kernels with the assembly and with the Go loops.
func depthwiseBothPaths(t *testing.T, f func(asm bool)) {
	if !dwAVX2 {
		t.Skip("no AVX2+FMA: the depthwise assembly does not run on this CPU")
	}
	defer func() { dwAVX2 = true }()
	for _, asm := range []bool{true, false} {
		dwAVX2 = asm
		f(asm)
	}
}

// depthwiseSweep lists geometries around the assembly's blocks and edges: kernels 1-7, strides
// 1-3, every padding 0..K, planes narrower and wider than the kernel, odd widths, channel
// counts that leave groups of 8 part empty.
func depthwiseSweep() []DepthwiseGeom {
	var gs []DepthwiseGeom
	sizes := [][2]int{{1, 1}, {2, 3}, {5, 4}, {7, 9}, {4, 16}, {13, 11}}
	i := 0
	for k := 1; k <= 7; k++ {
		for s := 1; s <= 3; s++ {
			for pad := 0; pad <= k; pad++ {
				for _, hw := range sizes {
					g := DepthwiseGeom{N: 1 + i%2, C: []int{3, 8, 13, 1}[i%4], H: hw[0], W: hw[1], K: k, Stride: s, Pad: pad}
					if g.OutH() > 0 && g.OutW() > 0 {
						gs = append(gs, g)
						i++
					}
				}
			}
		}
	}
	return gs
}

// TestDepthwiseSIMDMatchesGo: the assembly gives the Go loops' y, dx, dw and dbias bit for bit,
// with and without a bias, dx and dbias, and with the weights and biases that make it fall back
// to the Go loops (-0 biases, infinite and NaN weights) or not (-0 and 0 weights).
func TestDepthwiseSIMDMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(87, 88))
	for ci, g := range depthwiseSweep() {
		kk := g.K * g.K
		x, w, b := randVec(r, g.N*g.C*g.H*g.W), randVec(r, g.C*kk), randVec(r, g.C)
		dy := randVec(r, g.N*g.C*g.OutH()*g.OutW())
		switch ci % 5 {
		case 1:
			b[0], w[kk-1] = float32(math.Copysign(0, -1)), 0
			x[0] = float32(math.Copysign(0, -1))
		case 2:
			w[len(w)-1] = float32(math.Inf(1))
		case 3:
			w[0], b = float32(math.NaN()), nil
		case 4:
			for i := range w {
				w[i] = float32(math.Copysign(0, -1)) // every product ±0: sums of -0 stay -0
			}
			b[len(b)-1] = float32(math.Copysign(0, -1))
		}
		var out [2][4][]float32
		depthwiseBothPaths(t, func(asm bool) {
			i := 0
			if asm {
				i = 1
			}
			y, dx, dw, db := make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.C)
			DepthwiseConv2D(y, x, w, b, g)
			if ci%3 == 0 {
				dx, db = nil, nil
			}
			DepthwiseConv2DBackward(dx, dw, db, dy, x, w, g)
			out[i] = [4][]float32{y, dx, dw, db}
		})
		for k, name := range []string{"y", "dx", "dw", "dbias"} {
			for j, v := range out[0][k] {
				if math.Float32bits(v) != math.Float32bits(out[1][k][j]) {
					t.Fatalf("%+v (case %d): %s[%d] = %v with the assembly, %v with the Go loops", g, ci, name, j, out[1][k][j], v)
				}
			}
		}
	}
}

// TestDepthwiseGuardPages runs the assembly on arrays that end against (or start right after) an
// inaccessible page: a tile packed or unpacked past its planes faults.
func TestDepthwiseGuardPages(t *testing.T) {
	if !dwAVX2 {
		t.Skip("no AVX2+FMA")
	}
	r := rand.New(rand.NewPCG(89, 90))
	for _, atStart := range []bool{false, true} {
		for _, g := range []DepthwiseGeom{
			{N: 2, C: 5, H: 7, W: 5, K: 3, Stride: 1, Pad: 1},
			{N: 1, C: 11, H: 4, W: 4, K: 7, Stride: 1, Pad: 3},
			{N: 2, C: 9, H: 9, W: 8, K: 5, Stride: 2, Pad: 2},
			{N: 1, C: 3, H: 5, W: 7, K: 3, Stride: 3, Pad: 0},
		} {
			fill := func(v []float32) []float32 {
				copy(v, randVec(r, len(v)))
				return v
			}
			kk, ohw := g.K*g.K, g.OutH()*g.OutW()
			x, w, b := fill(guarded(t, g.N*g.C*g.H*g.W, atStart)), fill(guarded(t, g.C*kk, atStart)), fill(guarded(t, g.C, atStart))
			y, dy := guarded(t, g.N*g.C*ohw, atStart), fill(guarded(t, g.N*g.C*ohw, atStart))
			dx, dw, db := guarded(t, len(x), atStart), guarded(t, len(w), atStart), guarded(t, g.C, atStart)
			DepthwiseConv2D(y, x, w, b, g)
			DepthwiseConv2DBackward(dx, dw, db, dy, x, w, g)
		}
	}
}

// depthwiseBenchGeoms are the depthwise convolutions of convnext_tiny and efficientnet_b0 at 64
// px, batch 16.
var depthwiseBenchGeoms = []DepthwiseGeom{
	{N: 16, C: 96, H: 16, W: 16, K: 7, Stride: 1, Pad: 3},
	{N: 16, C: 192, H: 8, W: 8, K: 7, Stride: 1, Pad: 3},
	{N: 16, C: 384, H: 4, W: 4, K: 7, Stride: 1, Pad: 3},
	{N: 16, C: 768, H: 2, W: 2, K: 7, Stride: 1, Pad: 3},
	{N: 16, C: 32, H: 32, W: 32, K: 3, Stride: 1, Pad: 1},
	{N: 16, C: 96, H: 32, W: 32, K: 3, Stride: 2, Pad: 1},
	{N: 16, C: 144, H: 16, W: 16, K: 5, Stride: 2, Pad: 2},
	{N: 16, C: 480, H: 4, W: 4, K: 5, Stride: 1, Pad: 2},
	{N: 16, C: 1152, H: 2, W: 2, K: 5, Stride: 1, Pad: 2},
}

// BenchmarkDepthwise times the forward and backward depthwise kernels, assembly and Go loops.
func BenchmarkDepthwise(b *testing.B) {
	r := rand.New(rand.NewPCG(91, 92))
	defer func(v bool) { dwAVX2 = v }(dwAVX2)
	for _, g := range depthwiseBenchGeoms {
		kk, ohw := g.K*g.K, g.OutH()*g.OutW()
		x, w, bias := randVec(r, g.N*g.C*g.H*g.W), randVec(r, g.C*kk), randVec(r, g.C)
		y, dy := make([]float32, g.N*g.C*ohw), randVec(r, g.N*g.C*ohw)
		dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.C)
		for _, path := range []struct {
			name string
			asm  bool
		}{{"asm", true}, {"go", false}} {
			if path.asm && !hasAVX2 {
				continue
			}
			name := fmt.Sprintf("%dx%dx%d/k%ds%d/%s", g.C, g.H, g.W, g.K, g.Stride, path.name)
			b.Run("fwd/"+name, func(b *testing.B) {
				dwAVX2 = path.asm
				for b.Loop() {
					DepthwiseConv2D(y, x, w, bias, g)
				}
			})
			b.Run("bwd/"+name, func(b *testing.B) {
				dwAVX2 = path.asm
				for b.Loop() {
					DepthwiseConv2DBackward(dx, dw, db, dy, x, w, g)
				}
			})
		}
	}
}
