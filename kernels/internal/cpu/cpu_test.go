package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The float64 references below are the plain definitions; the float32 kernels must agree with
// them, and every gradient must agree with central finite differences of the reference.

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func to64(v []float32) []float64 {
	o := make([]float64, len(v))
	for i, x := range v {
		o[i] = float64(x)
	}
	return o
}

func closeTo(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len = %d; want %d", name, len(got), len(want))
	}
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if d > tol*(1+math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %v; want %v (tol %g)", name, i, got[i], want[i], tol)
		}
	}
}

// numGrad returns d/dx of f at x by central differences.
func numGrad(x []float64, f func([]float64) float64) []float64 {
	const h = 1e-5
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		fp := f(x)
		x[i] = old - h
		fm := f(x)
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

func dot64(a []float64, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func gemm64(ta, tb bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				av := a[i*k+l]
				if ta {
					av = a[l*m+i]
				}
				bv := b[l*n+j]
				if tb {
					bv = b[j*k+l]
				}
				s += av * bv
			}
			out[i*n+j] = alpha*s + beta*c[i*n+j]
		}
	}
	return out
}

func TestGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name        string
		ta, tb      bool
		m, n, k     int
		alpha, beta float32
	}{
		{"NN small", false, false, 3, 5, 7, 1, 0},
		{"TN", true, false, 17, 9, 33, 0.5, 1},
		{"NT", false, true, 70, 130, 65, -1, 0.25},
		{"TT parallel", true, true, 200, 150, 90, 2, 1},
		{"k=0 scales c", false, false, 4, 4, 0, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := randVec(r, tc.m*tc.k), randVec(r, tc.k*tc.n), randVec(r, tc.m*tc.n)
			want := gemm64(tc.ta, tc.tb, tc.m, tc.n, tc.k, float64(tc.alpha), to64(a), to64(b), float64(tc.beta), to64(c))
			Gemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, b, tc.beta, c)
			closeTo(t, "Gemm", c, want, 1e-4*float64(tc.k+1))
		})
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 100_000 // large enough for the parallel path
	x, y := randVec(r, n), randVec(r, n)
	t.Run("Axpy", func(t *testing.T) {
		yy := append([]float32(nil), y...)
		want := make([]float64, n)
		for i := range want {
			want[i] = float64(y[i]) + 0.3*float64(x[i])
		}
		Axpy(yy, 0.3, x)
		closeTo(t, "Axpy", yy, want, 1e-6)
	})
	t.Run("Scale", func(t *testing.T) {
		xx := append([]float32(nil), x...)
		want := make([]float64, n)
		for i := range want {
			want[i] = -2.5 * float64(x[i])
		}
		Scale(xx, -2.5)
		closeTo(t, "Scale", xx, want, 1e-6)
	})
	t.Run("Mul", func(t *testing.T) {
		z := make([]float32, n)
		want := make([]float64, n)
		for i := range want {
			want[i] = float64(x[i]) * float64(y[i])
		}
		Mul(z, x, y)
		closeTo(t, "Mul", z, want, 1e-6)
	})
	t.Run("Fill", func(t *testing.T) {
		z := make([]float32, 10)
		Fill(z, 7)
		for i, v := range z {
			if v != 7 {
				t.Fatalf("Fill: z[%d] = %v; want 7", i, v)
			}
		}
	})
}

func TestReLU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x, dy := randVec(r, 1000), randVec(r, 1000)
	y := make([]float32, len(x))
	ReLU(y, x)
	for i := range x {
		if want := math.Max(float64(x[i]), 0); float64(y[i]) != want {
			t.Fatalf("ReLU(%v) = %v; want %v", x[i], y[i], want)
		}
	}
	dx := make([]float32, len(x))
	ReLUGrad(dx, dy, y)
	f := func(v []float64) float64 {
		var s float64
		for i, xv := range v {
			s += math.Max(xv, 0) * float64(dy[i])
		}
		return s
	}
	closeTo(t, "ReLUGrad", dx, numGrad(to64(x), f), 1e-4)
}

