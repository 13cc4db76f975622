package kernels_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// The ops of the differentiable core against float64 references written out here, independently
// of the CPU kernels.

func randoms(n int, seed uint64, lo, hi float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return out
}

// near fails t when got[i] and want[i] differ by more than tol*(1+|want[i]|).
func near(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values; want %d", what, len(got), len(want))
	}
	for i, w := range want {
		if g := float64(got[i]); !(math.Abs(g-w) <= tol*(1+math.Abs(w))) {
			t.Fatalf("%s[%d] = %v; want %v", what, i, g, w)
		}
	}
}

// eachIndex calls fn with every index of shape, in row-major order.
func eachIndex(shape []int, fn func(idx []int)) {
	idx := make([]int, len(shape))
	for {
		fn(idx)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

func dot(idx, strides []int) int {
	o := 0
	for d, i := range idx {
		o += i * strides[d]
	}
	return o
}

func packed(shape []int) []int {
	st := make([]int, len(shape))
	p := 1
	for d := len(shape) - 1; d >= 0; d-- {
		st[d], p = p, p*shape[d]
	}
	return st
}

func numel(shape []int) int {
	n := 1
	for _, v := range shape {
		n *= v
	}
	return n
}

// unaryRefs are the functions of Unary in float64, as PyTorch defines them.
var unaryRefs = map[kernels.UnaryFunc]func(float64) float64{
	kernels.Exp:     math.Exp,
	kernels.Log:     math.Log,
	kernels.Sqrt:    math.Sqrt,
	kernels.Rsqrt:   func(x float64) float64 { return math.Pow(x, -0.5) },
	kernels.Sigmoid: func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	kernels.Tanh:    math.Tanh,
	kernels.GELU:    func(x float64) float64 { return x * 0.5 * math.Erfc(-x/math.Sqrt2) },
	kernels.GELUTanh: func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	},
	kernels.SiLU: func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	kernels.Hardswish: func(x float64) float64 {
		switch {
		case x <= -3:
			return 0
		case x >= 3:
			return x
		}
		return x * (x + 3) / 6
	},
	kernels.Hardsigmoid: func(x float64) float64 { return math.Min(math.Max(x+3, 0), 6) / 6 },
	kernels.ReLU6:       func(x float64) float64 { return math.Min(math.Max(x, 0), 6) },
}

// TestUnary: every UnaryFunc computes its function (to float32's precision) and UnaryGrad its
// derivative, the central finite difference of the function, away from the kinks; at the kinks
// the derivative is PyTorch's; y may be x and dx may be dy.
func TestUnary(t *testing.T) {
	e := newEnv(t)
	if len(unaryRefs) != int(kernels.ReLU6) {
		t.Fatalf("%d reference functions for %d UnaryFuncs", len(unaryRefs), kernels.ReLU6)
	}
	for f := kernels.Exp; f <= kernels.ReLU6; f++ {
		t.Run(f.String(), func(t *testing.T) {
			ref := unaryRefs[f]
			var xs []float32
			for i := range 200 {
				v := -6.5 + 0.0653*float64(i)
				if f == kernels.Log || f == kernels.Sqrt || f == kernels.Rsqrt {
					v = 0.05 + 0.02*float64(i)
				}
				if slices.ContainsFunc([]float64{-3, 0, 3, 6}, func(k float64) bool { return math.Abs(v-k) < 1e-3 }) {
					continue
				}
				xs = append(xs, float32(v))
			}
			dys := randoms(len(xs), uint64(f), -2, 2)
			x, y := e.f32(t, xs...), e.f32(t, make([]float32, len(xs))...)
			noErr(t, e.ops.Unary(e.s, f, y, x))
			want := make([]float64, len(xs))
			for i, v := range xs {
				want[i] = ref(float64(v))
			}
			near(t, "y", e.read(t, y), want, 2e-6)

			dx, dy := e.f32(t, make([]float32, len(xs))...), e.f32(t, dys...)
			noErr(t, e.ops.UnaryGrad(e.s, f, dx, dy, x))
			const h = 1e-5
			for i, v := range xs {
				x := float64(v)
				want[i] = float64(dys[i]) * (ref(x+h) - ref(x-h)) / (2 * h)
			}
			got := e.read(t, dx)
			near(t, "dx", got, want, 1e-5)

			// In place: the same values.
			noErr(t, e.ops.UnaryGrad(e.s, f, dy, dy, x))
			if g := e.read(t, dy); !slices.Equal(g, got) {
				t.Errorf("UnaryGrad with dx = dy: %v; want %v", g, got)
			}
			yOut := e.read(t, y)
			noErr(t, e.ops.Unary(e.s, f, x, x))
			if g := e.read(t, x); !slices.Equal(g, yOut) {
				t.Errorf("Unary with y = x: %v; want %v", g, yOut)
			}
		})
	}
}

// TestUnaryKinksAndExtremes: the derivatives at the kinks are PyTorch's (hardswish_backward,
// hardsigmoid_backward, hardtanh_backward), and the functions that take any x give no NaN or
// overflow at ±1e30.
func TestUnaryKinksAndExtremes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		f     kernels.UnaryFunc
		x, dx float32 // for dy = 1
	}{
		{kernels.Hardswish, -3, -0.5}, {kernels.Hardswish, 3, 1.5}, {kernels.Hardswish, -3.5, 0}, {kernels.Hardswish, 4, 1},
		{kernels.Hardsigmoid, -3, 0}, {kernels.Hardsigmoid, 3, 0}, {kernels.Hardsigmoid, 0, float32(1.0 / 6)},
		{kernels.ReLU6, 0, 0}, {kernels.ReLU6, 6, 0}, {kernels.ReLU6, 3, 1},
	} {
		dx := e.f32(t, 0)
		noErr(t, e.ops.UnaryGrad(e.s, tc.f, dx, e.f32(t, 1), e.f32(t, tc.x)))
		if got := e.read(t, dx)[0]; got != tc.dx {
			t.Errorf("%v'(%v) = %v; want %v", tc.f, tc.x, got, tc.dx)
		}
	}
	big := []float32{-1e30, -100, 100, 1e30}
	want := map[kernels.UnaryFunc][]float32{
		kernels.Sigmoid:     {0, 0, 1, 1}, // e^-100 underflows float32, as in PyTorch 2.x
		kernels.Tanh:        {-1, -1, 1, 1},
		kernels.GELU:        {0, 0, 100, 1e30},
		kernels.GELUTanh:    {0, 0, 100, 1e30},
		kernels.SiLU:        {0, 0, 100, 1e30},
		kernels.Hardswish:   {0, 0, 100, 1e30},
		kernels.Hardsigmoid: {0, 0, 1, 1},
		kernels.ReLU6:       {0, 0, 6, 6},
	}
	for f, w := range want {
		x, y, dx := e.f32(t, big...), e.f32(t, 0, 0, 0, 0), e.f32(t, 0, 0, 0, 0)
		noErr(t, e.ops.Unary(e.s, f, y, x))
		noErr(t, e.ops.UnaryGrad(e.s, f, dx, e.f32(t, 1, 1, 1, 1), x))
		got, grad := e.read(t, y), e.read(t, dx)
		for i := range big {
			if math.Abs(float64(got[i]-w[i])) > 1e-6*math.Abs(float64(w[i])) {
				t.Errorf("%v(%v) = %v; want %v", f, big[i], got[i], w[i])
			}
			if g := float64(grad[i]); math.IsNaN(g) || math.IsInf(g, 0) {
				t.Errorf("%v'(%v) = %v; want a finite value", f, big[i], g)
			}
		}
	}
}

func TestFuncNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{kernels.Exp.String(), "exp"}, {kernels.GELU.String(), "gelu"}, {kernels.GELUTanh.String(), "gelu_tanh"},
		{kernels.ReLU6.String(), "relu6"}, {kernels.UnaryFunc(0).String(), "UnaryFunc(0)"},
		{kernels.UnaryFunc(13).String(), "UnaryFunc(13)"}, {kernels.BinaryDiv.String(), "div"},
		{kernels.BinaryFunc(9).String(), "BinaryFunc(9)"},
	} {
		if tc.got != tc.want {
			t.Errorf("String() = %q; want %q", tc.got, tc.want)
		}
	}
}

// stridedCase is an operand layout of Binary: the index space and x's and y's views.
type stridedCase struct {
	name       string
	shape      []int
	xs, ys     []int // strides
	xOff, yOff int   // offsets of the views in their buffers
}

// TestBinary: every BinaryFunc over broadcast (0) strides (one value along rows of packed
// values: the CPU's vector loop and its rest), transposed strides, views at an offset, rank MaxRank and a shape large enough for the parallel path, exactly as float32
// arithmetic of the addressed elements gives it.
func TestBinary(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []stridedCase{
		{"broadcast last", []int{2, 3, 4}, []int{12, 4, 1}, []int{0, 0, 1}, 0, 0},
		{"transposed x, broadcast middle", []int{2, 3, 4}, []int{1, 2, 6}, []int{4, 0, 1}, 0, 0},
		{"scalar y", []int{5, 2}, []int{2, 1}, []int{0, 0}, 0, 0},
		{"offsets and a step", []int{5}, []int{2}, []int{1}, 3, 7},
		{"rank 8", []int{2, 1, 2, 1, 2, 1, 2, 3}, packed([]int{2, 1, 2, 1, 2, 1, 2, 3}), []int{0, 9, 1, 0, 0, 5, 3, 0}, 0, 1},
		{"parallel", []int{64, 33, 17}, []int{33 * 17, 17, 1}, []int{17, 0, 1}, 0, 0},
		{"one packed run split", []int{200, 300}, []int{300, 1}, []int{300, 1}, 0, 5},
		{"y one value a row (a gate)", []int{6, 37}, []int{37, 1}, []int{1, 0}, 2, 1},
		{"x one value a row", []int{5, 29}, []int{1, 0}, []int{29, 1}, 0, 3},
	} {
		for f := kernels.BinaryAdd; f <= kernels.BinaryDiv; f++ {
			t.Run(tc.name+"/"+f.String(), func(t *testing.T) {
				last := func(st []int) int { // the largest offset the strides reach
					o := 0
					for d, s := range st {
						o += (tc.shape[d] - 1) * s
					}
					return o
				}
				xv := randoms(tc.xOff+last(tc.xs)+1, 1, -3, 3)
				yv := randoms(tc.yOff+last(tc.ys)+1, 2, 0.5, 2)
				x := e.f32(t, xv...)
				x = x.Slice(tc.xOff, x.Len)
				y := e.f32(t, yv...)
				y = y.Slice(tc.yOff, y.Len)
				z := e.f32(t, make([]float32, numel(tc.shape))...)
				noErr(t, e.ops.Binary(e.s, f, z, x, y, tc.shape, tc.xs, tc.ys))
				got := e.read(t, z)
				k := 0
				eachIndex(tc.shape, func(idx []int) {
					a, b := xv[tc.xOff+dot(idx, tc.xs)], yv[tc.yOff+dot(idx, tc.ys)]
					want := map[kernels.BinaryFunc]float32{kernels.BinaryAdd: a + b, kernels.BinarySub: a - b,
						kernels.BinaryMul: a * b, kernels.BinaryDiv: a / b}[f]
					if got[k] != want {
						t.Fatalf("z%v = %v; want %v", idx, got[k], want)
					}
					k++
				})
			})
		}
	}
}

