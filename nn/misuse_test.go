package nn_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// Misuse of the ops is a graph error naming the op and the shapes, never a panic, never a wrong
// value: tensors of two graphs, a parameter attached to another graph, sizes that are negative or
// overflow, a head count that does not divide a width, Backward of a loss that reaches nothing.
func TestMisuseIsAGraphError(t *testing.T) {
	e := newEnv(t)
	input := func(g *nn.Graph, shape ...int) *nn.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v, err := e.a.F32(n)
		if err != nil {
			t.Fatal(err)
		}
		return g.Input(v, shape...)
	}
	bound := func(shape ...int) *nn.Tensor {
		w := nn.Param(shape, nn.Weight)
		if err := nn.Bind(paramModule{w}, e.a, e.s, 1); err != nil {
			t.Fatal(err)
		}
		return w
	}
	forward := func(pass func(g *nn.Graph) *nn.Tensor) func(g *nn.Graph) error {
		return func(g *nn.Graph) error {
			pass(g)
			return g.Err()
		}
	}
	cases := []struct {
		name string
		pass func(g *nn.Graph) error
		is   error
		says string
	}{
		{"operands of two graphs", forward(func(g *nn.Graph) *nn.Tensor {
			return nn.Add(input(g, 2, 3), input(e.graph(true), 2, 3))
		}), nn.ErrGraph, "add: operands of two graphs"},
		{"a parameter attached to another graph", forward(func(g *nn.Graph) *nn.Tensor {
			w := bound(4, 3)
			e.graph(true).Attach(w)
			return nn.Linear(input(g, 2, 3), w, nil)
		}), nn.ErrGraph, "linear: operands of two graphs"},
		{"a head count that does not divide the width", forward(func(g *nn.Graph) *nn.Tensor {
			x := input(g, 2, 5, 6)
			heads := 4
			q := x.Reshape(x.Dim(0), x.Dim(1), heads, x.Dim(2)/heads) // 6 is not 4 heads
			parts := nn.Split(q, -1, q.Dim(-1)/2, q.Dim(-1)/2)
			return nn.ScaledDotProductAttention(parts[0], parts[1], parts[1], 1)
		}), nn.ErrShape, "reshape [2 5 6] to [2 5 4 1]"},
		{"a dimension out of range", forward(func(g *nn.Graph) *nn.Tensor {
			x := input(g, 2, 3)
			return nn.Scale(x, float32(x.Dim(2)))
		}), nn.ErrShape, "dimension 2 of a tensor of shape [2 3]"},
		{"a negative size", forward(func(g *nn.Graph) *nn.Tensor { return g.Full(1, -1, 3) }), nn.ErrShape, "shape [-1 3]"},
		{"a size that overflows", forward(func(g *nn.Graph) *nn.Tensor { return g.Full(1, 1<<31, 1<<31) }), nn.ErrShape, "too large"},
		{"a kernel's refusal", forward(func(g *nn.Graph) *nn.Tensor {
			return nn.MaxPool2d(input(g, 1, 1, 2, 2), 3, 1, 0)
		}), nn.ErrArgument, "max pool of [1 1 2 2]"},
		{"a loss that reaches no parameter", func(g *nn.Graph) error {
			w := bound(4, 3)
			g.Attach(w)
			x := input(g, 2, 3)
			_ = nn.Linear(x, w, nil) // the model's output, forgotten
			return g.Backward(nn.Sum(nn.Mul(x, x), nil, false), nil)
		}, nn.ErrGraph, "reaches no parameter"},
		{"a loss that reaches nothing", func(g *nn.Graph) error {
			x := input(g, 2, 3)
			x.SetRequiresGrad(false)
			return g.Backward(nn.Sum(x, nil, false), nil)
		}, nn.ErrGraph, "reaches no parameter or input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			err := c.pass(e.graph(true))
			if !errors.Is(err, c.is) || !strings.Contains(fmt.Sprint(err), c.says) {
				t.Fatalf("error %v; want %v saying %q", err, c.is, c.says)
			}
		})
	}
}

// A loss that reaches a parameter through a frozen one's neighbour, or an input alone when no
// parameter is attached, still has its Backward.
func TestBackwardReaches(t *testing.T) {
	e := newEnv(t)
	g := e.graph(true)
	v, err := e.a.F32(6)
	if err != nil {
		t.Fatal(err)
	}
	x := g.Input(v, 2, 3)
	if err := g.Backward(nn.Sum(nn.Mul(x, x), nil, false), nil); err != nil {
		t.Fatalf("a loss of an input with no parameter attached: %v", err)
	}
	if g.Grad(x) == nil {
		t.Fatal("no gradient for the input")
	}
}
