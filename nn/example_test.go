package nn_test

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// SE is the package doc's layer: squeeze-and-excitation, made of existing ops, with no backward
// pass of its own.
type SE struct{ FC1, FC2 *nn.LinearLayer }

func (m *SE) Forward(x *nn.Tensor) *nn.Tensor {
	s := nn.Mean(x, []int{2, 3}, true) // [N C 1 1]
	s = nn.Sigmoid(m.FC2.Forward(nn.ReLU(m.FC1.Forward(s.Reshape(s.Dim(0), s.Dim(1))))))
	return nn.Mul(x, s.Reshape(s.Dim(0), s.Dim(1), 1, 1))
}

// A module's forward pass and backward pass on the CPU backend: the state_dict names, the output
// shape, and a gradient for every parameter.
func Example() {
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	ops, _ := kernels.For(dev)
	s, _ := dev.NewStream()
	defer s.Close()
	mem := nn.NewArena(dev)
	defer mem.Free()

	m := &SE{FC1: nn.NewLinear(8, 2, true), FC2: nn.NewLinear(2, 8, true)}
	if err := nn.Bind(m, mem, s, 1); err != nil {
		fmt.Println(err)
		return
	}
	named, _ := nn.StateDict(m)
	g := nn.NewGraph(ops, s, mem, true, 1)
	for _, n := range named {
		fmt.Println(n.Name, n.Tensor.Shape())
		g.Attach(n.Tensor)
	}
	x, _ := mem.F32(4 * 8 * 3 * 3)
	y := m.Forward(g.Input(x, 4, 8, 3, 3))
	fmt.Println("output", y.Shape())
	if err := g.Backward(nn.Mean(y, nil, false), nil); err != nil {
		fmt.Println(err)
		return
	}
	grad, _ := named[0].Tensor.Host(context.Background(), g)
	fmt.Println("fc1.weight values", len(grad))
	// Output:
	// fc1.weight [2 8]
	// fc1.bias [2]
	// fc2.weight [8 2]
	// fc2.bias [8]
	// output [4 8 3 3]
	// fc1.weight values 16
}
