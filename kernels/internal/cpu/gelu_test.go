package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// geluEdges are the edge values of gelu's tests: zeros, tiny and subnormal, large, infinite
// and NaN, and the ends of e's range.
var geluEdges = []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-40, -1e-40, math.SmallestNonzeroFloat32,
	-math.SmallestNonzeroFloat32, 13.2, -13.2, 13.3, -13.3, 100, -100, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}

// gelu64 is x·Φ(x) and its derivative Φ(x) + x·φ(x) in float64, with s = Φ(x) + |x|·φ(x),
// the derivative's scale.
func gelu64(x float64) (y, dy, s float64) {
	phi, pdf := 0.5*math.Erfc(-x/math.Sqrt2), math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
	return x * phi, phi + x*pdf, phi + math.Abs(x)*pdf
}

// TestGELUAccuracy: gelu and geluGrad (the Go loop's values, normalCDF's) within 5e-7·(1+x²)
// relative of the float64 functions over [-14, 14] and at the edge values; below 1e-35 (e or
// t·s·e subnormal or 0, |x| > 13) within 1e-36, both; NaN for NaN, ±Inf's as PyTorch's formula
// gives them: gelu(+Inf) = +Inf, gelu(-Inf) = -Inf·0 = NaN, both derivatives NaN (x·φ(x)).
func TestGELUAccuracy(t *testing.T) {
	var xs []float32
	for x := float32(-14); x <= 14; x += 0.00137 {
		xs = append(xs, x)
	}
	xs = append(xs, geluEdges...)
	for _, x := range xs {
		phi, e := normalCDF(x)
		y, g := x*phi, phi+float32(x*float32(e*invSqrt2Pi))
		wy, wg, scale := gelu64(float64(x))
		switch xf := float64(x); {
		case math.IsNaN(xf):
			if y == y || g == g {
				t.Fatalf("gelu(NaN) = %v, gelu'(NaN) = %v; want NaN", y, g)
			}
			continue
		case math.IsInf(xf, 1):
			wy, wg = xf, math.NaN()
		case math.IsInf(xf, -1):
			wy, wg = math.NaN(), math.NaN()
		}
		if math.IsNaN(wy) || math.IsNaN(wg) || math.IsInf(wy, 0) {
			if !(y == float32(wy) || y != y && math.IsNaN(wy)) || !(g != g && math.IsNaN(wg)) {
				t.Fatalf("gelu(%v) = %v, gelu'(%v) = %v; want %v, %v", x, y, x, g, wy, wg)
			}
			continue
		}
		tol := 5e-7 * (1 + float64(x)*float64(x))
		if d := math.Abs(float64(y) - wy); d > tol*math.Abs(wy) && !(math.Abs(wy) < 1e-35 && d < 1e-36) {
			t.Fatalf("gelu(%v) = %v; want %v (relative error %.3g)", x, y, wy, d/math.Abs(wy))
		}
		if d := math.Abs(float64(g) - wg); d > tol*scale && !(scale < 1e-35 && d < 1e-36) {
			t.Fatalf("gelu'(%v) = %v; want %v (error %.3g of its scale)", x, g, wg, d/scale)
		}
	}
	if y, _ := normalCDF(float32(math.Copysign(0, -1))); y != 0.5 {
		t.Fatalf("Φ(-0) = %v; want 0.5", y)
	}
}

// TestFloat32UnarySIMD: gelu, sigmoid, silu and their gradients give their Go loops' values
// bit for bit (the assembly's blocks of 8 against the same kernel called on one value at a time,
// which the Go loop computes) over lengths around the vector width, with the edge values, in
// place too.
func TestFloat32UnarySIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for _, f := range []UnaryOp{FGELU, FSigmoid, FSiLU} {
		fwd, grad := float32Unary(f)
		for n := range 42 {
			x, dy := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], dy[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
				if r.IntN(4) == 0 {
					x[i] = geluEdges[r.IntN(len(geluEdges))]
				}
			}
			y, dx := make([]float32, n), make([]float32, n)
			fwd(y, x)
			grad(dx, dy, x)
			for i := range x {
				var wy, wg [1]float32
				fwd(wy[:], x[i:i+1])
				grad(wg[:], dy[i:i+1], x[i:i+1])
				if !same(y[i], wy[0]) || !same(dx[i], wg[0]) {
					t.Fatalf("op %d, n %d: f(%v) = %v, its gradient %v; want %v, %v", f, n, x[i], y[i], dx[i], wy[0], wg[0])
				}
			}
			in, ind := append([]float32(nil), x...), append([]float32(nil), dy...)
			fwd(in, in)
			grad(ind, ind, x)
			for i := range x {
				if !same(in[i], y[i]) || !same(ind[i], dx[i]) {
					t.Fatalf("op %d, n %d: in place [%d] = %v, %v; want %v, %v", f, n, i, in[i], ind[i], y[i], dx[i])
				}
			}
		}
	}
}
