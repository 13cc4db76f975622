package kernels_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// TestPrepareConv2D holds a prepared convolution to Conv2D's bits on the CPU op set, prepared
// (fp32) and not (a reduced precision, which rounds its operands at every call), over batches
// and input sizes that change from call to call, and to Conv2D's argument checks.
func TestPrepareConv2D(t *testing.T) {
	e := newEnv(t)
	bf16, err := kernels.ForPrecision(e.dev, kernels.BF16)
	if err != nil {
		t.Fatal(err)
	}
	geo := kernels.Conv2D{InC: 64, OutC: 64, KH: 3, KW: 3, Stride: 1, Pad: 1}
	w := e.f32(t, randoms(geo.WeightLen(), 1, -0.1, 0.1)...)
	bias := e.f32(t, randoms(geo.OutC, 2, -1, 1)...)
	for name, ops := range map[string]kernels.Ops{"fp32": e.ops, "bf16": bf16} {
		p, err := kernels.PrepareConv2D(ops, w, geo)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct{ n, h int }{{1, 8}, {2, 7}, {1, 8}} {
			g := geo
			g.N, g.InH, g.InW = s.n, s.h, s.h
			x := e.f32(t, randoms(g.InLen(), uint64(s.n*s.h), -1, 1)...)
			want, got := e.f32(t, make([]float32, g.OutLen())...), e.f32(t, make([]float32, g.OutLen())...)
			ws := e.f32(t, make([]float32, g.WorkspaceLen())...)
			if err := ops.Conv2D(e.s, want, x, w, bias, ws, g); err != nil {
				t.Fatal(err)
			}
			if err := p.Conv2D(e.s, got, x, bias, ws, g); err != nil {
				t.Fatal(err)
			}
			wv, gv := e.read(t, want), e.read(t, got)
			for i := range wv {
				if math.Float32bits(wv[i]) != math.Float32bits(gv[i]) {
					t.Fatalf("%s %+v: y[%d] = %v prepared, %v from Conv2D", name, g, i, gv[i], wv[i])
				}
			}
			// Conv2D's checks: the output over the weights, a short workspace, other weights.
			if err := p.Conv2D(e.s, w.Slice(0, g.OutLen()), x, bias, ws, g); !errors.Is(err, kernels.ErrArgument) {
				t.Errorf("output over the weights: %v; want ErrArgument", err)
			}
			if err := p.Conv2D(e.s, got, x, bias, ws.Slice(0, 10), g); !errors.Is(err, kernels.ErrShape) {
				t.Errorf("short workspace: %v; want ErrShape", err)
			}
			other := g
			other.InC = 32
			if err := p.Conv2D(e.s, got, x, bias, ws, other); !errors.Is(err, kernels.ErrArgument) {
				t.Errorf("other weights' geometry: %v; want ErrArgument", err)
			}
		}
	}
	if _, err := kernels.PrepareConv2D(e.ops, w.Slice(0, 10), geo); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short weights: %v; want ErrShape", err)
	}
	if _, err := kernels.PrepareConv2D(e.ops, w, kernels.Conv2D{InC: 64, KH: 3, KW: 3}); !errors.Is(err, kernels.ErrArgument) {
		t.Errorf("no output channels: %v; want ErrArgument", err)
	}
}

// TestPrepareGemm holds a prepared product to Gemm's bits on the CPU op set, prepared (fp32) and
// not (bf16), with A transposed or not and rows that change from call to call, and to Gemm's
// argument checks.
func TestPrepareGemm(t *testing.T) {
	e := newEnv(t)
	bf16, err := kernels.ForPrecision(e.dev, kernels.BF16)
	if err != nil {
		t.Fatal(err)
	}
	const n, k = 70, 300
	b := e.f32(t, randoms(n*k, 3, -1, 1)...)
	for name, ops := range map[string]kernels.Ops{"fp32": e.ops, "bf16": bf16} {
		for _, transB := range []bool{false, true} {
			p, err := kernels.PrepareGemm(ops, transB, n, k, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []int{1, 37, 200} {
				for _, transA := range []bool{false, true} {
					a := e.f32(t, randoms(m*k, uint64(m), -1, 1)...)
					want, got := e.f32(t, make([]float32, m*n)...), e.f32(t, make([]float32, m*n)...)
					if err := ops.Gemm(e.s, transA, transB, m, n, k, 1, a, b, 0, want); err != nil {
						t.Fatal(err)
					}
					if err := p.Gemm(e.s, transA, m, 1, a, 0, got); err != nil {
						t.Fatal(err)
					}
					wv, gv := e.read(t, want), e.read(t, got)
					for i := range wv {
						if math.Float32bits(wv[i]) != math.Float32bits(gv[i]) {
							t.Fatalf("%s transA %v transB %v m %d: c[%d] = %v prepared, %v from Gemm", name, transA, transB, m, i, gv[i], wv[i])
						}
					}
					if err := p.Gemm(e.s, transA, m, 1, a, 0, got.Slice(0, 5)); !errors.Is(err, kernels.ErrShape) {
						t.Errorf("short c: %v; want ErrShape", err)
					}
					if err := p.Gemm(e.s, transA, m, 1, a, 0, b.Slice(0, m*n)); !errors.Is(err, kernels.ErrArgument) {
						t.Errorf("c over B: %v; want ErrArgument", err)
					}
				}
			}
		}
	}
	if _, err := kernels.PrepareGemm(e.ops, false, n, k, b.Slice(0, 10)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short B: %v; want ErrShape", err)
	}
	if _, err := kernels.PrepareGemm(e.ops, false, 0, k, b); !errors.Is(err, kernels.ErrArgument) {
		t.Errorf("no columns: %v; want ErrArgument", err)
	}
}