// TestReLUSpecial holds ReLU and ReLUGrad (the AVX2 loop on 32-element blocks, the branch-free Go
// loop on the rest) to the plain definitions (x > 0 ? x : 0 and y > 0 ? dy : 0) bit for bit, on
// the values where a bit trick or an instruction's NaN rule could go wrong.
func TestReLUSpecial(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	special := []float32{0, float32(math.Copysign(0, -1)), nan, -nan, inf, -inf, 1, -1,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32,
		math.Float32frombits(0x7f7fffff), math.Float32frombits(0x7f800001), math.Float32frombits(0xff800001)}
	var x []float32
	for range 9 { // 135 values: four assembly blocks and a tail, with every value in both
		x = append(x, special...)
	}
	y := make([]float32, len(x))
	ReLU(y, x)
	dy := make([]float32, len(x))
	for i := range dy {
		dy[i] = float32(i) + 0.5
	}
	dx := make([]float32, len(x))
	ReLUGrad(dx, dy, x)
	for i, v := range x {
		want, wantDx := float32(0), float32(0)
		if v > 0 {
			want, wantDx = v, dy[i]
		}
		if math.Float32bits(y[i]) != math.Float32bits(want) {
			t.Errorf("ReLU(%v [%#x]) = %v [%#x]; want %v", v, math.Float32bits(v), y[i], math.Float32bits(y[i]), want)
		}
		if math.Float32bits(dx[i]) != math.Float32bits(wantDx) {
			t.Errorf("ReLUGrad(dy %v, y %v) = %v; want %v", dy[i], v, dx[i], wantDx)
		}
	}
}

func TestBias(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	outer, c, inner := 5, 3, 7
	x, bias, dy := randVec(r, outer*c*inner), randVec(r, c), randVec(r, outer*c*inner)
	want := make([]float64, len(x))
	for i := range want {
		want[i] = float64(x[i]) + float64(bias[(i/inner)%c])
	}
	BiasAdd(x, bias, outer, inner)
	closeTo(t, "BiasAdd", x, want, 1e-6)
	// A linear layer's bias (inner 1, rows added with the assembly): each element one float32
	// addition, as the plain loop.
	lx, lb := randVec(r, 9*45), randVec(r, 45)
	lwant := make([]float32, len(lx))
	for i, v := range lx {
		lwant[i] = v + lb[i%45]
	}
	BiasAdd(lx, lb, 9, 1)
	for i := range lx {
		if math.Float32bits(lx[i]) != math.Float32bits(lwant[i]) {
			t.Fatalf("BiasAdd inner 1: [%d] = %v; want %v", i, lx[i], lwant[i])
		}
	}
	db := make([]float32, c)
	BiasGrad(db, dy, outer, inner)
	f := func(b []float64) float64 {
		var s float64
		for i := range dy {
			s += b[(i/inner)%c] * float64(dy[i])
		}
		return s
	}
	closeTo(t, "BiasGrad", db, numGrad(to64(bias), f), 1e-5)
	// A linear layer's bias gradient (inner 1; channel counts whose parts hold blocks of 8 and a
	// rest): each channel its rows' float64 sum in row order, rounded once.
	for _, lc := range []int{3, 45, 150} {
		ly := randVec(r, 37*lc)
		ldb := make([]float32, lc)
		BiasGrad(ldb, ly, 37, 1)
		for ch := range ldb {
			var s float64
			for o := range 37 {
				s += float64(ly[o*lc+ch])
			}
			if ldb[ch] != float32(s) {
				t.Fatalf("BiasGrad inner 1, %d channels: [%d] = %v; want %v", lc, ch, ldb[ch], float32(s))
			}
		}
	}
}

func ce64(logits []float64, labels []int32, n, classes int) float64 {
	var loss float64
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		mx := row[0]
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		loss += math.Log(s) + mx - row[labels[i]]
	}
	return loss / float64(n)
}