// TestSumTo: sums over every subset of the dims of a rank-3 shape, over dims of a rank-4 one, with
// dims of size 1, and over shapes large enough for the parallel path, against float64 sums; and
// the same bits on a second call.
func TestSumTo(t *testing.T) {
	e := newEnv(t)
	type sumCase struct{ shape, keep []int }
	cases := []sumCase{
		{[]int{2, 3, 4, 5}, []int{2, 1, 4, 1}}, {[]int{2, 3, 4, 5}, []int{1, 3, 1, 5}}, {[]int{3, 1, 5}, []int{1, 1, 5}},
		{[]int{300, 70}, []int{1, 70}}, {[]int{300, 70}, []int{300, 1}}, {[]int{40, 3, 2}, []int{40, 1, 2}}, {[]int{40, 30, 50}, []int{1, 30, 1}}, {[]int{7}, []int{1}},
	}
	for mask := range 8 { // keep each dim of [3][4][5] or not
		keep := []int{3, 4, 5}
		for d := range 3 {
			if mask&(1<<d) != 0 {
				keep[d] = 1
			}
		}
		cases = append(cases, sumCase{[]int{3, 4, 5}, keep})
	}
	for _, tc := range cases {
		xv := randoms(numel(tc.shape)+2, 3, -1, 1)
		x := e.f32(t, xv...).Slice(2, len(xv))
		y := e.f32(t, make([]float32, numel(tc.keep)+1)...).Slice(1, numel(tc.keep)+1)
		noErr(t, e.ops.SumTo(e.s, y, x, tc.shape, tc.keep))
		want, abs := make([]float64, numel(tc.keep)), make([]float64, numel(tc.keep))
		kst := packed(tc.keep)
		eachIndex(tc.shape, func(idx []int) {
			o := 0
			for d, i := range idx {
				if tc.keep[d] != 1 {
					o += i * kst[d]
				}
			}
			v := float64(xv[2+dot(idx, packed(tc.shape))])
			want[o] += v
			abs[o] += math.Abs(v)
		})
		got := e.read(t, y)
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-6*abs[i]+1e-30 {
				t.Fatalf("SumTo %v to %v: y[%d] = %v; want %v", tc.shape, tc.keep, i, got[i], want[i])
			}
		}
		noErr(t, e.ops.SumTo(e.s, y, x, tc.shape, tc.keep))
		if again := e.read(t, y); !slices.Equal(again, got) {
			t.Fatalf("SumTo %v to %v: a second call gave other bits", tc.shape, tc.keep)
		}
	}
}

