package kernels_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestClassifierOpErrors: the classifier ops refuse bad geometry and settings before enqueueing.
func TestClassifierOpErrors(t *testing.T) {
	e := newEnv(t)
	x8, x4, x2 := e.f32(t, 1, 2, 3, 4, 5, 6, 7, 8), e.f32(t, 1, 2, 3, 4), e.f32(t, 1, 2)
	lab := e.i32(t, 0, 1)
	bn := kernels.BatchNorm{N: 2, C: 2, HW: 2, Momentum: 0.1, Eps: 1e-5}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"add lengths", e.ops.Add(e.s, x4, x4, x2), kernels.ErrShape},
		{"batch norm eps 0", e.ops.BatchNormEval(e.s, x8, x8, x2, x2, x2, x2, kernels.BatchNorm{N: 2, C: 2, HW: 2, Momentum: 0.1}), kernels.ErrArgument},
		{"batch norm momentum 2", e.ops.BatchNormTrain(e.s, x8, x8, x2, x2, x2, x2, x2, x2, kernels.BatchNorm{N: 2, C: 2, HW: 2, Momentum: 2, Eps: 1}),
			kernels.ErrArgument},
		{"batch norm x length", e.ops.BatchNormTrain(e.s, x8, x4, x2, x2, x2, x2, x2, x2, bn), kernels.ErrShape},
		{"batch norm gamma length", e.ops.BatchNormBackward(e.s, x8, x2, x2, x8, x8, x4, x2, x2, bn), kernels.ErrShape},
		{"global average pool inner 0", e.ops.GlobalAvgPool(e.s, x2, x4, 0), kernels.ErrArgument},
		{"global average pool lengths", e.ops.GlobalAvgPoolBackward(e.s, x8, x2, 3), kernels.ErrShape},
		{"label smoothing 1", e.ops.SoftmaxCrossEntropySmooth(e.s, x2.Slice(0, 1), x4, x4, lab, 2, 2, 1), kernels.ErrArgument},
		{"max pool pad over k/2", e.ops.MaxPool2D(e.s, x4, kernels.I32(x4), x4, kernels.Pool2D{N: 1, C: 1, H: 2, W: 2, K: 2, Stride: 1, Pad: 2}),
			kernels.ErrArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v; want %v", tc.name, tc.err, tc.want)
		}
	}
	if err := e.s.Synchronize(context.Background()); err != nil {
		t.Fatalf("stream error after rejected ops = %v; want nil", err)
	}
}

// TestBatchNormEvalInPlace: evaluation mode may write over its input, as documented.
func TestBatchNormEvalInPlace(t *testing.T) {
	e := newEnv(t)
	x := e.f32(t, 1, 2, 3, 4)
	g := kernels.BatchNorm{N: 1, C: 2, HW: 2, Momentum: 0.1, Eps: 1e-5}
	if err := e.ops.BatchNormEval(e.s, x, x, e.f32(t, 2, 1), e.f32(t, 0, 1), e.f32(t, 1, 3), e.f32(t, 1-1e-5, 4-1e-5), g); err != nil {
		t.Fatal(err)
	}
	got := e.read(t, x)
	want := []float32{0, 2, 1, 1.5} // channel 0: (x-1)/1*2; channel 1: (x-3)/2+1
	for i := range want {
		if d := got[i] - want[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("x[%d] = %v; want %v", i, got[i], want[i])
		}
	}
}

