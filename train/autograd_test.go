package train

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// nnDense is Linear written as a module of package nn: a forward pass, no backward.
type nnDense struct {
	*nn.LinearLayer
	in, out int
}

func newNNDense(in, out int) *nnDense {
	return &nnDense{LinearLayer: nn.NewLinear(in, out, true), in: in, out: out}
}

func (d *nnDense) String() string                  { return fmt.Sprintf("nndense %d->%d", d.in, d.out) }
func (d *nnDense) Forward(x *nn.Tensor) *nn.Tensor { return d.LinearLayer.Forward(nn.Flatten(x)) }

// gatedNorm is a layer of several inputs and a tensor used twice: a layer norm and a
// squeeze-and-excitation-like gate computed from the same input, y = LN(x)·sigmoid(fc(x)).
type gatedNorm struct {
	Norm *nn.LayerNormLayer
	Gate *nn.LinearLayer
	d    int
}

func (m *gatedNorm) String() string { return fmt.Sprintf("gatednorm %d", m.d) }
func (m *gatedNorm) Forward(x *nn.Tensor) *nn.Tensor {
	return nn.Mul(m.Norm.Forward(x), nn.Sigmoid(m.Gate.Forward(x)))
}

func parseGatedNorm(desc string) (Module, error) {
	var d int
	if _, err := fmt.Sscanf(desc, "gatednorm %d", &d); err != nil {
		return nil, err
	}
	return NN(&gatedNorm{Norm: nn.NewLayerNorm(d), Gate: nn.NewLinear(d, d, true), d: d}), nil
}

// TestNNModule: a layer of package nn trains bit for bit as the built-in layer it rewrites, and a
// model holding a module with several uses of its input trains, checkpoints and is rebuilt.
func TestNNModule(t *testing.T) {
	f := newFixture(t, 300)
	builtin, err := Sequential("m", img8, 10, Flatten(), Linear(64, 32), ReLU(), Linear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	auto, err := Sequential("m", img8, 10, Custom(NN(newNNDense(64, 32))), ReLU(), Custom(NN(newNNDense(32, 10))))
	if err != nil {
		t.Fatal(err)
	}
	resA, trA := fit(t, f, builtin, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 4})
	resB, trB := fit(t, f, auto, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 4})
	if resA.FinalLoss != resB.FinalLoss || !slices.EqualFunc(weights(t, trA), weights(t, trB), slices.Equal) {
		t.Errorf("the nn module trains otherwise than Linear: loss %v and %v", resB.FinalLoss, resA.FinalLoss)
	}
	if names := []string{trB.m.params[0].Name, trB.m.params[3].Name}; !slices.Equal(names, []string{"0.nndense.weight", "2.nndense.bias"}) {
		t.Errorf("tensor names %v", names)
	}

	gated, err := Sequential("m", img8, 10, Flatten(), Linear(64, 32), Custom(NN(&gatedNorm{Norm: nn.NewLayerNorm(32), Gate: nn.NewLinear(32, 32, true), d: 32})),
		ReLU(), Linear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	res, tr := fit(t, f, gated, AdamW{LR: 3e-3}, Config{Epochs: 3, Seed: 4, Checkpoint: ck})
	if res.TestAcc < 0.8 {
		t.Errorf("a model with a gated layer norm: test accuracy %.3f; want >= 0.8", res.TestAcc)
	}
	if err := RegisterLayer("gatednorm", parseGatedNorm); err != nil {
		t.Fatal(err)
	}
	m, err := CheckpointModel(ck)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tr.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := New(context.Background(), m, f.dev, nil, Config{Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	got, err := tr2.Predict(t.Context(), f.test)
	if err != nil || !slices.Equal(got.Logits, want.Logits) {
		t.Fatalf("rebuilt model predicts otherwise (%v)", err)
	}
}
