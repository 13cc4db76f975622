package kernels_test

import (
	"math"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestDepthwiseStaysFP32: under bf16 and fp16 the depthwise convolution still computes in float32
// (it has no GEMM to round the operands of): the same bits as the fp32 op set, on values that
// neither format holds. A 1×1 kernel makes each output w·x + b, rounded once.
func TestDepthwiseStaysFP32(t *testing.T) {
	e := newEnv(t)
	g := kernels.Depthwise2D{N: 1, C: 2, H: 1, W: 2, K: 1}
	fine := float32(1 + math.Ldexp(1, -20))
	xs, ws, bs := []float32{fine, 3 * fine, -fine, 0.1}, []float32{fine, 1.0 / 3}, []float32{0.2, -fine}
	dy := e.f32(t, 1, 2, 3, 4)
	for _, p := range []kernels.Precision{kernels.FP32, kernels.BF16, kernels.FP16} {
		ops, err := kernels.ForPrecision(e.dev, p)
		if err != nil {
			t.Fatal(err)
		}
		x, w, b := e.f32(t, xs...), e.f32(t, ws...), e.f32(t, bs...)
		y, dx, dw := e.f32(t, 0, 0, 0, 0), e.f32(t, 0, 0, 0, 0), e.f32(t, 0, 0)
		if err := ops.DepthwiseConv2D(e.s, y, x, w, b, g); err != nil {
			t.Fatal(err)
		}
		if err := ops.DepthwiseConv2DBackward(e.s, dx, dw, kernels.F32{}, dy, x, w, g); err != nil {
			t.Fatal(err)
		}
		got, gotDx, gotDw := e.read(t, y), e.read(t, dx), e.read(t, dw)
		for i, v := range got {
			c := i / 2
			if want := bs[c] + float32(ws[c]*xs[i]); v != want {
				t.Errorf("%s: y[%d] = %v; want %v", p, i, v, want)
			}
			if want := ws[c] * float32(i+1); gotDx[i] != want {
				t.Errorf("%s: dx[%d] = %v; want %v", p, i, gotDx[i], want)
			}
		}
		for c, v := range gotDw {
			want := float32(float64(xs[2*c])*float64(2*c+1) + float64(xs[2*c+1])*float64(2*c+2))
			if v != want {
				t.Errorf("%s: dw[%d] = %v; want %v", p, c, v, want)
			}
		}
	}
}
