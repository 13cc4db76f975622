package nn

import (
	"errors"
	"slices"
	"testing"
)

// TestInferGroupedConv: shape inference runs a grouped convolution whose weights are parameters
// attached to no graph (as train's Setup does), a trace writes it as one conv2d step of the
// parameters with its groups, and a failed op before a Concat is reported as the graph's error,
// not a panic.
func TestInferGroupedConv(t *testing.T) {
	dw := NewConv2d(8, 8, 3, ConvOptions{Padding: 1, Groups: 8}, true)
	grouped := NewConv2d(8, 4, 1, ConvOptions{Stride: 2, Groups: 2}, false)
	out, err := Infer(Sequential{dw, grouped}, true, 2, 8, 6, 6)
	if err != nil || !slices.Equal(out, []int{2, 4, 3, 3}) {
		t.Errorf("Infer = %v, %v; want [2 4 3 3]", out, err)
	}
	steps, _, _, err := Trace(dw, 1, 8, 6, 6)
	if err != nil || len(steps) != 1 || steps[0].Op != "conv2d" || steps[0].Attr["groups"] != 8 ||
		len(steps[0].In) != 3 || steps[0].In[1] != dw.Weight || steps[0].In[2] != dw.Bias {
		t.Errorf("Trace of a depthwise convolution: %+v, %v; want one conv2d step of groups 8 over the input, weight and bias", steps, err)
	}
	_, err = Infer(Fn(func(x *Tensor) *Tensor { return Concat(1, x.Reshape(5, -1), x) }), true, 2, 8)
	if !errors.Is(err, ErrShape) {
		t.Errorf("Infer of a concat after a failed reshape: %v; want ErrShape", err)
	}
}
