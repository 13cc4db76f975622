//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

func bnCase(g kernels.BatchNorm) parityCase {
	return parityCase{fmt.Sprintf("batch norm %+v", g), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x, gamma, beta := sd.f32(t, randF32(r, g.Len())), sd.f32(t, randF32(r, g.C)), sd.f32(t, randF32(r, g.C))
		rm, rv := sd.f32(t, randF32(r, g.C)), sd.f32(t, make([]float32, g.C))
		check(t, sd.ops.Fill(sd.s, rv, 2))
		y, sm, si := f32Len(sd, t, g.Len()), f32Len(sd, t, g.C), f32Len(sd, t, g.C)
		check(t, sd.ops.BatchNormTrain(sd.s, y, x, gamma, beta, rm, rv, sm, si, g))
		dy := sd.f32(t, randF32(r, g.Len()))
		dx, dg, db := f32Len(sd, t, g.Len()), f32Len(sd, t, g.C), f32Len(sd, t, g.C)
		check(t, sd.ops.BatchNormBackward(sd.s, dx, dg, db, dy, x, gamma, sm, si, g))
		dg2, db2 := f32Len(sd, t, g.C), f32Len(sd, t, g.C)
		check(t, sd.ops.BatchNormBackward(sd.s, kernels.F32{}, dg2, db2, dy, x, gamma, sm, si, g))
		ye := f32Len(sd, t, g.Len())
		check(t, sd.ops.BatchNormEval(sd.s, ye, x, gamma, beta, rm, rv, g))
		return []any{y, sm, si, rm, rv, dx, dg, db, dg2, db2, ye}
	}}
}

// bnGatherCase is a batch norm over two batches of x (the first n1 samples and the rest): each
// batch's statistics, the second normalized with both records, its input gradient from sums.
func bnGatherCase(g kernels.BatchNorm, n1 int) parityCase {
	return parityCase{fmt.Sprintf("batch norm over gathered stats %+v, %d", g, n1), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x, gamma, beta := sd.f32(t, randF32(r, g.Len())), sd.f32(t, randF32(r, g.C)), sd.f32(t, randF32(r, g.C))
		rec, cut := 2*g.C+1, n1*g.C*g.HW
		g1, g2 := g, g
		g1.N, g2.N = n1, g.N-n1
		stats := f32Len(sd, t, 2*rec)
		check(t, sd.ops.BatchNormStats(sd.s, stats.Slice(0, rec), x.Slice(0, cut), g1))
		check(t, sd.ops.BatchNormStats(sd.s, stats.Slice(rec, 2*rec), x.Slice(cut, g.Len()), g2))
		rm, rv := sd.f32(t, randF32(r, g.C)), sd.f32(t, make([]float32, g.C))
		check(t, sd.ops.Fill(sd.s, rv, 2))
		y, sm, si := f32Len(sd, t, g2.Len()), f32Len(sd, t, g.C), f32Len(sd, t, g.C)
		check(t, sd.ops.BatchNormTrainStats(sd.s, y, x.Slice(cut, g.Len()), gamma, beta, rm, rv, sm, si, stats, g2))
		sums := sd.f32(t, append(randF32(r, 2*g.C), float32(g.N*g.HW)))
		dy, dx := sd.f32(t, randF32(r, g2.Len())), f32Len(sd, t, g2.Len())
		check(t, sd.ops.BatchNormBackwardInput(sd.s, dx, dy, x.Slice(cut, g.Len()), gamma, sm, si, sums, g2))
		return []any{stats, y, sm, si, rm, rv, dx}
	}}
}

func smoothLossCase(n, classes int, smoothing float32) parityCase {
	return parityCase{fmt.Sprintf("label-smoothed cross-entropy %d x %d, %g", n, classes, smoothing), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x, y := sd.f32(t, randF32(r, n*classes)), sd.i32(t, randLabels(r, n, classes))
		loss, dl := f32Len(sd, t, 1), f32Len(sd, t, n*classes)
		check(t, sd.ops.SoftmaxCrossEntropySmooth(sd.s, loss, dl, x, y, n, classes, smoothing))
		return []any{loss, dl}
	}}
}

