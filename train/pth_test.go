package train

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/weights"
)

// TestLoadWeightsPth: a state_dict that torch.save wrote (package pth's testdata: float32,
// float16, bfloat16 and float64 tensors, views, an int64 count) loads into a model of those
// tensors as its safetensors twin would, the halves converted exactly.
func TestLoadWeightsPth(t *testing.T) {
	m, err := Net("pth-test", img8, 2, &pthModel{FC: nn.NewLinear(3, 2, true)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(t.Context(), m, openCPU(t), nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	rep, err := tr.LoadWeights(t.Context(), filepath.Join("..", "pth", "testdata", "small.pth"), weights.Options{Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Loaded, []string{"fc.weight", "fc.bias"}) {
		t.Errorf("loaded %v; want fc.weight, fc.bias", rep.Loaded)
	}
	got := modelWeights(t, tr)
	if !slices.Equal(got[0], []float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}) || !slices.Equal(got[1], []float32{0.5, -1}) {
		t.Errorf("weights %v; want the file's", got)
	}
}

// pthModel is a linear layer fc over the first 3 values of each image.
type pthModel struct{ FC *nn.LinearLayer }

func (m *pthModel) Forward(x *nn.Tensor) *nn.Tensor {
	return m.FC.Forward(nn.Narrow(nn.Flatten(x), 1, 0, 3))
}
