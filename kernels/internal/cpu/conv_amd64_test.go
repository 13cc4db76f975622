//go:build !noasm && linux

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvDirectGuardPages runs the direct convolution on inputs and outputs that end against
// (or start right after) an inaccessible page, for output widths around the 16-lane runs and
// tiles whose last runs are empty: a masked lane that touches a float outside its slice faults.
// Each result must be the implicit GEMM's bit for bit.
func TestConvDirectGuardPages(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: the direct convolution does not run on this CPU")
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, atStart := range []bool{false, true} {
		for w := 1; w <= 35; w++ {
			for _, k := range []int{1, 3} {
				g := ConvGeom{N: 1 + w%3, InC: 1 + w%2, InH: k + w%4, InW: w + k - 1, OutC: 8 * (1 + w%2), KH: k, KW: k, Stride: 1}
				xpad := guarded(t, g.PaddedLen(), atStart)
				for i := range xpad {
					xpad[i] = r.Float32() - 0.5
				}
				wt, bias := randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
				n := g.N * g.OutC * g.ColCols()
				got, want := guarded(t, n, atStart), make([]float32, n)
				if !convDirect(got, xpad, wt, bias, g) {
					t.Fatalf("%+v: not direct", g)
				}
				src := newColSource(xpad, g)
				gemmConv(want, src, wt, bias, make([]float32, n), g)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v: y[%d] = %v, implicit GEMM %v", g, i, got[i], want[i])
					}
				}
			}
		}
	}
}
