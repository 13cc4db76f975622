package kernels_test

import (
	"context"
	"errors"
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
