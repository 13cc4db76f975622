package nn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// env is a CPU device, its op set and a stream, freed by the test's cleanup.
type env struct {
	t   testing.TB
	ops kernels.Ops
	s   gpu.Stream
	a   *nn.Arena
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e, release := openEnv(t)
	t.Cleanup(release)
	return e
}

// openEnv is newEnv with the release left to the caller.
func openEnv(t testing.TB) (*env, func()) {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	a := nn.NewArena(dev)
	return &env{t: t, ops: ops, s: s, a: a}, func() {
		s.Close()
		a.Free()
		dev.Close()
	}
}

func (e *env) graph(train bool) *nn.Graph { return nn.NewGraph(e.ops, e.s, e.a, train, 7) }

// labels uploads class ids.
func (e *env) labels(ids []int32) kernels.I32 {
	t := e.t
	t.Helper()
	v, err := e.a.F32(len(ids))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.CopyH2D(v.Buf, 0, unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))); err != nil {
		t.Fatal(err)
	}
	return kernels.I32(v)
}

// floats uploads float targets.
func (e *env) floats(v []float32) kernels.F32 {
	t := e.t
	t.Helper()
	d, err := e.a.F32(len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.CopyH2D(d.Buf, 4*d.Off, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))); err != nil {
		t.Fatal(err)
	}
	return d
}

// gradCase is one op's gradient check: f maps the inputs (of the given shapes) to a tensor.
type gradCase struct {
	name   string
	shapes [][]int
	f      func(e *env, xs []*nn.Tensor) *nn.Tensor
	// positive draws inputs in [0.5, 1.5] (log, sqrt, div); otherwise in [-1, 1].
	positive bool
	train    bool
	// h is the finite difference's step (default 1e-2); smaller where a kink is near (max pool).
	h float64
}

