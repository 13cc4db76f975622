package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConv2DEdgeParity holds Conv2D and Conv2DBackward to the plain convolution bit for bit on
// the edges of the implicit GEMM and the chunked input gradient: one sample, odd sizes under
// stride 2 and 3, non-square kernels (a 3x1 kernel takes the whole-plane path of 1x1 ones),
// unpadded 3x3, one channel in and out, and batches that the input gradient's chunks do not
// divide.
func TestConv2DEdgeParity(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, g := range []ConvGeom{
		{N: 1, InC: 1, InH: 1, InW: 1, OutC: 1, KH: 1, KW: 1, Stride: 1, Pad: 0},
		{N: 1, InC: 3, InH: 7, InW: 9, OutC: 5, KH: 3, KW: 3, Stride: 2, Pad: 1},
		{N: 1, InC: 2, InH: 11, InW: 13, OutC: 3, KH: 3, KW: 3, Stride: 3, Pad: 1},
		{N: 2, InC: 3, InH: 9, InW: 7, OutC: 4, KH: 3, KW: 1, Stride: 1, Pad: 0},
		{N: 2, InC: 3, InH: 9, InW: 7, OutC: 4, KH: 1, KW: 3, Stride: 1, Pad: 0},
		{N: 2, InC: 3, InH: 9, InW: 7, OutC: 4, KH: 3, KW: 1, Stride: 2, Pad: 1},
		{N: 3, InC: 4, InH: 10, InW: 10, OutC: 6, KH: 3, KW: 3, Stride: 1, Pad: 0},
		{N: 2, InC: 5, InH: 5, InW: 5, OutC: 7, KH: 5, KW: 5, Stride: 1, Pad: 0},
		{N: 1, InC: 3, InH: 6, InW: 6, OutC: 40, KH: 3, KW: 3, Stride: 1, Pad: 1}, // one sample, 4*OutC > its columns
		{N: 3, InC: 4, InH: 17, InW: 17, OutC: 6, KH: 1, KW: 1, Stride: 2, Pad: 0},
		{N: 2, InC: 4, InH: 35, InW: 33, OutC: 3, KH: 3, KW: 3, Stride: 2, Pad: 1},
		{N: 2, InC: 2, InH: 8, InW: 39, OutC: 3, KH: 2, KW: 2, Stride: 2, Pad: 0},
		{N: 11, InC: 32, InH: 16, InW: 16, OutC: 40, KH: 3, KW: 3, Stride: 1, Pad: 1}, // dx chunks of 3, 3, 3, 2
		{N: 13, InC: 64, InH: 9, InW: 9, OutC: 9, KH: 3, KW: 3, Stride: 1, Pad: 1},    // dx chunks of 5, 5, 3
		{N: 5, InC: 1, InH: 33, InW: 31, OutC: 1, KH: 7, KW: 7, Stride: 2, Pad: 3},
	} {
		x := randVec(r, g.N*g.InC*g.InH*g.InW)
		w := randVec(r, g.OutC*g.ColRows())
		b := randVec(r, g.OutC)
		dy := randVec(r, g.N*g.OutC*g.ColCols())
		var ys, dxs, dws, dbs [2][]float32
		for i := range 2 {
			ys[i] = make([]float32, len(dy))
			dxs[i], dws[i], dbs[i] = make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(b))
		}
		col := refConv2D(ys[0], x, w, b, g)
		refConv2DBackward(dxs[0], dws[0], dbs[0], dy, w, col, g)
		ws := make([]float32, g.WorkspaceLen())
		for i := range ws {
			ws[i] = float32(math.NaN())
		}
		Conv2D(ys[1], x, w, b, ws, g)
		Conv2DBackward(dxs[1], dws[1], dbs[1], dy, w, ws, g)
		for _, c := range []struct {
			name string
			v    [2][]float32
		}{{"y", ys}, {"dx", dxs}, {"dw", dws}, {"db", dbs}} {
			for j := range c.v[0] {
				if math.Float32bits(c.v[0][j]) != math.Float32bits(c.v[1][j]) {
					t.Fatalf("%+v: implicit %s[%d] = %v; plain %v", g, c.name, j, c.v[1][j], c.v[0][j])
				}
			}
		}
	}
}
