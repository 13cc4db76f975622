package optim_test

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// A loop of one's own: a linear layer fits y = 2x - 1 by SGD with momentum on nn's MSE, the
// optimizer's state kept by a State over the layer's parameters.
func ExampleState() {
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	ops, _ := kernels.For(dev)
	s, _ := dev.NewStream()
	defer s.Close()
	mem := nn.NewArena(dev)
	defer mem.Free()

	lin := nn.NewLinear(1, 1, true)
	if err := nn.Bind(lin, mem, s, 1); err != nil {
		fmt.Println(err)
		return
	}
	params, _ := optim.Params(lin)
	st, err := optim.NewState(optim.SGD{LR: 0.1, Momentum: 0.9}, ops, s, params, nil, mem.F32)
	if err != nil {
		fmt.Println(err)
		return
	}
	xs, ys := []float32{-1, 0, 1, 2}, []float32{-3, -1, 1, 3}
	g := nn.NewGraph(ops, s, mem, true, 1)
	g.Attach(lin.Weight, lin.Bias)
	for step := 1; step <= 200; step++ {
		g.Reset(true, 1)
		x, y := g.Constant(xs, 4, 1), g.Constant(ys, 4, 1)
		loss := nn.MSE(lin.Forward(x), y.Data())
		if err := g.Backward(loss, nil); err != nil {
			fmt.Println(err)
			return
		}
		if err := st.Step(ops, s, 0.1, step); err != nil {
			fmt.Println(err)
			return
		}
	}
	w, _ := lin.Weight.Host(context.Background(), nil)
	b, _ := lin.Bias.Host(context.Background(), nil)
	fmt.Printf("y = %.3fx %+.3f\n", w[0], b[0])
	// Output:
	// y = 2.000x -1.000
}
