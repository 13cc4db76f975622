package nn_test

import (
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

func TestTrace(t *testing.T) {
	lin := nn.NewLinear(4, 3, true)
	m := nn.Sequential{lin, nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Softmax(nn.AddScalar(nn.GELU(x), 1)) })}
	steps, in, out, err := nn.Trace(m, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	var ops []nn.Op
	for _, s := range steps {
		ops = append(ops, s.Op)
	}
	if want := []nn.Op{nn.OpLinear, nn.OpGELU, nn.OpFull, nn.OpAdd, nn.OpSoftmax}; !slices.Equal(ops, want) {
		t.Fatalf("ops %v; want %v", ops, want)
	}
	if lin.Weight.Graph() != nil {
		t.Error("Trace left the parameters attached to its graph")
	}
	if steps[0].In[0] != in || steps[0].In[1] != lin.Weight || steps[0].In[2] != lin.Bias || steps[4].Out != out {
		t.Error("the steps' operands are not the input, the parameters and earlier outputs")
	}
	if steps[3].In[0] != steps[1].Out || steps[3].In[1] != steps[2].Out || steps[2].Attr["value"] != float32(1) {
		t.Errorf("add reads %v; full's value %v", steps[3].In, steps[2].Attr["value"])
	}
	if !slices.Equal(out.Shape(), []int{2, 3}) {
		t.Errorf("output shape %v", out.Shape())
	}
	if _, _, _, err := nn.Trace(nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.MatMul(x, x) }), 2, 3); err == nil {
		t.Error("a shape mismatch traced without error")
	}
}

// TestTraceReshapedParameter: a parameter reshaped in the forward pass (a per-channel scale) is a
// step of the trace reading the parameter, and Infer sees its shape.
func TestTraceReshapedParameter(t *testing.T) {
	w := nn.Param([]int{3}, nn.Ones)
	m := &scaled{W: w}
	steps, _, out, err := nn.Trace(m, 2, 3, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].Op != "reshape" || steps[0].In[0] != w || steps[1].Op != "mul" || steps[1].In[1] != steps[0].Out {
		t.Errorf("steps %+v", steps)
	}
	if shape, err := nn.Infer(&scaled{W: nn.Param([]int{5}, nn.Ones)}, false, 2, 3, 4, 4); err == nil {
		t.Errorf("Infer of a [5] scale over 3 channels: shape %v, no error", shape)
	}
	if !slices.Equal(out.Shape(), []int{2, 3, 4, 4}) {
		t.Errorf("output %v", out.Shape())
	}
}

type scaled struct{ W *nn.Tensor }

func (s *scaled) Forward(x *nn.Tensor) *nn.Tensor { return nn.Mul(x, s.W.Reshape(s.W.Dim(0), 1, 1)) }