func TestSoftmaxCrossEntropy(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name       string
		n, classes int
		scale      float32
	}{
		{"small", 4, 10, 1},
		{"wide", 33, 100, 3},
		{"huge logits stay finite", 3, 5, 1e4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logits := randVec(r, tc.n*tc.classes)
			for i := range logits {
				logits[i] *= tc.scale
			}
			labels := make([]int32, tc.n)
			for i := range labels {
				labels[i] = int32(r.IntN(tc.classes))
			}
			d := make([]float32, len(logits))
			loss, bad := SoftmaxCrossEntropy(d, logits, labels, tc.n, tc.classes, 0)
			if bad != -1 {
				t.Fatalf("bad = %d; want -1", bad)
			}
			want := ce64(to64(logits), labels, tc.n, tc.classes)
			if math.Abs(loss-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("loss = %v; want %v", loss, want)
			}
			if tc.scale > 100 {
				return // finite differences are meaningless at this scale; the loss check is the point
			}
			g := numGrad(to64(logits), func(v []float64) float64 { return ce64(v, labels, tc.n, tc.classes) })
			closeTo(t, "dlogits", d, g, 1e-4)
		})
	}
	t.Run("label out of range", func(t *testing.T) {
		d := make([]float32, 6)
		if _, bad := SoftmaxCrossEntropy(d, make([]float32, 6), []int32{0, 3}, 2, 3, 0); bad != 1 {
			t.Fatalf("bad = %d; want 1", bad)
		}
	})
}

func TestArgmaxCorrect(t *testing.T) {
	logits := []float32{1, 3, 3, 0, -1, -2, 5, 5, 5}
	dst := make([]int32, 3)
	Argmax(dst, logits, 3, 3)
	for i, want := range []int32{1, 0, 0} {
		if dst[i] != want {
			t.Fatalf("Argmax row %d = %d; want %d", i, dst[i], want)
		}
	}
	if got := Correct(logits, []int32{1, 2, 0}, 3, 3); got != 2 {
		t.Fatalf("Correct = %d; want 2", got)
	}
}

func TestNormalizeU8(t *testing.T) {
	src := []uint8{0, 255, 128, 10, 20, 30, 40, 50}
	dst := make([]float32, len(src))
	mean, std := []float32{0.5, 0.25}, []float32{0.5, 2}
	NormalizeU8(dst, src, 2, 2, mean, std)
	want := make([]float64, len(src))
	for i, v := range src {
		c := (i / 2) % 2
		want[i] = (float64(v)/255 - float64(mean[c])) / float64(std[c])
	}
	closeTo(t, "NormalizeU8", dst, want, 1e-6)
	NormalizeU8(dst, src, 2, 2, nil, nil)
	for i, v := range src {
		want[i] = float64(v) / 255
	}
	closeTo(t, "NormalizeU8 no mean/std", dst, want, 1e-6)
}

func conv64(x, w, b []float64, g ConvGeom) []float64 {
	oh, ow := g.OutH(), g.OutW()
	y := make([]float64, g.N*g.OutC*oh*ow)
	for n := range g.N {
		for o := range g.OutC {
			for yy := range oh {
				for xx := range ow {
					s := 0.0
					if b != nil {
						s = b[o]
					}
					for c := range g.InC {
						for i := range g.KH {
							for j := range g.KW {
								iy, ix := yy*g.Stride-g.Pad+i, xx*g.Stride-g.Pad+j
								if iy < 0 || iy >= g.InH || ix < 0 || ix >= g.InW {
									continue
								}
								s += x[((n*g.InC+c)*g.InH+iy)*g.InW+ix] * w[((o*g.InC+c)*g.KH+i)*g.KW+j]
							}
						}
					}
					y[((n*g.OutC+o)*oh+yy)*ow+xx] = s
				}
			}
		}
	}
	return y
}

