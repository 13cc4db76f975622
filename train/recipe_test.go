package train

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// TestRecipesLearn: mlp, cnn and resnet8 (the resnets share a recipe), each trained with its recipe (optimizer, schedule, batch,
// label smoothing) learns the synthetic classes in two epochs: a recipe that diverges or does not
// train fails here, in seconds, before an MNIST run would show it.
func TestRecipesLearn(t *testing.T) {
	dev := openCPU(t)
	imgs, labels := synthetic(800, 1)
	timgs, tlabels := synthetic(300, 2)
	for _, name := range []string{"mlp", "cnn", "resnet8"} {
		r := models.RecipeFor(name)
		if r.Batch < 1 || !(r.LabelSmoothing >= 0 && r.LabelSmoothing < 1) || !(r.WarmupEpochs >= 0) {
			t.Fatalf("%s: recipe %v: want a batch >= 1, label smoothing in [0,1), a warm-up >= 0", name, r)
		}
		m, err := NewModel(name, img8, 10)
		if err != nil {
			t.Fatal(err)
		}
		data, test := newMemData(dev, imgs, labels, img8, r.Batch, true, 1), newMemData(dev, timgs, tlabels, img8, 100, false, 0)
		opt, err := optim.ForRecipe(r, r.Batch)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(context.Background(), m, dev, opt, Config{Epochs: 2, Seed: 1, Schedule: optim.Cosine(r.WarmupEpochs), LabelSmoothing: r.LabelSmoothing})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Fit(t.Context(), data, test)
		tr.Close()
		data.close()
		test.close()
		if err != nil {
			t.Fatalf("%s (%v): %v", name, r, err)
		}
		t.Logf("%s (%v): test accuracy %.3f, loss %.4f", name, r, res.TestAcc, res.FinalLoss)
		if res.TestAcc < 0.9 {
			t.Errorf("%s with its recipe (%v): test accuracy %.3f; want >= 0.9", name, r, res.TestAcc)
		}
	}
}

// stack is a model of package nn with an embedding, two blocks and a head, for LayerDecay.
type stack struct {
	Embed  *nn.Tensor
	Blocks []*nn.LinearLayer
	Head   *nn.LinearLayer
}

func (s *stack) String() string { return "stack" }

func (s *stack) Forward(x *nn.Tensor) *nn.Tensor {
	x = nn.Add(nn.Flatten(x), s.Embed)
	for _, b := range s.Blocks {
		x = nn.ReLU(b.Forward(x))
	}
	return s.Head.Forward(x)
}

func (s *stack) LayerID(name string) (id, last int) {
	switch {
	case name == "embed":
		return 0, 3
	case strings.HasPrefix(name, "blocks.0."):
		return 1, 3
	case strings.HasPrefix(name, "blocks.1."):
		return 2, 3
	}
	return 3, 3
}

// TestLayerDecay: Config.LayerDecay scales each tensor's learning rate by decay^(last-depth) as
// the model's optim.Layered module places it (BEiT's layer_decay), times BackboneLRScale; a model
// without blocks is refused; the next trainer of the model starts without them.
func TestLayerDecay(t *testing.T) {
	dev := openCPU(t)
	m, err := Net("stack", img8, 3, &stack{Embed: nn.Param([]int{64}, nn.Embedding),
		Blocks: []*nn.LinearLayer{nn.NewLinear(64, 16, true), nn.NewLinear(16, 16, true)}, Head: nn.NewLinear(16, 3, true)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.1}, Config{LayerDecay: 0.5, BackboneLRScale: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"embed": 0.125 * 0.1, "blocks.0.weight": 0.25 * 0.1, "blocks.0.bias": 0.25 * 0.1,
		"blocks.1.weight": 0.5 * 0.1, "blocks.1.bias": 0.5 * 0.1, "head.weight": 1, "head.bias": 1}
	for i, p := range m.Params() {
		if f := tr.optState.Factor(i); math.Abs(f-want[p.Name]) > 1e-15 {
			t.Errorf("%s: learning-rate scale %g; want %g", p.Name, f, want[p.Name])
		}
	}
	tr.Close()
	if tr, err = New(context.Background(), m, dev, optim.SGD{LR: 0.1}, Config{}); err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Params() {
		if f := tr.optState.Factor(i); f != 1 {
			t.Errorf("%s: learning-rate scale %g in the next trainer; want 1", p.Name, f)
		}
	}
	tr.Close()
	mlp, err := NewModel("mlp", img8, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), mlp, dev, optim.SGD{LR: 0.1}, Config{LayerDecay: 0.5}); !errors.Is(err, ErrConfig) {
		t.Errorf("LayerDecay on an mlp: %v; want ErrConfig", err)
	}
	if err := (Config{LayerDecay: 1}).Validate(); err == nil {
		t.Errorf("LayerDecay 1: no error")
	}
}
