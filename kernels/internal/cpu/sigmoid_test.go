package cpu

import (
	"math"
	"testing"
)

// sigmoid64 is σ(x) in float64, without overflow.
func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// TestSigmoidAccuracy: sigmoid, silu and their gradients (sigmoidParts' values) within 4e-7
// relative of the float64 functions over [-87, 87] (silu' of its scale σ(x)·(1 + |x|·σ(-x)): it
// crosses 0 at -1.28), σ'(x) = σ(x)·σ(-x) in both tails too (no
// 1 - σ cancellation); below -87.33, where e^x underflows float32's normal range, 0 as PyTorch
// 2.x's float32 kernels give (σ(-100) = 0, silu(-100) = -0); at the edges: σ(±0) = 1/2, σ(+Inf)
// = 1, σ(-Inf) = 0, NaN for NaN.
func TestSigmoidAccuracy(t *testing.T) {
	var worst float64
	rel := func(what string, x float32, got float32, want, scale float64) {
		t.Helper()
		d := math.Abs(float64(got)-want) / scale
		worst = max(worst, d)
		if !(d <= 4e-7) {
			t.Fatalf("%s(%v) = %v; want %v (relative error %.3g)", what, x, got, want, d)
		}
	}
	for x := float32(-87); x <= 87; x += 0.000731 {
		s, tt := sigmoidParts(x)
		x64 := float64(x)
		s64, t64 := sigmoid64(x64), sigmoid64(-x64)
		rel("σ", x, s, s64, s64)
		rel("1-σ", x, tt, t64, t64)
		rel("σ'", x, s*tt, s64*t64, s64*t64)
		rel("silu", x, x*s, x64*s64, math.Abs(x64*s64))
		rel("silu'", x, s*(1+float32(x*tt)), s64*(1+x64*t64), s64*(1+math.Abs(x64)*t64))
	}
	t.Logf("worst relative error %.3g", worst)
	for _, tc := range []struct{ x, s, t float32 }{
		{0, 0.5, 0.5}, {float32(math.Copysign(0, -1)), 0.5, 0.5}, {-100, 0, 1}, {100, 1, 0}, {-1e30, 0, 1},
		{float32(math.Inf(1)), 1, 0}, {float32(math.Inf(-1)), 0, 1},
	} {
		if s, tt := sigmoidParts(tc.x); s != tc.s || tt != tc.t {
			t.Errorf("σ(%v), σ(-%v) = %v, %v; want %v, %v", tc.x, tc.x, s, tt, tc.s, tc.t)
		}
	}
	if s, tt := sigmoidParts(float32(math.NaN())); s == s || tt == tt {
		t.Errorf("σ(NaN) = %v, %v; want NaN", s, tt)
	}
}