func floatLossCase(l kernels.Loss, n, dim int, posWeight bool) parityCase {
	return parityCase{fmt.Sprintf("float loss %d %d x %d", l.Kind, n, dim), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		x, y := sd.f32(t, randF32(r, n*dim)), sd.f32(t, randF32(r, n*dim))
		var pw kernels.F32
		if posWeight {
			pw = sd.f32(t, randF32(r, dim))
		}
		loss, d := f32Len(sd, t, 1), f32Len(sd, t, n*dim)
		check(t, sd.ops.FloatLoss(sd.s, loss, d, x, y, pw, n, dim, l))
		return []any{loss, d}
	}}
}

// nnParityCases are TestCUDAParity's cases for the classifier ops: the residual add and global
// average pooling (same float order as the CPU: exact), padded max pooling (exact), batch norm and
// the label-smoothed loss (reductions in another order: 1e-5 relative).
func nnParityCases() []parityCase {
	return []parityCase{
		{"add", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const n = 100_003
			x, y, z := sd.f32(t, randF32(r, n)), sd.f32(t, randF32(r, n)), f32Len(sd, t, n)
			check(t, sd.ops.Add(sd.s, z, x, y))
			check(t, sd.ops.Add(sd.s, x, x, y))
			return []any{z, x}
		}},
		{"global average pool and grad", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const rows, inner = 8 * 64, 49
			x, y := sd.f32(t, randF32(r, rows*inner)), f32Len(sd, t, rows)
			check(t, sd.ops.GlobalAvgPool(sd.s, y, x, inner))
			dx := f32Len(sd, t, rows*inner)
			check(t, sd.ops.GlobalAvgPoolBackward(sd.s, dx, y, inner))
			return []any{y, dx}
		}},
		bnCase(kernels.BatchNorm{N: 8, C: 16, HW: 49, Momentum: 0.1, Eps: 1e-5}),
		bnCase(kernels.BatchNorm{N: 3, C: 5, HW: 1, Momentum: 0.3, Eps: 1e-3}),
		bnCase(kernels.BatchNorm{N: 2, C: 3, HW: 1031, Momentum: 0.1, Eps: 1e-5}),
		bnGatherCase(kernels.BatchNorm{N: 8, C: 16, HW: 49, Momentum: 0.1, Eps: 1e-5}, 3),
		bnGatherCase(kernels.BatchNorm{N: 3, C: 5, HW: 1, Momentum: 0.3, Eps: 1e-3}, 1),
		{"bf16 conversions", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const n = 10_002
			v := randF32(r, n)
			v[0], v[1], v[2] = 1+1.0/256, 3e38, 1e-40 // a tie, near bf16's largest, a subnormal
			x, back := sd.f32(t, v), f32Len(sd, t, n)
			bf := kernels.U8{Buf: f32Len(sd, t, n/2).Buf, Len: 2 * n}
			check(t, sd.ops.ToBF16(sd.s, bf, x))
			check(t, sd.ops.FromBF16(sd.s, back, bf))
			return []any{kernels.I32{Buf: bf.Buf, Len: n / 2}, back}
		}},
		{"fp16 conversions", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			const n = 10_002
			v := randF32(r, n)
			// A tie (to even), just under the overflow tie, the overflow tie (to Inf), -Inf, NaN, a
			// subnormal, a subnormal tie, the tie with 0 (to 0), -0, below fp16's range (to 0).
			copy(v, []float32{1 + 1.0/2048, 65519, 65520, float32(math.Inf(-1)), float32(math.NaN()), 1e-6, 3 * 0x1p-25,
				0x1p-25, float32(math.Copysign(0, -1)), 1e-9, -70000})
			for i := 20; i < n; i += 7 { // wide magnitudes: normals, subnormals and overflows
				v[i] *= float32(math.Ldexp(1, r.IntN(50)-30))
			}
			x, back := sd.f32(t, v), f32Len(sd, t, n)
			h := kernels.U8{Buf: f32Len(sd, t, n/2).Buf, Len: 2 * n}
			check(t, sd.ops.ToFP16(sd.s, h, x))
			check(t, sd.ops.FromFP16(sd.s, back, h))
			// Bits, compared as integers: Inf and NaN (whose payload fp16 drops) exactly.
			return []any{kernels.I32{Buf: h.Buf, Len: n / 2}, kernels.I32(back)}
		}},
		floatLossCase(kernels.Loss{Kind: kernels.SoftCrossEntropy}, 65, 10, false),
		floatLossCase(kernels.Loss{Kind: kernels.BCEWithLogits}, 33, 7, true),
		floatLossCase(kernels.Loss{Kind: kernels.BCEWithLogits}, 40, 3, false),
		floatLossCase(kernels.Loss{Kind: kernels.MSE}, 50, 4, false),
		floatLossCase(kernels.Loss{Kind: kernels.SmoothL1, Beta: 0.5}, 50, 40, false),
		smoothLossCase(128, 10, 0.1),
		smoothLossCase(33, 1000, 0.2),
		poolCase(kernels.Pool2D{N: 2, C: 3, H: 16, W: 15, K: 3, Stride: 2, Pad: 1}),
		poolCase(kernels.Pool2D{N: 1, C: 2, H: 5, W: 6, K: 2, Stride: 1, Pad: 1}),
	}
}

