package nn

import (
	"errors"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// Attr holds an op's settings in a Step: "stride", "padding" and "groups" of a conv2d, "eps" of a
// norm, "perm" of a permute, "dim", "start" and "length" of a narrow, "keep" (the kept shape) of a
// sum, "alpha" of a scale, "scale" of a scaled_dot_product_attention, "value" of a full, "values"
// of a constant, "p" of a dropout.
type Attr map[string]any

// Step is one op of a traced forward pass: its name (an Op's: "add", "linear", "conv2d", "gelu",
// ...; the elementwise functions by kernels.UnaryFunc's names), its operands (tensors of the trace, or
// parameters and buffers, which StateDict names), its result and its settings. The steps are
// what another format (ONNX) needs to write the pass down.
type Step struct {
	Op   Op
	In   []*Tensor
	Out  *Tensor
	Attr Attr
}

// Trace runs m's forward pass in evaluation mode on an input of the given shape without memory
// or kernels and returns its steps in order, the input and the output. Every tensor a step reads
// is the input, one of m's parameters or buffers (StateDict), or the output of an earlier step.
func Trace(m Module, shape ...int) (steps []Step, in, out *Tensor, err error) {
	g := &Graph{meta: true}
	restore, err := g.lend(m)
	if err != nil {
		return nil, nil, nil, err
	}
	defer restore()
	in = g.Input(kernels.F32{}, shape...)
	out = m.Forward(in)
	if g.err != nil {
		return nil, nil, nil, g.err
	}
	if out == nil || out.g != g {
		return nil, nil, nil, errors.New("nn: the forward pass returned no tensor of its graph")
	}
	for _, n := range g.nodes[1:] {
		steps = append(steps, Step{Op: n.op, In: slices.Clone(n.ins), Out: n.out, Attr: n.attr})
	}
	return steps, in, out, nil
}