func TestConv2D(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name string
		g    ConvGeom
	}{
		{"5x5 pad 2", ConvGeom{N: 2, InC: 2, InH: 6, InW: 7, OutC: 3, KH: 5, KW: 5, Stride: 1, Pad: 2}},
		{"3x3 stride 2 no pad", ConvGeom{N: 3, InC: 3, InH: 9, InW: 8, OutC: 2, KH: 3, KW: 3, Stride: 2, Pad: 0}},
		{"1x1", ConvGeom{N: 1, InC: 4, InH: 3, InW: 3, OutC: 5, KH: 1, KW: 1, Stride: 1, Pad: 0}},
		{"padding wider than the output", ConvGeom{N: 2, InC: 1, InH: 2, InW: 2, OutC: 2, KH: 7, KW: 7, Stride: 1, Pad: 3}},
		// Direct kernels on AVX-512: y and the weight gradient (5x5, and 3x3 stride 2), and
		// dx by the flipped convolution (its output channels, InC, in eights).
		{"direct 5x5", ConvGeom{N: 2, InC: 1, InH: 5, InW: 6, OutC: 32, KH: 5, KW: 5, Stride: 1, Pad: 2}},
		{"direct 3x3 stride 2", ConvGeom{N: 2, InC: 2, InH: 7, InW: 6, OutC: 32, KH: 3, KW: 3, Stride: 2, Pad: 1}},
		{"direct dx", ConvGeom{N: 2, InC: 8, InH: 4, InW: 5, OutC: 3, KH: 3, KW: 3, Stride: 1, Pad: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			x := randVec(r, g.N*g.InC*g.InH*g.InW)
			w := randVec(r, g.OutC*g.InC*g.KH*g.KW)
			b := randVec(r, g.OutC)
			outLen := g.N * g.OutC * g.OutH() * g.OutW()
			y := make([]float32, outLen)
			ws := make([]float32, g.WorkspaceLen())
			Conv2D(y, x, w, b, ws, g)
			closeTo(t, "Conv2D", y, conv64(to64(x), to64(w), to64(b), g), 1e-4)

			dy := randVec(r, outLen)
			dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(b))
			Conv2DBackward(dx, dw, db, dy, w, ws, g)
			dy64 := to64(dy)
			closeTo(t, "dx", dx, numGrad(to64(x), func(v []float64) float64 { return dot64(conv64(v, to64(w), to64(b), g), dy64) }), 1e-4)
			closeTo(t, "dw", dw, numGrad(to64(w), func(v []float64) float64 { return dot64(conv64(to64(x), v, to64(b), g), dy64) }), 1e-4)
			closeTo(t, "db", db, numGrad(to64(b), func(v []float64) float64 { return dot64(conv64(to64(x), to64(w), v, g), dy64) }), 1e-4)
		})
	}
}

// TestConv2DImplicitParity holds Conv2D and Conv2DBackward (the column matrix packed straight
// from a padded copy of x, twice; dx a few samples at a time; on AVX-512, the direct kernel for
// y and for dx by the flipped convolution) to the plain convolution (im2col written out once,
// then multiplied): y, dx, dw and db bit for bit (y and dx within 1e-4 where Winograd computes
// them, and dw by the direct weight gradient), on the shapes of the CNN and the ResNets, with
// batches large enough for the multiplies to run on several goroutines and for GEMM blocks to
// start in the middle of a sample or a row.
func TestConv2DImplicitParity(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, g := range convParityShapes {
		checkConvParity(t, r, g)
	}
}