// TestCopyStrided: a permutation, a slice, a part of a concatenation written into its place (the
// other part untouched), a broadcast (src stride 0), rank MaxRank, a large transpose and a
// permutation of short runs, each element where the strides put it.
func TestCopyStrided(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name       string
		shape      []int
		ds, ss     []int
		dLen, dOff int
		sLen, sOff int
	}{
		// [2][3][4] to [4][2][3]: dst strides of src's dims 0, 1, 2 are 3, 1, 6.
		{"permutation", []int{2, 3, 4}, []int{3, 1, 6}, []int{12, 4, 1}, 24, 0, 24, 0},
		// rows 1..2, cols 2..4 of [4][6], made packed.
		{"slice", []int{2, 3}, []int{3, 1}, []int{6, 1}, 6, 0, 24, 8},
		// [2][3] written as columns 2..4 of [2][5].
		{"concatenation part", []int{2, 3}, []int{5, 1}, []int{3, 1}, 10, 2, 6, 0},
		{"broadcast", []int{4, 3}, []int{3, 1}, []int{0, 1}, 12, 0, 3, 0},
		{"rank 8", []int{2, 2, 1, 2, 2, 1, 2, 2}, []int{1, 2, 7, 4, 8, 5, 16, 32}, packed([]int{2, 2, 1, 2, 2, 1, 2, 2}), 64, 0, 64, 0},
		{"large transpose", []int{300, 200}, []int{1, 300}, []int{200, 1}, 60000, 0, 60000, 0},
		// [5][9][7][3] to [5][7][9][3], as attention's heads: runs of 3, the parts of the
		// work starting within a run and rows carrying into every dim.
		{"heads permuted", []int{5, 7, 9, 3}, packed([]int{5, 7, 9, 3}), []int{189, 3, 21, 1}, 945, 0, 945, 0},
		{"one packed run split", []int{200, 300}, []int{300, 1}, []int{300, 1}, 60001, 1, 60000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const sentinel = -12345
			sv := randoms(tc.sLen, 4, -1, 1)
			dv := make([]float32, tc.dLen)
			for i := range dv {
				dv[i] = sentinel
			}
			src := e.f32(t, sv...)
			dst := e.f32(t, dv...)
			noErr(t, e.ops.CopyStrided(e.s, dst.Slice(tc.dOff, tc.dLen), tc.ds, src.Slice(tc.sOff, tc.sLen), tc.ss, tc.shape))
			want := slices.Clone(dv) // dv is the upload's until the stream has run it
			eachIndex(tc.shape, func(idx []int) { want[tc.dOff+dot(idx, tc.ds)] = sv[tc.sOff+dot(idx, tc.ss)] })
			if got := e.read(t, dst); !slices.Equal(got, want) {
				t.Fatalf("dst = %v; want %v", got, want)
			}
		})
	}
	// The permutation spelled out: dst[k][i][j] = src[i][j][k].
	sv := randoms(24, 5, -1, 1)
	dst := e.f32(t, make([]float32, 24)...)
	noErr(t, e.ops.CopyStrided(e.s, dst, []int{3, 1, 6}, e.f32(t, sv...), []int{12, 4, 1}, []int{2, 3, 4}))
	got := e.read(t, dst)
	for i := range 2 {
		for j := range 3 {
			for k := range 4 {
				if got[(k*2+i)*3+j] != sv[(i*3+j)*4+k] {
					t.Fatalf("permuted [%d][%d][%d] = %v; want %v", k, i, j, got[(k*2+i)*3+j], sv[(i*3+j)*4+k])
				}
			}
		}
	}
}

