package nn_test

import (
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

func TestTrace(t *testing.T) {
	lin := nn.NewLinear(4, 3, true)
	steps, in, out, err := nn.Trace(func(x *nn.Tensor) *nn.Tensor {
		return nn.Softmax(nn.AddScalar(nn.GELU(lin.Forward(x)), 1))
	}, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, s := range steps {
		ops = append(ops, s.Op)
	}
	if want := []string{"linear", "gelu", "full", "add", "softmax"}; !slices.Equal(ops, want) {
		t.Fatalf("ops %v; want %v", ops, want)
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
	if _, _, _, err := nn.Trace(func(x *nn.Tensor) *nn.Tensor { return nn.MatMul(x, x) }, 2, 3); err == nil {
		t.Error("a shape mismatch traced without error")
	}
}