// convParityShapes are TestConv2DImplicitParity's geometries.
var convParityShapes = []ConvGeom{
	{N: 3, InC: 2, InH: 6, InW: 7, OutC: 3, KH: 5, KW: 5, Stride: 1, Pad: 2},
	{N: 2, InC: 1, InH: 2, InW: 2, OutC: 2, KH: 7, KW: 7, Stride: 1, Pad: 3},
	{N: 9, InC: 1, InH: 28, InW: 28, OutC: 32, KH: 5, KW: 5, Stride: 1, Pad: 2},
	{N: 5, InC: 32, InH: 14, InW: 14, OutC: 64, KH: 5, KW: 5, Stride: 1, Pad: 2},
	{N: 4, InC: 16, InH: 16, InW: 16, OutC: 24, KH: 3, KW: 3, Stride: 1, Pad: 1},
	{N: 4, InC: 16, InH: 15, InW: 16, OutC: 24, KH: 3, KW: 3, Stride: 2, Pad: 1},
	{N: 3, InC: 3, InH: 20, InW: 21, OutC: 8, KH: 7, KW: 7, Stride: 2, Pad: 3},
	{N: 6, InC: 40, InH: 4, InW: 4, OutC: 36, KH: 1, KW: 1, Stride: 1, Pad: 0},
	{N: 5, InC: 24, InH: 8, InW: 8, OutC: 40, KH: 1, KW: 1, Stride: 2, Pad: 0},
	{N: 7, InC: 34, InH: 16, InW: 16, OutC: 8, KH: 3, KW: 3, Stride: 1, Pad: 1}, // dx in chunks of 3, 3, 1
	// Edges: one sample, odd sizes under stride 2 and 3, non-square kernels (3x1 takes the
	// whole-plane path of 1x1 ones), unpadded kernels, batches the dx chunks do not divide.
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
	// Patches (toPatches): a ViT's, and padded ones that leave a partial tile out.
	{N: 9, InC: 3, InH: 28, InW: 28, OutC: 32, KH: 7, KW: 7, Stride: 7, Pad: 0},
	{N: 2, InC: 2, InH: 10, InW: 11, OutC: 5, KH: 4, KW: 4, Stride: 4, Pad: 1},
	{N: 11, InC: 32, InH: 16, InW: 16, OutC: 40, KH: 3, KW: 3, Stride: 1, Pad: 1}, // dx chunks of 3, 3, 3, 2
	{N: 13, InC: 64, InH: 9, InW: 9, OutC: 9, KH: 3, KW: 3, Stride: 1, Pad: 1},    // dx chunks of 5, 5, 3
	{N: 5, InC: 1, InH: 33, InW: 31, OutC: 1, KH: 7, KW: 7, Stride: 2, Pad: 3},
	// Winograd on AVX-512 for y and dx (64 and 72 channels; unpadded; odd sizes), not with 40
	// input channels (in the builds without assembly: all four).
	{N: 5, InC: 64, InH: 8, InW: 6, OutC: 72, KH: 3, KW: 3, Stride: 1, Pad: 1},
	{N: 3, InC: 64, InH: 4, InW: 4, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 0},
	{N: 3, InC: 40, InH: 2, InW: 2, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1},
	{N: 2, InC: 64, InH: 7, InW: 5, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1},
}

// checkConvParity is TestConv2DImplicitParity for one geometry.
func checkConvParity(t *testing.T, r *rand.Rand, g ConvGeom) {
	t.Helper()
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
		ws[i] = float32(math.NaN()) // whatever the workspace held must not matter
	}
	Conv2D(ys[1], x, w, b, ws, g)
	Conv2DBackward(dxs[1], dws[1], dbs[1], dy, w, ws, g)
	scratch := (g.ColRows() + g.OutC) * g.N * g.ColCols()
	if directWeightGrad(g, scratch) {
		// The direct weight gradient sums in another order: close, not equal.
		closeTo(t, fmt.Sprintf("%+v: dw", g), dws[1], to64(dws[0]), 1e-4)
		dws[1] = dws[0]
	}
	// Winograd rounds differently from the direct sum: close, not equal.
	if winograd(g.padded()) {
		closeTo(t, fmt.Sprintf("%+v: Winograd y", g), ys[1], to64(ys[0]), 1e-4)
		ys[1] = ys[0]
	}
	if dg, ok := dxConv(g, scratch); ok && winograd(dg.padded()) {
		closeTo(t, fmt.Sprintf("%+v: Winograd dx", g), dxs[1], to64(dxs[0]), 1e-4)
		dxs[1] = dxs[0]
	}
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

func pool64(x []float64, g PoolGeom) []float64 {
	oh, ow := g.OutH(), g.OutW()
	y := make([]float64, g.N*g.C*oh*ow)
	for p := range g.N * g.C {
		for yy := range oh {
			for xx := range ow {
				m := math.Inf(-1)
				for i := range g.K {
					for j := range g.K {
						iy, ix := yy*g.Stride-g.Pad+i, xx*g.Stride-g.Pad+j
						if iy >= 0 && iy < g.H && ix >= 0 && ix < g.W {
							m = math.Max(m, x[p*g.H*g.W+iy*g.W+ix])
						}
					}
				}
				y[(p*oh+yy)*ow+xx] = m
			}
		}
	}
	return y
}

