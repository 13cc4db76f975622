//go:build cuda

package kernels_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestCUDAPrecisionParity runs the products of TestCUDAParity (Gemm, Conv2D, Conv2DBackward)
// through the bf16 and fp16 op sets: the CUDA op set's GemmEx on converted operands must match the
// CPU op set's emulation of the same precision (the same rounded operands, fp32 sums in another
// order: within 1e-5), and the fp32 results within that precision's rounding (bf16 keeps 8
// significand bits, fp16 11: relative errors of about 2^-9 and 2^-12 per operand), but not to
// fp32's 1e-5, or nothing was rounded.
func TestCUDAPrecisionParity(t *testing.T) {
	cases := []parityCase{
		gemmCase(false, false, 37, 53, 29),
		gemmCase(true, false, 64, 10, 784),
		gemmCase(false, true, 128, 256, 512),
		gemmCase(true, true, 33, 17, 65),
		gemmCase(false, false, 5, 7, 0),
		convCase(kernels.Conv2D{N: 4, InC: 3, InH: 13, InW: 11, OutC: 8, KH: 3, KW: 3, Stride: 1, Pad: 1}),
		convCase(kernels.Conv2D{N: 2, InC: 5, InH: 16, InW: 16, OutC: 6, KH: 5, KW: 5, Stride: 2, Pad: 2}),
		convCase(kernels.Conv2D{N: 3, InC: 7, InH: 1, InW: 1, OutC: 9, KH: 1, KW: 1}),
	}
	gp, cp := openSide(t, "cuda"), openSide(t, "cpu")
	for _, p := range []struct {
		p   kernels.Precision
		tol float64 // against fp32
	}{{kernels.BF16, 1e-2}, {kernels.FP16, 2e-3}} {
		withP := func(sd *side) *side {
			ops, err := kernels.ForPrecision(sd.dev, p.p)
			if err != nil {
				t.Fatal(err)
			}
			return &side{sd.dev, sd.s, ops}
		}
		gpP, cpP := withP(gp), withP(cp)
		for i, tc := range cases {
			t.Run(string(p.p)+" "+tc.name, func(t *testing.T) {
				rnd := func() *rand.Rand { return rand.New(rand.NewPCG(uint64(i), 2)) }
				got := gpP.read(t, tc.run(t, gpP, rnd())...)
				emu := cpP.read(t, tc.run(t, cpP, rnd())...)
				fp32 := cp.read(t, tc.run(t, cp, rnd())...)
				e, e32 := relErr(got, emu), relErr(got, fp32)
				t.Logf("parity %s %q: relative error %g against the CPU's %s emulation, %g against fp32", p.p, tc.name, e, p.p, e32)
				if !(e <= 1e-5) {
					t.Errorf("relative error %g against the CPU's %s emulation; want <= 1e-5", e, p.p)
				}
				if !(e32 <= p.tol) {
					t.Errorf("relative error %g against fp32; want <= %g", e32, p.tol)
				}
				if tc.name != "gemm ta=false tb=false 5x7x0" && !(e32 > 1e-5) {
					t.Errorf("relative error %g against fp32: the operands were not rounded to %s", e32, p.p)
				}
			})
		}
	}
}
