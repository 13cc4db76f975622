//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestCUDAPrecisionRounding holds the CUDA op set's conversion kernel (to_x16) to the CPU
// emulation's rounding value for value: a product a x [1] with k = 1 is exact in fp32, so each
// element of the result is the rounded operand. The values cover NaN, ±Inf, ±0, fp32's
// subnormals, fp16's overflow threshold, subnormal range and ties, and random bit patterns over
// every exponent.
func TestCUDAPrecisionRounding(t *testing.T) {
	p2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	vals := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001), math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, p2(-130), 65504, 65519, 65519.998, 65520, -65520, 70000,
		p2(-14), p2(-14) - p2(-25), p2(-24), p2(-25), p2(-25) + p2(-40), -1.5 * p2(-24), 0.75 * p2(-24), 2.5 * p2(-24),
		1 + p2(-8), 1 + 3*p2(-8), 1 + p2(-11), 1 + 3*p2(-11), -3.1415927}
	r := rand.New(rand.NewPCG(41, 42))
	for range 4000 {
		vals = append(vals, math.Float32frombits(r.Uint32()))
	}
	gp, cp := openSide(t, "cuda"), openSide(t, "cpu")
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		var got [2][]float64
		for i, sd := range []*side{gp, cp} {
			ops, err := kernels.ForPrecision(sd.dev, p)
			check(t, err)
			a, b, c := sd.f32(t, vals), sd.f32(t, []float32{1}), f32Len(sd, t, len(vals))
			check(t, ops.Gemm(sd.s, false, false, len(vals), 1, 1, 1, a, b, 0, c))
			got[i] = sd.read(t, c)[0]
		}
		for i, v := range vals {
			g, w := got[0][i], got[1][i]
			if math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && g != w) {
				t.Errorf("%s: %g (bits %#08x) rounds to %g on CUDA, %g in the CPU emulation", p, v, math.Float32bits(v), g, w)
			}
		}
	}
}