func TestMaxPool2D(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		name string
		g    PoolGeom
	}{
		{"2x2", PoolGeom{N: 2, C: 3, H: 6, W: 8, K: 2, Stride: 2}},
		{"3x3 stride 2 overlapping, odd edge", PoolGeom{N: 1, C: 2, H: 7, W: 6, K: 3, Stride: 2}},
		{"3x3 stride 2 pad 1 (ResNet stem)", PoolGeom{N: 2, C: 2, H: 8, W: 7, K: 3, Stride: 2, Pad: 1}},
		{"2x2 stride 1 pad 1", PoolGeom{N: 1, C: 1, H: 3, W: 4, K: 2, Stride: 1, Pad: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			x := randVec(r, g.N*g.C*g.H*g.W)
			n := g.N * g.C * g.OutH() * g.OutW()
			y, arg := make([]float32, n), make([]int32, n)
			MaxPool2D(y, arg, x, g)
			closeTo(t, "MaxPool2D", y, pool64(to64(x), g), 0)
			dy := randVec(r, n)
			dx := make([]float32, len(x))
			MaxPool2DBackward(dx, dy, arg, g)
			closeTo(t, "dx", dx, numGrad(to64(x), func(v []float64) float64 { return dot64(pool64(v, g), to64(dy)) }), 1e-4)
		})
	}
}

// TestMaxPool2x2Parity holds the 2x2 stride-2 fast path to the general window loop, maxima and
// argmax positions bit for bit, on planes with ties, NaN, -0 and an odd edge.
func TestMaxPool2x2Parity(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for trial := range 60 {
		h, w := 9, []int{11, 28, 41}[trial%3] // outputs per row: 5 (Go), 14 and 20 (assembly, the last block overlapping)
		g := PoolGeom{N: 1, C: 1, H: h, W: w, K: 2, Stride: 2}
		oh, ow := g.OutH(), g.OutW()
		plane := make([]float32, h*w)
		for i := range plane {
			switch r.IntN(6) {
			case 0:
				plane[i] = float32(math.NaN())
			case 1:
				plane[i] = float32(math.Copysign(0, -1))
			case 2:
				plane[i] = 0
			default:
				plane[i] = float32(r.IntN(3) - 1) // many ties
			}
		}
		y, arg := make([]float32, oh*ow), make([]int32, oh*ow)
		wantY, wantArg := make([]float32, oh*ow), make([]int32, oh*ow)
		maxPool2x2(y, arg, plane, w, oh, ow)
		maxPoolPlaneRef(wantY, wantArg, plane, g, oh, ow)
		for i := range y {
			if math.Float32bits(y[i]) != math.Float32bits(wantY[i]) || arg[i] != wantArg[i] {
				t.Fatalf("trial %d output %d: %v at %d; want %v at %d", trial, i, y[i], arg[i], wantY[i], wantArg[i])
			}
		}
	}
}

func TestDropout(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	x := randVec(r, 100_000)
	y, mask := make([]float32, len(x)), make([]float32, len(x))
	Dropout(y, mask, x, 0.25, 42)
	dropped := 0
	for i := range x {
		switch mask[i] {
		case 0:
			dropped++
		case 1 / 0.75:
		default:
			t.Fatalf("mask[%d] = %v; want 0 or %v", i, mask[i], 1/0.75)
		}
		if y[i] != x[i]*mask[i] {
			t.Fatalf("y[%d] = %v; want %v", i, y[i], x[i]*mask[i])
		}
	}
	if frac := float64(dropped) / float64(len(x)); math.Abs(frac-0.25) > 0.01 {
		t.Fatalf("dropped fraction = %v; want 0.25±0.01", frac)
	}
	y2, mask2 := make([]float32, len(x)), make([]float32, len(x))
	Dropout(y2, mask2, x, 0.25, 42)
	for i := range mask {
		if mask[i] != mask2[i] {
			t.Fatalf("mask differs at %d for the same seed", i)
		}
	}
	Dropout(y2, mask2, x, 0.25, 43)
	same := 0
	for i := range mask {
		if mask[i] == mask2[i] {
			same++
		}
	}
	if same == len(mask) {
		t.Fatalf("masks of seeds 42 and 43 are identical")
	}
}