func gradCases() []gradCase {
	un := func(name string, f func(*nn.Tensor) *nn.Tensor, pos bool) gradCase {
		return gradCase{name: name, shapes: [][]int{{3, 5}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return f(x[0]) }, positive: pos}
	}
	two := func(name string, a, b []int, f func(x, y *nn.Tensor) *nn.Tensor) gradCase {
		return gradCase{name: name, shapes: [][]int{a, b}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return f(x[0], x[1]) }}
	}
	return []gradCase{
		un("exp", nn.Exp, false), un("log", nn.Log, true), un("sqrt", nn.Sqrt, true), un("rsqrt", nn.Rsqrt, true),
		un("sigmoid", nn.Sigmoid, false), un("tanh", nn.Tanh, false), un("gelu", nn.GELU, false),
		un("gelu tanh", nn.GELUTanh, false), un("silu", nn.SiLU, false), un("relu", nn.ReLU, false),
		un("hardswish", func(x *nn.Tensor) *nn.Tensor { return nn.Hardswish(nn.Scale(x, 4)) }, false),
		un("hardsigmoid", func(x *nn.Tensor) *nn.Tensor { return nn.Hardsigmoid(nn.Scale(x, 4)) }, false),
		un("relu6", func(x *nn.Tensor) *nn.Tensor { return nn.ReLU6(nn.Scale(x, 8)) }, false),
		un("softmax", nn.Softmax, false),
		un("scale and add scalar", func(x *nn.Tensor) *nn.Tensor { return nn.AddScalar(nn.Scale(x, -3), 2) }, false),
		two("add", []int{2, 3}, []int{2, 3}, nn.Add),
		two("add broadcast row", []int{2, 3}, []int{3}, nn.Add),
		two("sub broadcast both", []int{2, 1, 4}, []int{3, 1}, nn.Sub),
		two("mul broadcast column", []int{4, 3}, []int{4, 1}, nn.Mul),
		{name: "div", shapes: [][]int{{2, 3}, {3}}, positive: true, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Div(x[0], x[1]) }},
		{name: "a tensor used twice", shapes: [][]int{{2, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Add(nn.Mul(x[0], x[0]), nn.Exp(x[0]))
		}},
		two("matmul", []int{3, 4}, []int{4, 2}, nn.MatMul),
		two("matmul batched", []int{2, 3, 4}, []int{2, 4, 5}, nn.MatMul),
		two("matmul shared right", []int{2, 3, 4}, []int{4, 2}, nn.MatMul),
		two("matmul shared left", []int{3, 4}, []int{2, 4, 2}, nn.MatMul),
		{name: "linear", shapes: [][]int{{2, 3, 4}, {5, 4}, {5}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Linear(x[0], x[1], x[2]) }},
		{name: "sum keepdim", shapes: [][]int{{2, 3, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Sum(x[0], []int{0, 2}, true) }},
		{name: "mean last", shapes: [][]int{{2, 3, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Mean(x[0], []int{-1}, false) }},
		{name: "reshape", shapes: [][]int{{2, 6}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Exp(x[0].Reshape(3, -1)) }},
		{name: "permute", shapes: [][]int{{2, 3, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Permute(x[0], 2, 0, 1) }},
		{name: "transpose", shapes: [][]int{{3, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Transpose(x[0], 0, 1) }},
		{name: "narrow first dim (a view)", shapes: [][]int{{4, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Narrow(x[0], 0, 1, 2) }},
		{name: "narrow inner dim", shapes: [][]int{{2, 5, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Narrow(x[0], 1, 2, 2) }},
		{name: "split and concat", shapes: [][]int{{2, 5}, {2, 2}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			p := nn.Split(x[0], 1, 2, 3)
			return nn.Concat(1, nn.Mul(p[1], p[1]), x[1], p[0])
		}},
		// The gradients of a tensor's slices are gathered into one (Backward): slices with a gap
		// between them and a use of the whole tensor besides, slices that overlap, slices along
		// two dimensions, a slice used twice.
		{name: "narrows with a gap, and the whole", shapes: [][]int{{2, 7, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			a, b := nn.Narrow(x[0], 1, 5, 2), nn.Narrow(x[0], 1, 0, 2)
			return nn.Add(nn.Sum(nn.Mul(x[0], x[0]), []int{1}, true), nn.Concat(1, nn.Exp(a), b))
		}},
		{name: "overlapping narrows", shapes: [][]int{{3, 6}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Mul(nn.Narrow(x[0], 1, 0, 4), nn.Exp(nn.Narrow(x[0], 1, 2, 4)))
		}},
		{name: "narrows along two dimensions", shapes: [][]int{{4, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			a := nn.Narrow(x[0], 0, 1, 2)
			return nn.Mul(a, nn.Transpose(nn.Narrow(x[0], 1, 0, 2), 0, 1).Reshape(2, 4))
		}},
		{name: "a narrow used twice", shapes: [][]int{{2, 5}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			p := nn.Split(x[0], 1, 3, 2)
			return nn.Concat(1, nn.Mul(p[0], p[0]), nn.Exp(p[1]), p[1])
		}},
		{name: "scaled dot-product attention", shapes: [][]int{{2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.ScaledDotProductAttention(nn.Scale(x[0], 3), x[1], x[2], 0.5)
		}},
		{name: "layer norm", shapes: [][]int{{3, 6}, {6}, {6}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.LayerNorm(x[0], x[1], x[2], 1e-5)
		}},
		{name: "conv2d", shapes: [][]int{{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Conv2d(x[0], x[1], x[2], nn.ConvOptions{Stride: 2, Padding: 1})
		}},
		{name: "conv2d grouped", shapes: [][]int{{1, 4, 4, 4}, {6, 2, 3, 3}, {6}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Conv2d(x[0], x[1], x[2], nn.ConvOptions{Padding: 1, Groups: 2})
		}},
		{name: "conv2d depthwise", shapes: [][]int{{2, 3, 5, 5}, {3, 1, 3, 3}, {3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Conv2d(x[0], x[1], x[2], nn.ConvOptions{Padding: 1, Groups: 3})
		}},
		{name: "conv2d depthwise strided, no bias", shapes: [][]int{{1, 4, 7, 6}, {4, 1, 5, 5}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor {
			return nn.Conv2d(x[0], x[1], nil, nn.ConvOptions{Stride: 2, Padding: 2, Groups: 4})
		}},
		{name: "batch norm (training)", train: true, shapes: [][]int{{4, 3, 2, 2}, {3}, {3}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			g := x[0].Graph()
			return nn.BatchNorm(x[0], g.Full(0, 3), g.Full(1, 3), x[1], x[2], 0.1, 1e-5)
		}},
		{name: "batch norm (evaluation)", shapes: [][]int{{4, 3, 2, 2}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			g := x[0].Graph()
			return nn.BatchNorm(x[0], g.Full(0.25, 3), g.Full(2, 3), g.Full(1.5, 3), g.Full(0.5, 3), 0.1, 1e-5)
		}},
		{name: "max pool", h: 1e-3, shapes: [][]int{{1, 2, 4, 4}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.MaxPool2d(x[0], 2, 2, 0) }},
		{name: "global average pool", shapes: [][]int{{2, 3, 2, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.GlobalAvgPool(x[0]) }},
		{name: "dropout", train: true, shapes: [][]int{{4, 8}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.Dropout(x[0], 0.5) }},
		{name: "drop path", train: true, shapes: [][]int{{8, 2, 3}}, f: func(_ *env, x []*nn.Tensor) *nn.Tensor { return nn.DropPath(x[0], 0.5) }},
		{name: "cross-entropy", shapes: [][]int{{3, 5}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			return nn.CrossEntropy(x[0], e.labels([]int32{4, 0, 2}), 0.1)
		}},
		{name: "soft cross-entropy", shapes: [][]int{{2, 3}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			return nn.SoftCrossEntropy(x[0], e.floats([]float32{0.2, 0.5, 0.3, 1, 0, 0}))
		}},
		{name: "bce with logits", shapes: [][]int{{2, 3}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			return nn.BCEWithLogits(x[0], e.floats([]float32{1, 0, 1, 0, 0, 1}), e.floats([]float32{2, 1, 0.5}))
		}},
		{name: "mse", shapes: [][]int{{2, 3}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			return nn.MSE(x[0], e.floats([]float32{0.5, -0.5, 0, 1, 0.25, -1}))
		}},
		{name: "smooth l1", shapes: [][]int{{2, 3}}, f: func(e *env, x []*nn.Tensor) *nn.Tensor {
			return nn.SmoothL1(x[0], e.floats([]float32{0.5, -0.5, 0, 1, 0.25, -1}), 0.5)
		}},
	}
}

// TestGradients checks every op's VJP against central finite differences: the loss is
// Σ w·f(x) with fixed random w, its gradient by Backward, and each input element's derivative by
// (L(x+h) − L(x−h))/2h, in float64 over the float32 forward passes.
func TestGradients(t *testing.T) {
	e := newEnv(t)
	for _, tc := range gradCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			xs := make([][]float32, len(tc.shapes))
			for i, sh := range tc.shapes {
				xs[i] = make([]float32, prod(sh))
				for j := range xs[i] {
					if tc.positive {
						xs[i][j] = float32(0.5 + r.Float64())
					} else {
						xs[i][j] = float32(2*r.Float64() - 1)
					}
				}
			}
			var w []float32
			// loss runs the forward pass on xs and returns Σ w·y, and the graph and inputs.
			loss := func() (float64, *nn.Graph, []*nn.Tensor, *nn.Tensor) {
				g := e.graph(tc.train)
				in := make([]*nn.Tensor, len(xs))
				for i, v := range xs {
					in[i] = g.Constant(v, tc.shapes[i]...)
					in[i] = g.Input(in[i].Data(), tc.shapes[i]...)
				}
				y := tc.f(e, in)
				host, err := y.Host(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if w == nil {
					w = make([]float32, len(host))
					for i := range w {
						w[i] = float32(2*r.Float64() - 1)
					}
				}
				var l float64
				for i, v := range host {
					l += float64(w[i]) * float64(v)
				}
				return l, g, in, y
			}
			_, g, in, y := loss()
			if err := g.Backward(y, g.Constant(w, y.Shape()...)); err != nil {
				t.Fatal(err)
			}
			grads := make([][]float32, len(in))
			for i, x := range in {
				gx := g.Grad(x)
				if gx == nil {
					t.Fatalf("input %d has no gradient", i)
				}
				var err error
				if grads[i], err = gx.Host(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
			}
			h := 1e-2
			if tc.h != 0 {
				h = tc.h
			}
			for i := range xs {
				var worst, scale float64
				for j := range xs[i] {
					scale = max(scale, math.Abs(float64(grads[i][j])))
				}
				for j := range xs[i] {
					v := xs[i][j]
					xs[i][j] = v + float32(h)
					lp, _, _, _ := loss()
					xs[i][j] = v - float32(h)
					lm, _, _, _ := loss()
					xs[i][j] = v
					fd := (lp - lm) / (2 * h)
					worst = max(worst, math.Abs(fd-float64(grads[i][j])))
				}
				if worst > 2e-3*max(scale, 1) {
					t.Errorf("input %d %v: largest |finite difference − VJP| %.3g (largest gradient %.3g)", i, tc.shapes[i], worst, scale)
				}
			}
		})
	}
}

func prod(s []int) int {
	p := 1
	for _, v := range s {
		p *= v
	}
	return p
}