// unaryCase runs f forward and backward, each into a new output and in place (y may be x, dx
// may be dy), on inputs of f's domain with the kinks of the piecewise functions and, where f
// saturates, large magnitudes.
func unaryCase(f kernels.UnaryFunc) parityCase {
	return parityCase{fmt.Sprintf("unary %v", f), 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
		const n = 10_007
		v := randF32(r, n)
		for i := range v {
			v[i] *= 4
		}
		switch f {
		case kernels.Log, kernels.Sqrt, kernels.Rsqrt:
			for i := range v {
				v[i] = float32(math.Abs(float64(v[i]))) + 1e-3
			}
		case kernels.Exp: // no large magnitudes: e^100 overflows float32
		default:
			copy(v, []float32{-3, 3, 0, 6, -6, float32(math.Copysign(0, -1)), 100, -100, 30, -30})
		}
		x, xi := sd.f32(t, v), sd.f32(t, v)
		dy, dyi := sd.f32(t, randF32(r, n)), f32Len(sd, t, n)
		check(t, sd.ops.Copy(sd.s, dyi, dy))
		y, dx := f32Len(sd, t, n), f32Len(sd, t, n)
		check(t, sd.ops.Unary(sd.s, f, y, x))
		check(t, sd.ops.Unary(sd.s, f, xi, xi))
		check(t, sd.ops.UnaryGrad(sd.s, f, dx, dy, x))
		check(t, sd.ops.UnaryGrad(sd.s, f, dyi, dyi, x))
		return []any{y, xi, dx, dyi}
	}}
}

// binaryCase runs the four BinaryFuncs over shape, x and y read at offset 3 of buffers of xLen
// and yLen elements with the given strides.
func binaryCase(name string, shape, xStrides, yStrides []int, xLen, yLen int) parityCase {
	return parityCase{"binary " + name, 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x, y := sd.f32(t, randF32(r, 3+xLen)).Slice(3, 3+xLen), sd.f32(t, randF32(r, 3+yLen)).Slice(3, 3+yLen)
		var out []any
		for _, f := range []kernels.BinaryFunc{kernels.BinaryAdd, kernels.BinarySub, kernels.BinaryMul, kernels.BinaryDiv} {
			z := f32Len(sd, t, n)
			check(t, sd.ops.Binary(sd.s, f, z, x, y, shape, xStrides, yStrides))
			out = append(out, z)
		}
		return out
	}}
}