func softmaxRef(x []float64) []float64 {
	mx := slices.Max(x)
	out := make([]float64, len(x))
	var s float64
	for i, v := range x {
		out[i] = math.Exp(v - mx)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// TestSoftmax: rows of ordinary, huge and hugely negative logits against the float64 softmax; y
// may be x; the backward pass is the finite difference of Σ dy·softmax(x); dx may be dy.
func TestSoftmax(t *testing.T) {
	e := newEnv(t)
	for _, sz := range []struct{ rows, cols int }{{5, 7}, {1, 1}, {600, 40}} {
		rows, cols := sz.rows, sz.cols
		xv := randoms(rows*cols, 6, -10, 10)
		for j := range cols { // stability: a row near +1000, one near -1000
			xv[j] += 1000
			if rows > 1 {
				xv[cols+j] -= 1000
			}
		}
		dyv := randoms(rows*cols, 7, -1, 1)
		x, y := e.f32(t, xv...), e.f32(t, make([]float32, rows*cols)...)
		noErr(t, e.ops.Softmax(e.s, y, x, rows, cols))
		yv := e.read(t, y)
		small := rows*cols <= 1000 // the finite differences below cost the reference rows*cols² each
		var want, wantDx []float64
		for r := range rows {
			row := widen(xv[r*cols : (r+1)*cols])
			want = append(want, softmaxRef(row)...)
			// d/dx_j of Σ dy·softmax(x), centrally.
			for j := range row {
				if !small {
					break
				}
				const h = 1e-6
				up, down := slices.Clone(row), slices.Clone(row)
				up[j] += h
				down[j] -= h
				var d float64
				for i, p := range softmaxRef(up) {
					d += float64(dyv[r*cols+i]) * (p - softmaxRef(down)[i])
				}
				wantDx = append(wantDx, d/(2*h))
			}
		}
		near(t, "softmax", yv, want, 1e-6)
		noErr(t, e.ops.Softmax(e.s, x, x, rows, cols))
		if got := e.read(t, x); !slices.Equal(got, yv) {
			t.Fatalf("Softmax with y = x differs")
		}
		if !small {
			continue
		}
		dx, dy := e.f32(t, make([]float32, rows*cols)...), e.f32(t, dyv...)
		noErr(t, e.ops.SoftmaxBackward(e.s, dx, dy, y, rows, cols))
		dxv := e.read(t, dx)
		near(t, "softmax backward", dxv, wantDx, 1e-5)
		noErr(t, e.ops.SoftmaxBackward(e.s, dy, dy, y, rows, cols))
		if got := e.read(t, dy); !slices.Equal(got, dxv) {
			t.Fatalf("SoftmaxBackward with dx = dy differs")
		}
	}
}

// layerNormRef is LayerNorm in float64: y for x [rows][cols], gamma and beta nil (1 and 0) or
// [cols], with the mean and rstd of each row.
func layerNormRef(x, gamma, beta []float64, rows, cols int, eps float64) (y, mean, rstd []float64) {
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var m, v float64
		for _, a := range row {
			m += a
		}
		m /= float64(cols)
		for _, a := range row {
			v += (a - m) * (a - m)
		}
		rs := 1 / math.Sqrt(v/float64(cols)+eps)
		mean, rstd = append(mean, m), append(rstd, rs)
		for j, a := range row {
			o := (a - m) * rs
			if gamma != nil {
				o *= gamma[j]
			}
			if beta != nil {
				o += beta[j]
			}
			y = append(y, o)
		}
	}
	return y, mean, rstd
}

// TestLayerNorm: LayerNorm with and without gamma and beta against the float64 normalization
// (y, the saved mean and rstd), over a shape large enough for the parallel path too; its backward
// pass (rows longer than the vectors of sums, columns in more than one block) against the central
// finite differences of Σ dy·y in x, gamma and beta, each output skipped when it is the empty
// view.
func TestLayerNorm(t *testing.T) {
	e := newEnv(t)
	const eps = 1e-5
	var none kernels.F32
	for _, sz := range []struct{ rows, cols int }{{4, 6}, {3, 1}, {5, 37}, {1, 300}, {512, 64}} {
		rows, cols := sz.rows, sz.cols
		for _, affine := range []bool{true, false} {
			xv := randoms(rows*cols, 8, -2, 3)
			dyv := randoms(rows*cols, 9, -1, 1)
			var gv, bv []float32
			var gamma, beta kernels.F32
			if affine {
				gv, bv = randoms(cols, 10, 0.5, 1.5), randoms(cols, 11, -1, 1)
				gamma, beta = e.f32(t, gv...), e.f32(t, bv...)
			}
			y, mean, rstd := e.f32(t, make([]float32, rows*cols)...), e.f32(t, make([]float32, rows)...), e.f32(t, make([]float32, rows)...)
			x := e.f32(t, xv...)
			noErr(t, e.ops.LayerNorm(e.s, y, mean, rstd, x, gamma, beta, rows, cols, eps))
			var g64, b64 []float64
			if affine {
				g64, b64 = widen(gv), widen(bv)
			}
			wy, wm, wr := layerNormRef(widen(xv), g64, b64, rows, cols, eps)
			near(t, "y", e.read(t, y), wy, 1e-5)
			near(t, "mean", e.read(t, mean), wm, 1e-6)
			near(t, "rstd", e.read(t, rstd), wr, 1e-5)
			if rows*cols > 300 {
				continue // the finite differences cost the reference (rows*cols)² each
			}

			// loss is Σ dy·y of the float64 layer norm.
			loss := func(x, g, b []float64) float64 {
				y, _, _ := layerNormRef(x, g, b, rows, cols, eps)
				var l float64
				for i, v := range y {
					l += float64(dyv[i]) * v
				}
				return l
			}
			grad := func(v []float64, at func([]float64) float64) []float64 {
				const h = 1e-6
				out := make([]float64, len(v))
				for i := range v {
					up, down := slices.Clone(v), slices.Clone(v)
					up[i] += h
					down[i] -= h
					out[i] = (at(up) - at(down)) / (2 * h)
				}
				return out
			}
			x64 := widen(xv)
			wantDx := grad(x64, func(x []float64) float64 { return loss(x, g64, b64) })
			dx, dg, db := e.f32(t, make([]float32, rows*cols)...), e.f32(t, make([]float32, cols)...), e.f32(t, make([]float32, cols)...)
			dy := e.f32(t, dyv...)
			if !affine {
				dg, db = none, none
			}
			noErr(t, e.ops.LayerNormBackward(e.s, dx, dg, db, dy, x, gamma, mean, rstd, rows, cols))
			near(t, "dx", e.read(t, dx), wantDx, 1e-4)
			if !affine {
				continue
			}
			wantDg := grad(g64, func(g []float64) float64 { return loss(x64, g, b64) })
			wantDb := grad(b64, func(b []float64) float64 { return loss(x64, g64, b) })
			near(t, "dgamma", e.read(t, dg), wantDg, 1e-4)
			near(t, "dbeta", e.read(t, db), wantDb, 1e-4)

			// Each output alone: the others are skipped, its values the same.
			dx2, dg2 := e.f32(t, make([]float32, rows*cols)...), e.f32(t, make([]float32, cols)...)
			noErr(t, e.ops.LayerNormBackward(e.s, none, dg2, none, dy, x, gamma, mean, rstd, rows, cols))
			noErr(t, e.ops.LayerNormBackward(e.s, dx2, none, none, dy, x, gamma, mean, rstd, rows, cols))
			if !slices.Equal(e.read(t, dg2), e.read(t, dg)) || !slices.Equal(e.read(t, dx2), e.read(t, dx)) {
				t.Fatalf("LayerNormBackward with outputs skipped gave other values")
			}
		}
	}
}

// gemmRef is c = alpha*op(a)*op(b) + beta*c in float64 for one matrix of each.
func gemmRef(transA, transB bool, m, n, k int, alpha float64, a, b []float32, beta float64, c []float32) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				av, bv := a[i*k+p], b[p*n+j]
				if transA {
					av = a[p*m+i]
				}
				if transB {
					bv = b[j*k+p]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = alpha*s + beta*float64(c[i*n+j])
		}
	}
	return out
}

