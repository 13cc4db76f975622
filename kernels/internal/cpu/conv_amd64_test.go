//go:build !noasm && linux

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

// eachDirectSet runs f with each direct kernel set this CPU has in use in turn.
func eachDirectSet(t *testing.T, f func(t *testing.T, ks *directSet)) {
	if len(directSets) == 0 {
		t.Skip("no AVX2+FMA or AVX-512: the direct convolutions do not run on this CPU")
	}
	defer func(ks *directSet) { directKernels = ks }(directKernels)
	for _, ks := range directSets {
		directKernels = ks
		t.Run(ks.name, func(t *testing.T) { f(t, ks) })
	}
}

// TestDirectSetsParity holds every direct kernel set to the plain convolution, as
// TestConv2DImplicitParity does the one in use.
func TestDirectSetsParity(t *testing.T) {
	eachDirectSet(t, func(t *testing.T, ks *directSet) {
		r := rand.New(rand.NewPCG(21, 22))
		for _, g := range convParityShapes {
			checkConvParity(t, r, g)
		}
	})
}

// TestConvDirectGuardPages runs the direct convolution on inputs and outputs that end against
// (or start right after) an inaccessible page, for output widths around the 16-lane runs and
// tiles whose last runs are empty: a masked lane that touches a float outside its slice faults.
// Each result must be the implicit GEMM's bit for bit; widths that would leave more than a
// quarter of the lanes idle must be left to the GEMM.
func TestConvDirectGuardPages(t *testing.T) {
	eachDirectSet(t, func(t *testing.T, ks *directSet) {
		r := rand.New(rand.NewPCG(61, 62))
		for _, atStart := range []bool{false, true} {
			for w := 1; w <= 35; w++ {
				for _, k := range []int{1, 3} {
					g := ConvGeom{N: 1 + w%3, InC: 1 + w%2, InH: k + w%4, InW: w + k - 1, OutC: 8 * (1 + w%2), KH: k, KW: k, Stride: 1}
					// The kernel may read ks.slack floats past the input: they are in the
					// guarded span, and no further.
					buf := guarded(t, g.PaddedLen()+ks.slack, atStart)
					xpad := buf[:g.PaddedLen()]
					for i := range buf {
						buf[i] = r.Float32() - 0.5
					}
					wt, bias := randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
					n := g.N * g.OutC * g.ColCols()
					got, want := guarded(t, n, atStart), make([]float32, n)
					runs := (w + ks.lanes - 1) / ks.lanes
					if ok := convDirect(got, xpad, wt, bias, g); ok != (4*w >= 3*ks.lanes*runs) {
						t.Fatalf("%+v: direct %v", g, ok)
					} else if !ok {
						continue
					}
					src := newColSource(xpad, g)
					gemmConv(want, src, wt, bias, make([]float32, n), g)
					src.free()
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%+v: y[%d] = %v, implicit GEMM %v", g, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

// TestWeightGradDirectGuardPages runs the direct weight gradient on padded inputs and dy that end
// against (or start right after) an inaccessible page, for 3x3 and 5x5 kernels, strides 1 and 2
// and widths around the kernel: a read outside the input faults. Each result must match the
// implicit GEMM's to float32 rounding, and repeat bit for bit.
func TestWeightGradDirectGuardPages(t *testing.T) {
	eachDirectSet(t, func(t *testing.T, ks *directSet) {
		r := rand.New(rand.NewPCG(63, 64))
		for _, atStart := range []bool{false, true} {
			for _, k := range []int{3, 5} {
				for _, stride := range []int{1, 2} {
					for w := k; w <= k+9; w++ {
						g := ConvGeom{N: 1 + w%3, InC: 1 + w%2, InH: k + w%4, InW: w, OutC: 32 * (1 + w%2), KH: k, KW: k, Stride: stride, Pad: w % 2}
						xpad := guarded(t, g.PaddedLen(), atStart)
						for i := range xpad {
							xpad[i] = r.Float32() - 0.5
						}
						dy := guarded(t, g.N*g.OutC*g.ColCols(), atStart)
						for i := range dy {
							dy[i] = r.Float32() - 0.5
						}
						rows, nc := g.ColRows(), g.N*g.ColCols()
						scratch := make([]float32, (rows+g.OutC)*nc+parts*g.OutC*(g.ColCols()+rows))
						var got [2][]float32
						for i := range got {
							got[i] = make([]float32, g.OutC*rows)
							if !weightGradDirect(got[i], dy, xpad, scratch, g) {
								t.Fatalf("%+v: not direct", g)
							}
						}
						dyt, want := make([]float32, g.OutC*nc), make([]float32, g.OutC*rows)
						toColumns(dyt, dy, g)
						src := newColSource(xpad, g)
						gemm.SgemmSource(false, true, g.OutC, rows, nc, 1, dyt, nc, src, 0, want, rows)
						src.free()
						closeTo(t, "dw", got[0], to64(want), 1e-5)
						for i := range got[0] {
							if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
								t.Fatalf("%+v: dw[%d] = %v, then %v", g, i, got[0][i], got[1][i])
							}
						}
					}
				}
			}
		}
	})
}