// copyStridedCase copies src (srcLen elements) into dst (dstLen elements, random beforehand,
// so that the elements it must not write are compared too).
func copyStridedCase(name string, shape, dstStrides, srcStrides []int, dstOff, dstLen, srcOff, srcLen int) parityCase {
	return parityCase{"copy strided " + name, 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
		dst, src := sd.f32(t, randF32(r, dstOff+dstLen)), sd.f32(t, randF32(r, srcOff+srcLen))
		check(t, sd.ops.CopyStrided(sd.s, dst.Slice(dstOff, dstOff+dstLen), dstStrides, src.Slice(srcOff, srcOff+srcLen), srcStrides, shape))
		return []any{dst}
	}}
}

func sumToCase(shape, keep []int) parityCase {
	return parityCase{fmt.Sprintf("sum to %v of %v", keep, shape), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		n, m := 1, 1
		for i := range shape {
			n, m = n*shape[i], m*keep[i]
		}
		x, y := sd.f32(t, randF32(r, n)), f32Len(sd, t, m)
		check(t, sd.ops.SumTo(sd.s, y, x, shape, keep))
		return []any{y}
	}}
}

// softmaxCase: forward and backward into new outputs and in place, on logits of magnitude up to
// about 4·scale (large scales test the subtracted maximum).
func softmaxCase(rows, cols int, scale float32) parityCase {
	return parityCase{fmt.Sprintf("softmax and backward %d x %d, scale %g", rows, cols, scale), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		v := randF32(r, rows*cols)
		for i := range v {
			v[i] *= scale
		}
		x, xi, y := sd.f32(t, v), sd.f32(t, v), f32Len(sd, t, rows*cols)
		check(t, sd.ops.Softmax(sd.s, y, x, rows, cols))
		check(t, sd.ops.Softmax(sd.s, xi, xi, rows, cols))
		dy, dx := sd.f32(t, randF32(r, rows*cols)), f32Len(sd, t, rows*cols)
		check(t, sd.ops.SoftmaxBackward(sd.s, dx, dy, y, rows, cols))
		check(t, sd.ops.SoftmaxBackward(sd.s, dy, dy, y, rows, cols))
		return []any{y, xi, dx, dy}
	}}
}

// layerNormCase: the forward pass (with or without gamma and beta) on rows of mean 3 and
// standard deviation 2, then the backward pass with every output, and with dx alone and with
// dgamma alone.
func layerNormCase(rows, cols int, affine bool) parityCase {
	return parityCase{fmt.Sprintf("layer norm %d x %d, affine %v", rows, cols, affine), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		v := randF32(r, rows*cols)
		for i := range v {
			v[i] = 3 + 2*v[i]
		}
		x := sd.f32(t, v)
		var gamma, beta kernels.F32
		if affine {
			gamma, beta = sd.f32(t, randF32(r, cols)), sd.f32(t, randF32(r, cols))
		}
		y, mean, rstd := f32Len(sd, t, rows*cols), f32Len(sd, t, rows), f32Len(sd, t, rows)
		check(t, sd.ops.LayerNorm(sd.s, y, mean, rstd, x, gamma, beta, rows, cols, 1e-5))
		dy := sd.f32(t, randF32(r, rows*cols))
		dx, dg, db := f32Len(sd, t, rows*cols), f32Len(sd, t, cols), f32Len(sd, t, cols)
		check(t, sd.ops.LayerNormBackward(sd.s, dx, dg, db, dy, x, gamma, mean, rstd, rows, cols))
		dx2, dg2 := f32Len(sd, t, rows*cols), f32Len(sd, t, cols)
		check(t, sd.ops.LayerNormBackward(sd.s, dx2, kernels.F32{}, kernels.F32{}, dy, x, gamma, mean, rstd, rows, cols))
		check(t, sd.ops.LayerNormBackward(sd.s, kernels.F32{}, dg2, kernels.F32{}, dy, x, gamma, mean, rstd, rows, cols))
		return []any{y, mean, rstd, dx, dg, db, dx2, dg2}
	}}
}