func TestSGD(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lr, mom, wd float32
		nesterov    bool
	}{
		{"plain", 0.1, 0, 0, false},
		{"momentum wd", 0.05, 0.9, 1e-2, false},
		{"nesterov", 0.05, 0.9, 1e-3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, 18))
			w, v := randVec(r, 50), randVec(r, 50)
			w64, v64 := to64(w), to64(v)
			for range 3 {
				g := randVec(r, 50)
				SGD(w, g, v, tc.lr, tc.mom, tc.wd, tc.nesterov)
				for i := range w64 {
					d := float64(g[i]) + float64(tc.wd)*w64[i]
					if tc.mom != 0 {
						v64[i] = float64(tc.mom)*v64[i] + d
						if tc.nesterov {
							d += float64(tc.mom) * v64[i]
						} else {
							d = v64[i]
						}
					}
					w64[i] -= float64(tc.lr) * d
				}
			}
			closeTo(t, "w", w, w64, 1e-5)
			if tc.mom != 0 {
				closeTo(t, "v", v, v64, 1e-5)
			}
		})
	}
}

// TestSGDSIMD: SGD over lengths whose parts (For's) are around the vector width and above gives,
// bit for bit, what it gives one value at a time (the Go loop), in each of its modes, v untouched and nil with momentum 0 (or
// -0).
func TestSGDSIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, mom := range []float32{0, float32(math.Copysign(0, -1)), 0.9} {
		for _, nesterov := range []bool{false, true} {
			for _, n := range []int{0, 5, 127, 130, 257, 1000, 4099} {
				w, g, v := randVec(r, n), randVec(r, n), randVec(r, n)
				w1, v1 := slices.Clone(w), slices.Clone(v)
				vs := v
				if mom == 0 {
					vs = nil
				}
				SGD(w, g, vs, 0.05, mom, 1e-2, nesterov)
				for i := range n {
					SGD(w1[i:i+1], g[i:i+1], v1[i:i+1], 0.05, mom, 1e-2, nesterov)
				}
				for i := range n {
					if w[i] != w1[i] || v[i] != v1[i] {
						t.Fatalf("momentum %v, nesterov %v, n %d: w[%d] %v, v[%d] %v; one at a time %v, %v", mom, nesterov, n, i, w[i], i, v[i], w1[i], v1[i])
					}
				}
			}
		}
	}
}

// TestAdamW: AdamW's steps against torch.optim.AdamW's formula in float64, plain and with
// AMSGrad, over a gradient that shrinks each step so that vmax holds an earlier, larger v.
func TestAdamW(t *testing.T) {
	for _, amsgrad := range []bool{false, true} {
		r := rand.New(rand.NewPCG(19, 20))
		const n = 40
		w, g := randVec(r, n), randVec(r, n)
		m, v := make([]float32, n), make([]float32, n)
		var vmax []float32
		if amsgrad {
			vmax = make([]float32, n)
		}
		w64, m64, v64, vmax64 := to64(w), make([]float64, n), make([]float64, n), make([]float64, n)
		lr, b1, b2, eps, wd := 1e-2, 0.9, 0.999, 1e-8, 0.01
		for step := 1; step <= 6; step++ {
			AdamW(w, g, m, v, vmax, float32(lr), b1, b2, float32(eps), float32(wd), step)
			c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
			for i := range w64 {
				gi := float64(g[i])
				w64[i] *= 1 - lr*wd
				m64[i] = b1*m64[i] + (1-b1)*gi
				v64[i] = b2*v64[i] + (1-b2)*gi*gi
				d := v64[i]
				if amsgrad {
					vmax64[i] = max(vmax64[i], v64[i])
					d = vmax64[i]
				}
				w64[i] -= lr / c1 * m64[i] / (math.Sqrt(d)/math.Sqrt(c2) + eps)
			}
			for i := range g {
				g[i] *= 0.25
			}
		}
		closeTo(t, "w", w, w64, 1e-6)
		closeTo(t, "m", m, m64, 1e-6)
		closeTo(t, "v", v, v64, 1e-6)
		if amsgrad {
			closeTo(t, "vmax", vmax, vmax64, 1e-6)
			if v[0] >= vmax[0] {
				t.Fatalf("amsgrad: v[0] %v, vmax[0] %v; the test's gradient should leave the max above v", v[0], vmax[0])
			}
		}
	}
}

