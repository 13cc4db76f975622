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