// gemmStridedCase: batch products whose operands lie at the given strides (0: one operand for
// all; more than a matrix: gaps) in views of exactly their span, into a random c whose gaps must
// stay as they are.
func gemmStridedCase(ta, tb bool, batch, m, n, k, strideA, strideB, strideC int) parityCase {
	name := fmt.Sprintf("gemm strided ta=%v tb=%v %d x %dx%dx%d, strides %d %d %d", ta, tb, batch, m, n, k, strideA, strideB, strideC)
	return parityCase{name, 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		spanOf := func(stride, size int) int { return max(batch-1, 0)*stride + size }
		a, b := sd.f32(t, randF32(r, spanOf(strideA, m*k))), sd.f32(t, randF32(r, spanOf(strideB, k*n)))
		c := sd.f32(t, randF32(r, spanOf(strideC, m*n)))
		check(t, sd.ops.GemmStrided(sd.s, ta, tb, batch, m, n, k, 0.5, a, strideA, b, strideB, 0.25, c, strideC))
		return []any{c}
	}}
}

// depthwiseCases: the forward pass and the input gradient (the CPU's float32 order: exact), then
// the weight and bias gradients (sums in double in another order: 1e-6 relative), the backward
// pass with every output and with dw alone.
func depthwiseCases(g kernels.Depthwise2D, bias bool) []parityCase {
	name := fmt.Sprintf("depthwise conv2d %+v, bias %v", g, bias)
	inputs := func(t *testing.T, sd *side, r *rand.Rand) (x, w, b, dy kernels.F32) {
		x, w, dy = sd.f32(t, randF32(r, g.InLen())), sd.f32(t, randF32(r, g.WeightLen())), sd.f32(t, randF32(r, g.OutLen()))
		if bias {
			b = sd.f32(t, randF32(r, g.C))
		}
		return x, w, b, dy
	}
	return []parityCase{
		{name + ": y and dx", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x, w, b, dy := inputs(t, sd, r)
			y, dx, dw := f32Len(sd, t, g.OutLen()), f32Len(sd, t, g.InLen()), f32Len(sd, t, g.WeightLen())
			check(t, sd.ops.DepthwiseConv2D(sd.s, y, x, w, b, g))
			check(t, sd.ops.DepthwiseConv2DBackward(sd.s, dx, dw, kernels.F32{}, dy, x, w, g))
			return []any{y, dx}
		}},
		{name + ": dw and dbias", 1e-6, func(t *testing.T, sd *side, r *rand.Rand) []any {
			x, w, _, dy := inputs(t, sd, r)
			dx, dw, db, dw2 := f32Len(sd, t, g.InLen()), f32Len(sd, t, g.WeightLen()), f32Len(sd, t, g.C), f32Len(sd, t, g.WeightLen())
			check(t, sd.ops.DepthwiseConv2DBackward(sd.s, dx, dw, db, dy, x, w, g))
			check(t, sd.ops.DepthwiseConv2DBackward(sd.s, kernels.F32{}, dw2, kernels.F32{}, dy, x, w, g))
			return []any{dw, db, dw2}
		}},
	}
}

