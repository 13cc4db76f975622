//go:build cuda

package cuda

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// TestCUDAPrecisionParity runs the products of TestCUDAParity (Gemm, GemmStrided, Conv2D,
// Conv2DBackward) through the bf16 and fp16 op sets: the CUDA op set's GemmEx on converted
// operands must match the CPU op set's emulation of the same precision (the same rounded
// operands, fp32 sums in another order: within 1e-5), and the fp32 results within that
// precision's rounding (bf16 keeps 8 significand bits, fp16 11: relative errors of about 2^-9
// and 2^-12 per operand), but not to fp32's 1e-5, or nothing was rounded.
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
		gemmStridedCase(false, true, 2, 9, 11, 13, 130, 150, 110),
		gemmStridedCase(true, true, 5, 6, 3, 7, 42, 0, 18),
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
				// scripts/gpu-check.sh collects the first figure of these lines as TestCUDAParity's.
				t.Logf("parity %q: relative error %g (tolerance 1e-05, against the CPU's %s emulation; against fp32 %g, tolerance %g)",
					string(p.p)+" "+tc.name, e, p.p, e32, p.tol)
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

// TestCUDAPrecisionStaging exercises the per-stream staging memory of the bf16 op set: more
// streams than keep a block (eviction), products growing on one stream (a larger block once the
// stream has run), and two goroutines enqueueing on one stream at once. Every product must equal
// the CPU emulation's.
func TestCUDAPrecisionStaging(t *testing.T) {
	gp, cp := openSide(t, "cuda"), openSide(t, "cpu")
	gops, err := kernels.ForPrecision(gp.dev, kernels.BF16)
	check(t, err)
	cops, err := kernels.ForPrecision(cp.dev, kernels.BF16)
	check(t, err)
	r := rand.New(rand.NewPCG(7, 7))
	type product struct {
		m, n, k int
		a, b    []float32
	}
	want := func(p product) []float64 {
		sd := &side{cp.dev, cp.s, cops}
		c := f32Len(sd, t, p.m*p.n)
		check(t, cops.Gemm(cp.s, false, true, p.m, p.n, p.k, 1, sd.f32(t, p.a), sd.f32(t, p.b), 0, c))
		return cp.read(t, c)[0]
	}
	newProduct := func(m, n, k int) product { return product{m, n, k, randF32(r, m*k), randF32(r, n*k)} }
	streams := make([]gpu.Stream, 6)
	for i := range streams {
		streams[i], err = gp.dev.NewStream()
		check(t, err)
	}
	var mu sync.Mutex
	run := func(s gpu.Stream, ps []product) {
		sd := &side{gp.dev, s, gops}
		outs := make([]kernels.F32, len(ps))
		for i, p := range ps {
			a, b := sd.f32(t, p.a), sd.f32(t, p.b)
			outs[i] = f32Len(sd, t, p.m*p.n)
			if err := gops.Gemm(s, false, true, p.m, p.n, p.k, 1, a, b, 0, outs[i]); err != nil {
				t.Error(err)
				return
			}
		}
		for i, p := range ps {
			got := sd.read(t, outs[i])
			mu.Lock()
			w := want(p)
			mu.Unlock()
			if e := relErr(got, [][]float64{w}); !(e <= 1e-5) {
				t.Errorf("product %d (%dx%dx%d): relative error %g against the CPU's bf16 emulation", i, p.m, p.n, p.k, e)
			}
		}
	}
	// Six streams in turn, each with growing products, twice: blocks are evicted and regrown.
	for range 2 {
		for i, s := range streams {
			run(s, []product{newProduct(3+i, 5, 7), newProduct(40+i, 33, 65), newProduct(2, 2, 2)})
		}
	}
	// Two goroutines on one stream.
	var wg sync.WaitGroup
	for g := range 2 {
		ps := []product{newProduct(17+g, 19, 23), newProduct(31, 29+g, 37), newProduct(9, 11, 13+g)}
		wg.Add(1)
		go func() { defer wg.Done(); run(streams[0], ps) }()
	}
	wg.Wait()
}