// TestGemmStrided: every transpose, operands shared by stride 0 and a gap between the outputs
// (left untouched) against a float64 product per batch item; batch 0 writes nothing; a batch
// large enough for the parallel path gives the bits of one Gemm per item; under bf16 and fp16 the
// bits of that precision's Gemm per item.
func TestGemmStrided(t *testing.T) {
	e := newEnv(t)
	const batch, m, n, k = 3, 2, 3, 4
	const sentinel = 777
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, st := range [][2]int{{m * k, k*n + 1}, {0, k * n}, {m*k + 2, 0}} {
			sa, sb, sc := st[0], st[1], m*n+2
			av := randoms((batch-1)*sa+m*k, 12, -1, 1)
			bv := randoms((batch-1)*sb+k*n, 13, -1, 1)
			cv := randoms((batch-1)*sc+m*n, 14, -1, 1)
			for i := range batch - 1 { // the gaps between the outputs
				cv[i*sc+m*n], cv[i*sc+m*n+1] = sentinel, sentinel
			}
			c := e.f32(t, cv...)
			noErr(t, e.ops.GemmStrided(e.s, tr[0], tr[1], batch, m, n, k, 1.5, e.f32(t, av...), sa, e.f32(t, bv...), sb, 0.5, c, sc))
			got := e.read(t, c)
			for i := range batch {
				want := gemmRef(tr[0], tr[1], m, n, k, 1.5, av[i*sa:], bv[i*sb:], 0.5, cv[i*sc:])
				near(t, "c", got[i*sc:i*sc+m*n], want, 1e-6)
				if i < batch-1 && (got[i*sc+m*n] != sentinel || got[i*sc+m*n+1] != sentinel) {
					t.Fatalf("transposes %v, strides %v: the gap after output %d was written", tr, st, i)
				}
			}
		}
	}

	c := e.f32(t, 1, 2)
	noErr(t, e.ops.GemmStrided(e.s, false, false, 0, 1, 1, 1, 1, kernels.F32{}, 1, kernels.F32{}, 1, 0, c, 1))
	if got := e.read(t, c); got[0] != 1 || got[1] != 2 {
		t.Fatalf("batch 0 wrote c: %v", got)
	}

	// 64 products of 16x16x16: the batch runs in parallel; each item is Gemm's, bit for bit, in
	// fp32 and in the reduced precisions (operands rounded as Gemm rounds them).
	const nb, sz = 64, 16
	av, bv := randoms(nb*sz*sz, 15, -1, 1), randoms(sz*sz, 16, -1, 1)
	for i := range av {
		av[i] += 1.0 / 1024 // values that bf16 and fp16 round
	}
	for _, p := range []kernels.Precision{kernels.FP32, kernels.BF16, kernels.FP16} {
		ops, err := kernels.ForPrecision(e.dev, p)
		noErr(t, err)
		a, b := e.f32(t, av...), e.f32(t, bv...)
		c, one := e.f32(t, make([]float32, nb*sz*sz)...), e.f32(t, make([]float32, nb*sz*sz)...)
		noErr(t, ops.GemmStrided(e.s, false, true, nb, sz, sz, sz, 1, a, sz*sz, b, 0, 0, c, sz*sz))
		for i := range nb {
			w := sz * sz
			noErr(t, ops.Gemm(e.s, false, true, sz, sz, sz, 1, a.Slice(i*w, (i+1)*w), b, 0, one.Slice(i*w, (i+1)*w)))
		}
		got := e.read(t, c)
		if !slices.Equal(got, e.read(t, one)) {
			t.Fatalf("%s: GemmStrided differs from a Gemm per item", p)
		}
		if p == kernels.FP32 {
			continue
		}
		fp32 := e.f32(t, make([]float32, nb*sz*sz)...)
		noErr(t, e.ops.GemmStrided(e.s, false, true, nb, sz, sz, sz, 1, a, sz*sz, b, 0, 0, fp32, sz*sz))
		if slices.Equal(got, e.read(t, fp32)) {
			t.Fatalf("%s: GemmStrided gave fp32's bits: its operands were not rounded", p)
		}
	}
}