// attentionCase: the forward pass and the backward pass into dk and dv full of garbage (they
// must be overwritten); the CPU's blocks sum in another order than the GPU's tiles (1e-5 relative).
func attentionCase(g kernels.Attention) parityCase {
	return parityCase{fmt.Sprintf("attention %+v", g), 1e-5, func(t *testing.T, sd *side, r *rand.Rand) []any {
		q, k, v := sd.f32(t, randF32(r, g.QLen())), sd.f32(t, randF32(r, g.KLen())), sd.f32(t, randF32(r, g.KLen()))
		y, lse := f32Len(sd, t, g.QLen()), f32Len(sd, t, g.Rows())
		check(t, sd.ops.Attention(sd.s, y, lse, q, k, v, g))
		dy, dq := sd.f32(t, randF32(r, g.QLen())), f32Len(sd, t, g.QLen())
		dk, dv := sd.f32(t, randF32(r, g.KLen())), sd.f32(t, randF32(r, g.KLen()))
		check(t, sd.ops.AttentionBackward(sd.s, dq, dk, dv, dy, q, k, v, y, lse, g))
		return []any{y, lse, dq, dk, dv}
	}}
}

// coreParityCases are TestCUDAParity's cases for the differentiable core's ops: elementwise
// functions (computed in double on the GPU: within 1e-6), Binary and CopyStrided (exact),
// reductions and GemmStrided (another order: 1e-5 relative).
func coreParityCases() []parityCase {
	var cases []parityCase
	for f := kernels.Exp; f <= kernels.ReLU6; f++ {
		cases = append(cases, unaryCase(f))
	}
	cases = append(cases,
		binaryCase("packed", []int{3, 4, 5}, []int{20, 5, 1}, []int{20, 5, 1}, 60, 60),
		binaryCase("bias row over three dims", []int{4, 5, 6}, []int{30, 6, 1}, []int{0, 0, 1}, 120, 6),
		binaryCase("broadcast row and scalar", []int{6, 7}, []int{7, 1}, []int{0, 0}, 42, 1),
		binaryCase("transposed, broadcast middle", []int{5, 4, 3}, []int{1, 15, 5}, []int{0, 1, 0}, 60, 4),
		binaryCase("rank 8", []int{2, 1, 3, 1, 2, 2, 1, 3}, []int{36, 36, 12, 12, 6, 3, 3, 1}, []int{0, 0, 1, 0, 3, 0, 0, 6}, 72, 18),
		binaryCase("large", []int{100_003}, []int{1}, []int{1}, 100_003, 100_003),
		copyStridedCase("transpose", []int{4, 5, 6}, []int{30, 6, 1}, []int{1, 24, 4}, 0, 120, 0, 120),
		copyStridedCase("into a concatenation", []int{3, 5}, []int{9, 1}, []int{5, 1}, 4, 27, 0, 15),
		copyStridedCase("a slice made packed", []int{2, 3}, []int{3, 1}, []int{10, 2}, 0, 6, 7, 15),
		copyStridedCase("broadcast source, rank 8", []int{2, 2, 1, 2, 1, 3, 2, 2}, []int{48, 24, 24, 12, 12, 4, 2, 1}, []int{0, 1, 0, 0, 0, 2, 0, 6}, 1, 96, 2, 12),
		sumToCase([]int{4, 5, 6}, []int{1, 5, 1}),
		sumToCase([]int{4, 5, 6}, []int{4, 1, 6}),
		sumToCase([]int{2, 3, 1, 4}, []int{2, 3, 1, 4}),
		sumToCase([]int{100_003}, []int{1}),
		sumToCase([]int{512, 300}, []int{1, 300}),
		sumToCase([]int{2, 1, 3, 2, 2, 1, 2, 3}, []int{1, 1, 3, 1, 2, 1, 1, 3}),
		sumToCase([]int{9000, 3}, []int{9000, 1}), // more outputs than blocks
		attentionCase(kernels.Attention{Batch: 3, LQ: 17, LK: 17, D: 8, Scale: 0.35}),
		attentionCase(kernels.Attention{Batch: 2, LQ: 130, LK: 197, D: 64, Scale: 0.125}),
		attentionCase(kernels.Attention{Batch: 1, LQ: 5, LK: 40, D: 300, Scale: 0.06}),
		attentionCase(kernels.Attention{Batch: 2, LQ: 0, LK: 3, D: 4, Scale: 1}),
		softmaxCase(64, 10, 1),
		softmaxCase(7, 1000, 25),
		softmaxCase(3, 1, 1),
		softmaxCase(300, 33, 100),
		softmaxCase(8300, 2, 1), // more rows than blocks
		layerNormCase(33, 100, true),
		layerNormCase(5, 1031, false),
		layerNormCase(300, 3, true),
		layerNormCase(8300, 2, true), // more rows than blocks
		gemmStridedCase(false, false, 3, 7, 5, 4, 28, 20, 35),
		gemmStridedCase(true, false, 4, 16, 8, 32, 0, 256, 128),
		gemmStridedCase(false, true, 2, 9, 11, 13, 130, 150, 110),
		gemmStridedCase(true, true, 5, 6, 3, 7, 42, 0, 18),
		gemmStridedCase(false, false, 3, 4, 5, 0, 0, 0, 20),
		gemmStridedCase(false, false, 0, 4, 5, 6, 24, 30, 20),
	)
	for _, c := range []struct {
		g    kernels.Depthwise2D
		bias bool
	}{
		{kernels.Depthwise2D{N: 2, C: 5, H: 9, W: 11, K: 3, Pad: 1}, true},
		{kernels.Depthwise2D{N: 3, C: 4, H: 14, W: 13, K: 7, Stride: 1, Pad: 3}, true},
		{kernels.Depthwise2D{N: 2, C: 3, H: 10, W: 9, K: 3, Stride: 2, Pad: 1}, false},
		{kernels.Depthwise2D{N: 1, C: 2, H: 5, W: 5, K: 5, Stride: 3, Pad: 5}, true}, // outputs of padding only
		{kernels.Depthwise2D{N: 1, C: 8200, H: 2, W: 2, K: 3, Pad: 1}, true},         // more channels than blocks
		{kernels.Depthwise2D{N: 40, C: 3, H: 5, W: 4, K: 2, Stride: 1}, false},       // fewer taps than a chunk, 480 outputs a channel
	} {
		cases = append(cases, depthwiseCases(c.g, c.bias)...)
	}
	return cases
}