// TestBatchNormOverBatches: a batch cut into parts of unequal sizes, each part's statistics
// gathered (BatchNormStats), normalized (BatchNormTrainStats) and differentiated
// (BatchNormBackwardInput over the summed sums) part by part, gives the whole batch's
// BatchNormTrain and BatchNormBackward: the same statistics, outputs and input gradient within
// float32 rounding, on channels whose mean is far from 0 (the ill-conditioned case for a
// one-pass variance).
func TestBatchNormOverBatches(t *testing.T) {
	e := newEnv(t)
	const n, c, hw = 6, 3, 5
	parts := []int{0, 1, 3, 6} // samples [0,1), [1,3), [3,6)
	whole := kernels.BatchNorm{N: n, C: c, HW: hw, Momentum: 0.1, Eps: 1e-5}
	r := rand.New(rand.NewPCG(1, 2))
	xs, dys := make([]float32, whole.Len()), make([]float32, whole.Len())
	for i := range xs {
		xs[i] = 50 + float32(i/hw%c) + float32(r.NormFloat64())
		dys[i] = float32(r.NormFloat64())
	}
	gamma, beta, ones := e.f32(t, 1.5, 0.5, -2), e.f32(t, 0.1, 0, 0.3), []float32{1, 1, 1}
	x, dy := e.f32(t, xs...), e.f32(t, dys...)
	rm, rv := e.f32(t, 0, 0, 0), e.f32(t, ones...)
	y, sm, si := e.f32(t, make([]float32, whole.Len())...), e.f32(t, 0, 0, 0), e.f32(t, 0, 0, 0)
	dx, dg, db := e.f32(t, make([]float32, whole.Len())...), e.f32(t, 0, 0, 0), e.f32(t, 0, 0, 0)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(e.ops.BatchNormTrain(e.s, y, x, gamma, beta, rm, rv, sm, si, whole))
	check(e.ops.BatchNormBackward(e.s, dx, dg, db, dy, x, gamma, sm, si, whole))

	rec, per := 2*c+1, c*hw
	stats := e.f32(t, make([]float32, (len(parts)-1)*rec)...)
	for p := range len(parts) - 1 {
		g := whole
		g.N = parts[p+1] - parts[p]
		check(e.ops.BatchNormStats(e.s, stats.Slice(p*rec, (p+1)*rec), x.Slice(parts[p]*per, parts[p+1]*per), g))
	}
	yp, dxp := e.f32(t, make([]float32, whole.Len())...), e.f32(t, make([]float32, whole.Len())...)
	sums := make([]float32, rec)
	wantMean, wantInv, wantRun := e.read(t, sm), e.read(t, si), append(e.read(t, rm), e.read(t, rv)...)
	saved := make([][2]kernels.F32, len(parts)-1)
	for p := range len(parts) - 1 {
		g := whole
		g.N = parts[p+1] - parts[p]
		lo, hi := parts[p]*per, parts[p+1]*per
		rmp, rvp, smp, sip := e.f32(t, 0, 0, 0), e.f32(t, ones...), e.f32(t, 0, 0, 0), e.f32(t, 0, 0, 0)
		check(e.ops.BatchNormTrainStats(e.s, yp.Slice(lo, hi), x.Slice(lo, hi), gamma, beta, rmp, rvp, smp, sip, stats, g))
		closeTo(t, "saved mean", e.read(t, smp), wantMean, 1e-7)
		closeTo(t, "saved inverse std", e.read(t, sip), wantInv, 1e-6)
		closeTo(t, "running statistics", append(e.read(t, rmp), e.read(t, rvp)...), wantRun, 1e-6)
		dgp, dbp := e.f32(t, 0, 0, 0), e.f32(t, 0, 0, 0)
		check(e.ops.BatchNormBackward(e.s, kernels.F32{}, dgp, dbp, dy.Slice(lo, hi), x.Slice(lo, hi), gamma, smp, sip, g))
		for i, v := range append(e.read(t, dgp), e.read(t, dbp)...) {
			sums[i] += v
		}
		sums[2*c] += float32(g.N * hw)
		saved[p] = [2]kernels.F32{smp, sip}
	}
	closeTo(t, "y", e.read(t, yp), e.read(t, y), 1e-5)
	sumsDev := e.f32(t, sums...)
	for p := range len(parts) - 1 {
		g := whole
		g.N = parts[p+1] - parts[p]
		lo, hi := parts[p]*per, parts[p+1]*per
		check(e.ops.BatchNormBackwardInput(e.s, dxp.Slice(lo, hi), dy.Slice(lo, hi), x.Slice(lo, hi), gamma, saved[p][0], saved[p][1], sumsDev, g))
	}
	closeTo(t, "dx", e.read(t, dxp), e.read(t, dx), 1e-4)
}

// closeTo fails unless every got[i] is within tol of want[i] (relative above 1, absolute below).
func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v; whole batch %v", what, i, got[i], want[i])
		}
	}
}
