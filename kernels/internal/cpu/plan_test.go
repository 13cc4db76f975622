package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvPlan holds a ConvPlan's Conv2D to Conv2D's bits on every path Conv2D takes (Winograd
// over even and odd outputs, the direct kernel, a ViT's patches, the implicit GEMM strided or
// not), with batches and input sizes that change from call to call over one plan, and checks
// that the plan reads the weights when a call first needs them, not after.
func TestConvPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name string
		g    ConvGeom
	}{
		{"winograd", ConvGeom{InC: 64, OutC: 72, KH: 3, KW: 3, Stride: 1, Pad: 1}},
		{"direct", ConvGeom{InC: 5, OutC: 16, KH: 3, KW: 3, Stride: 1, Pad: 1}},
		{"patches", ConvGeom{InC: 3, OutC: 20, KH: 4, KW: 4, Stride: 4}},
		{"gemm strided", ConvGeom{InC: 24, OutC: 13, KH: 1, KW: 1, Stride: 2}},
		{"gemm 7x7", ConvGeom{InC: 3, OutC: 30, KH: 7, KW: 7, Stride: 2, Pad: 3}},
	} {
		w := randVec(r, c.g.OutC*c.g.ColRows())
		plan := NewConvPlan(w)
		for _, s := range []struct{ n, h, w int }{{1, 16, 16}, {3, 7, 9}, {2, 17, 16}, {1, 8, 8}} {
			g := c.g
			g.N, g.InH, g.InW = s.n, s.h, s.w
			x, bias := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC)
			want := make([]float32, g.N*g.OutC*g.ColCols())
			got := make([]float32, len(want))
			Conv2D(want, x, w, bias, make([]float32, g.WorkspaceLen()), g)
			plan.Conv2D(got, x, bias, make([]float32, g.WorkspaceLen()), g)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %+v: y[%d] = %v planned, %v from Conv2D", c.name, g, i, got[i], want[i])
				}
			}
		}
		// The forms are made: changing the weights now changes nothing the plan computes.
		g := c.g
		g.N, g.InH, g.InW = 1, 16, 16
		x := randVec(r, g.InC*g.InH*g.InW)
		before := make([]float32, g.OutC*g.ColCols())
		plan.Conv2D(before, x, nil, make([]float32, g.WorkspaceLen()), g)
		for i := range w {
			w[i] = -w[i]
		}
		after := make([]float32, len(before))
		plan.Conv2D(after, x, nil, make([]float32, g.WorkspaceLen()), g)
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: the plan's output changed with the weights after its forms were made", c.name)
		}
	}
}