// TestDimsSimplify: the strided kernels' index space loses its dimensions of size 1 and merges
// the dimensions both operands step through as one, keeping every element's offsets.
func TestDimsSimplify(t *testing.T) {
	for _, c := range []struct {
		shape, s0, s1           []int
		wantShape, want0, want1 []int
	}{
		{[]int{4, 5, 6}, []int{30, 6, 1}, []int{0, 0, 1}, []int{20, 6}, []int{6, 1}, []int{0, 1}},
		{[]int{3, 4, 5}, []int{20, 5, 1}, []int{20, 5, 1}, []int{60}, []int{1}, []int{1}},
		{[]int{1, 1}, []int{1, 1}, []int{0, 0}, nil, nil, nil},
		{[]int{5, 4, 3}, []int{1, 15, 5}, []int{0, 1, 0}, []int{5, 4, 3}, []int{1, 15, 5}, []int{0, 1, 0}},
		{[]int{2, 1, 3, 1, 2}, []int{6, 6, 2, 2, 1}, []int{0, 0, 2, 9, 1}, []int{2, 6}, []int{6, 1}, []int{0, 1}},
	} {
		d := newDims(c.shape, c.s0, c.s1)
		var want dims
		want.rank = len(c.wantShape)
		copy(want.shape[:], c.wantShape)
		copy(want.s0[:], c.want0)
		copy(want.s1[:], c.want1)
		if *d != want {
			t.Errorf("newDims(%v, %v, %v) = %+v; want %+v", c.shape, c.s0, c.s1, *d, want)
		}
	}
}
