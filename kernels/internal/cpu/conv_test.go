package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestConv2DSameBitsAnyCores runs Conv2D and Conv2DBackward on the CNN's second layer (the
// direct kernels on AVX-512, the implicit GEMM elsewhere), on a strided ResNet shape and on
// Winograd ones with 1
// and 4 cores: y, dx, dw and db must not change by a bit, since the work is cut into parts that
// do not depend on the core count.
func TestConv2DSameBitsAnyCores(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, g := range []ConvGeom{
		{N: 20, InC: 32, InH: 14, InW: 14, OutC: 64, KH: 5, KW: 5, Stride: 1, Pad: 2},
		{N: 6, InC: 16, InH: 15, InW: 16, OutC: 32, KH: 3, KW: 3, Stride: 2, Pad: 1},
		// Winograd for y and dx (without AVX-512 also the odd sizes, by the Go transforms).
		{N: 9, InC: 64, InH: 8, InW: 8, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1},
		{N: 4, InC: 64, InH: 7, InW: 5, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1},
	} {
		x, w, b := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
		dy := randVec(r, g.N*g.OutC*g.ColCols())
		var out [2][4][]float32
		for i, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			y, ws := make([]float32, len(dy)), make([]float32, g.WorkspaceLen())
			dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(b))
			Conv2D(y, x, w, b, ws, g)
			Conv2DBackward(dx, dw, db, dy, w, ws, g)
			out[i] = [4][]float32{y, dx, dw, db}
		}
		for k, name := range []string{"y", "dx", "dw", "db"} {
			for j, v := range out[0][k] {
				if math.Float32bits(v) != math.Float32bits(out[1][k][j]) {
					t.Fatalf("%+v: %s[%d] = %v on 1 core, %v on 4", g, name, j, v, out[1][k][j])
				}
			}
		}
	}
}

// TestConv2DEmptyBatch: a batch of no samples (which kernels.Conv2D's Validate allows) writes no
// output and zero gradients, on every path (direct, Winograd, implicit GEMM), without a panic.
func TestConv2DEmptyBatch(t *testing.T) {
	for _, g := range []ConvGeom{
		{InC: 32, InH: 14, InW: 14, OutC: 64, KH: 5, KW: 5, Stride: 1, Pad: 2},
		{InC: 64, InH: 8, InW: 8, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1},
		{InC: 16, InH: 15, InW: 16, OutC: 24, KH: 3, KW: 3, Stride: 2, Pad: 1},
	} {
		w := make([]float32, g.OutC*g.ColRows())
		dw, db := make([]float32, len(w)), make([]float32, g.OutC)
		for i := range dw {
			dw[i] = 1
		}
		db[0] = 1
		Conv2D(nil, nil, w, db, make([]float32, g.WorkspaceLen()), g)
		Conv2DBackward(nil, dw, db, nil, w, make([]float32, g.WorkspaceLen()), g)
		for i, v := range append(dw, db...) {
			if v != 0 {
				t.Fatalf("%+v: gradient[%d] = %v for an empty batch", g, i, v)
			}
		}
	}
}