func TestRMSprop(t *testing.T) {
	for _, tc := range []struct {
		name                string
		alpha, eps, wd, mom float64
		centered            bool
	}{
		{"plain", 0.99, 1e-8, 0, 0, false},
		{"momentum wd", 0.9, 0.0316, 1e-2, 0.9, false},
		{"centered", 0.9, 1e-3, 1e-3, 0.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(21, 22))
			const n, lr = 40, 1e-2
			w := randVec(r, n)
			sq, b, ga := make([]float32, n), make([]float32, n), make([]float32, n)
			w64, sq64, b64, ga64 := to64(w), make([]float64, n), make([]float64, n), make([]float64, n)
			for range 4 {
				g := randVec(r, n)
				RMSprop(w, g, sq, b, ga, lr, tc.alpha, float32(tc.eps), float32(tc.wd), float32(tc.mom), tc.centered)
				for i := range w64 {
					d := float64(g[i]) + tc.wd*w64[i]
					sq64[i] = tc.alpha*sq64[i] + (1-tc.alpha)*d*d
					v := sq64[i]
					if tc.centered {
						ga64[i] = tc.alpha*ga64[i] + (1-tc.alpha)*d
						v -= ga64[i] * ga64[i]
					}
					u := d / (math.Sqrt(v) + tc.eps)
					if tc.mom != 0 {
						b64[i] = tc.mom*b64[i] + u
						u = b64[i]
					}
					w64[i] -= lr * u
				}
			}
			closeTo(t, "w", w, w64, 1e-5)
			closeTo(t, "sq", sq, sq64, 1e-5)
		})
	}
}

func TestForCoversRangeOnce(t *testing.T) {
	for _, n := range []int{1, 7, 16, 17, 1000} {
		hits := make([]int32, n)
		For(n, 1<<20, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				hits[i]++
			}
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("For(%d): index %d visited %d times; want 1", n, i, h)
			}
		}
	}
}

// TestRows holds copyRows, copyRows2 and addRows (assembly where the CPU has AVX2) to the Go
// loops bit for bit, on widths around the 8-float blocks and strides wider than the rows (for
// copyRows2, the last row ends where the slice does, so its last block is left to Go).
func TestRows(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, w := range []int{1, 2, 4, 7, 8, 9, 14, 16, 17, 28, 33} {
		n, ds, ss := 5, w+3, w+5
		src := randVec(r, (n-1)*ss+w)
		base := randVec(r, (n-1)*ds+w)
		got, want := append([]float32(nil), base...), append([]float32(nil), base...)
		copyRows(got, src, n, w, ds, ss)
		copyRowsGo(want, src, n, w, ds, ss)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("copyRows w=%d: [%d] = %v; want %v", w, i, got[i], want[i])
			}
		}
		src2 := randVec(r, (n-1)*(2*w+1)+2*w-1) // every other value, rows 2w+1 apart
		got, want = append([]float32(nil), base...), append([]float32(nil), base...)
		copyRows2(got, src2, n, w, ds, 2*w+1)
		copyRows2Go(want, src2, n, w, ds, 2*w+1)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("copyRows2 w=%d: [%d] = %v; want %v", w, i, got[i], want[i])
			}
		}
		got, want = append([]float32(nil), base...), append([]float32(nil), base...)
		addRows(got, src, n, w, ds, ss)
		addRowsGo(want, src, n, w, ds, ss)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("addRows w=%d: [%d] = %v; want %v", w, i, got[i], want[i])
			}
		}
	}
}

// TestAddConst holds addConst (AVX2 on blocks of 32) to the Go loop bit for bit, on lengths
// around the blocks.
func TestAddConst(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, n := range []int{1, 31, 32, 33, 64, 100, 196, 784} {
		src, dst := randVec(r, n), make([]float32, n)
		addConst(dst, src, 0.375)
		for i, v := range src {
			if want := v + 0.375; math.Float32bits(dst[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d: [%d] = %v; want %v", n, i, dst[i], want)
			}
		}
	}
}
