package nn_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// twoLayers is fc2(relu(fc1(x))), with a tensor the pass does not use, a frozen one, and one
// used in a product the output does not depend on.
type twoLayers struct {
	FC1, FC2 *nn.LinearLayer
	Unused   *nn.Tensor
	Frozen   *nn.Tensor
	Side     *nn.Tensor
}

func (m *twoLayers) Forward(x *nn.Tensor) *nn.Tensor {
	nn.Mul(x, m.Side) // a result nothing reads: Side's gradient is zero
	return nn.Add(m.FC2.Forward(nn.ReLU(m.FC1.Forward(x))), m.Frozen)
}

// TestOnGradient: Backward calls the hook once per parameter it writes a gradient for, as soon
// as it is complete: the last layer's first (weight then bias, as the op takes them), the unused
// tensor's at the end after its zeros, none for a frozen one; an error from the hook ends
// Backward with it.
func TestOnGradient(t *testing.T) {
	e := newEnv(t)
	m := &twoLayers{FC1: nn.NewLinear(3, 4, true), FC2: nn.NewLinear(4, 2, true),
		Unused: nn.Param([]int{5}, nn.Weight), Frozen: nn.Param([]int{2}, nn.Zeros), Side: nn.Param([]int{3}, nn.Ones)}
	if err := nn.Bind(m, e.a, e.s, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Frozen.Bind(m.Frozen.Data(), kernels.F32{}); err != nil { // no gradient memory: frozen
		t.Fatal(err)
	}
	named, err := nn.StateDict(m)
	if err != nil {
		t.Fatal(err)
	}
	name := map[*nn.Tensor]string{}
	for _, n := range named {
		name[n.Tensor] = n.Name
	}
	for _, fail := range []bool{false, true} {
		g := e.graph(true)
		for _, n := range named {
			g.Attach(n.Tensor)
		}
		x := g.Constant([]float32{1, -2, 3, 0.5, 0.25, -1}, 2, 3)
		loss := nn.CrossEntropy(m.Forward(x), e.labels([]int32{1, 0}), 0)
		var got []string
		boom := errors.New("boom")
		if err := e.ops.Fill(e.s, m.Side.GradData(), 42); err != nil { // stale memory
			t.Fatal(err)
		}
		g.OnGradient(func(p *nn.Tensor) error {
			got = append(got, name[p])
			if p == m.Side {
				v, err := g.Input(p.GradData(), 3).Host(context.Background(), nil)
				if err != nil || !slices.Equal(v, []float32{0, 0, 0}) {
					t.Errorf("side's gradient when its hook runs: %v, %v; want zeros", v, err)
				}
			}
			if fail && len(got) == 2 {
				return boom
			}
			return nil
		})
		err := g.Backward(loss, nil)
		if fail {
			if !errors.Is(err, boom) || len(got) != 2 {
				t.Fatalf("a hook's error: Backward = %v after %d calls; want boom after 2", err, len(got))
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias", "side", "unused"}
		if !slices.Equal(got, want) {
			t.Fatalf("hook calls %v; want %v", got, want)
		}
	}
}
