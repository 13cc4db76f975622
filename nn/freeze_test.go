package nn_test

import (
	"context"
	"math"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/nn"
)

// TestFreeze holds a frozen graph's evaluation passes, whose convolutions and linear layers run
// over weights prepared once (a batch norm folded in), to a graph that is not frozen, pass after
// pass, and checks that Thaw and a training pass let a change of the weights through.
func TestFreeze(t *testing.T) {
	e := newEnv(t)
	ops, s, mem := e.ops, e.s, e.a
	m := nn.Sequential{
		nn.NewConv2d(64, 64, 3, nn.ConvOptions{Padding: 1}, true), // Winograd on the CPU
		nn.NewBatchNorm2d(64),
		nn.NewConv2d(64, 32, 1, nn.ConvOptions{Stride: 2}, false), // the implicit GEMM
		nn.NewLinear(5, 7, true),                                  // over the last dimension
	}
	if err := nn.Bind(m, mem, s, 7); err != nil {
		t.Fatal(err)
	}
	x, err := mem.F32(2 * 64 * 9 * 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Fill(s, x, 0.5); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pass := func(g *nn.Graph) []float32 {
		t.Helper()
		y := m.Forward(g.Input(x, 2, 64, 9, 9))
		v, err := y.Host(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// The batch norm is folded into the convolution before it: equal within float32 rounding.
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s: y[%d] = %v; want %v", what, i, got[i], want[i])
			}
		}
	}
	plain := nn.NewGraph(ops, s, mem, false, 1)
	want := pass(plain)
	frozen := nn.NewGraph(ops, s, mem, false, 1)
	frozen.Freeze()
	var first []float32
	for i := range 3 {
		frozen.Reset(false, 1)
		got := pass(frozen)
		same("frozen pass "+string(rune('1'+i)), got, want)
		if first == nil {
			first = got
		}
		for j := range got { // what was prepared and folded is kept: the same bits every pass
			if math.Float32bits(got[j]) != math.Float32bits(first[j]) {
				t.Fatalf("frozen pass %d: y[%d] = %v; the first pass gave %v", i+1, j, got[j], first[j])
			}
		}
	}

	// New weights: seen after Thaw, and after a training pass.
	w := m[0].(*nn.Conv2dLayer).Weight.Data()
	if err := ops.Scale(s, w, -2); err != nil {
		t.Fatal(err)
	}
	if err := ops.Scale(s, m[3].(*nn.LinearLayer).Weight.Data(), 3); err != nil {
		t.Fatal(err)
	}
	plain.Reset(false, 1)
	want = pass(plain)
	frozen.Thaw()
	frozen.Freeze()
	frozen.Reset(false, 1)
	same("after Thaw", pass(frozen), want)

	if err := ops.Scale(s, w, 0.5); err != nil {
		t.Fatal(err)
	}
	frozen.Reset(true, 1) // which updates the batch norm's statistics too
	pass(frozen)
	plain.Reset(false, 1)
	want = pass(plain)
	frozen.Reset(false, 1)
	frozen.Freeze()
	same("after a training pass", pass(frozen), want)
}

// TestFreezeBackward: a backward pass through a frozen graph's evaluation pass (an input's
// gradient, a saliency map) gives the gradients of a graph that is not frozen, though its
// convolutions ran over prepared weights, which leave nothing for the backward pass.
func TestFreezeBackward(t *testing.T) {
	e := newEnv(t)
	ops, s, mem := e.ops, e.s, e.a
	m := nn.Sequential{
		nn.NewConv2d(3, 8, 1, nn.ConvOptions{}, true), // unpadded: read in place when prepared
		nn.NewConv2d(8, 4, 3, nn.ConvOptions{Padding: 1}, false),
	}
	if err := nn.Bind(m, mem, s, 3); err != nil {
		t.Fatal(err)
	}
	x, err := mem.F32(3 * 6 * 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Fill(s, x, 0.25); err != nil {
		t.Fatal(err)
	}
	named, err := nn.StateDict(m)
	if err != nil {
		t.Fatal(err)
	}
	// The gradients of the input and of every parameter (the weights' need the forward pass's
	// workspace).
	grad := func(frozen bool) []float32 {
		g := nn.NewGraph(ops, s, mem, false, 1)
		if frozen {
			g.Freeze()
		}
		for _, n := range named {
			g.Attach(n.Tensor)
		}
		in := g.Input(x, 1, 3, 6, 6)
		if err := g.Backward(nn.Mean(m.Forward(in), nil, false), nil); err != nil {
			t.Fatal(err)
		}
		v, err := g.Grad(in).Host(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range named {
			gv := n.Tensor.GradData()
			host := make([]float32, gv.Len)
			if err := s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), gv.Buf, 4*gv.Off); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(context.Background()); err != nil {
				t.Fatal(err)
			}
			v = append(v, host...)
		}
		return v
	}
	want, got := grad(false), grad(true)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("gradient value %d = %v frozen; want %v", i, got[i], want[i])
		}
	}
}
