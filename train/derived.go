package train

import (
	"fmt"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/safetensors"
)

// Derived is a module (the model's, or one inside it) whose PyTorch twin keeps, as persistent buffers, tensors it derives from
// its configuration (a Swin's relative_position_index and V2's relative_coords_table). Stoke
// computes them in the forward pass, so they are neither trained nor loaded; but the twin's
// state_dict holds them, so LoadWeights accepts a file's copy when it equals the module's (and
// reports one that differs as mis-shaped: another window size), and Export writes them, so that
// weights load strictly both ways.
type Derived interface {
	// Derived returns the derived tensors, named as in nn.StateDict.
	Derived() []nn.DerivedTensor
}

// derived returns the derived tensors of the model's Derived modules, named as in the model.
func (m *Model) derived() []nn.DerivedTensor {
	var out []nn.DerivedTensor
	nn.Modules(m.module, func(name string, mod nn.Module) { // StateDict walked the same tree: no error
		if d, ok := mod.(Derived); ok {
			for _, t := range d.Derived() {
				if name != "" {
					t.Name = name + "." + t.Name
				}
				out = append(out, t)
			}
		}
	})
	return out
}

// checkDerived reports why the tensor t of file f is not the derived tensor d, or nil when it
// equals it: the same shape, and the same values (as int64 for an index of any integer dtype;
// float32 within 1e-6 of the largest, or 1e-2 for F16 and BF16, for a float table).
func checkDerived(f *safetensors.File, t safetensors.TensorInfo, d nn.DerivedTensor) error {
	if !slices.Equal(t.Shape, d.Shape) {
		return fmt.Errorf("file %v, model %v (derived from the model's configuration)", t.Shape, d.Shape)
	}
	differ := fmt.Errorf("the values differ from those the model derives from its configuration")
	if d.I64 != nil {
		if t.DType[0] != 'I' && t.DType[0] != 'U' {
			return fmt.Errorf("dtype %s; an index is an integer", t.DType)
		}
		got := make([]int64, t.Len())
		if err := f.Int64s(t.Name, got); err != nil {
			return err
		}
		if !slices.Equal(got, d.I64) {
			return differ
		}
		return nil
	}
	got := make([]float32, t.Len())
	if err := f.Float32s(t.Name, got); err != nil {
		return err
	}
	tol := 1e-6
	if t.DType != "F32" {
		tol = 1e-2
	}
	big := 1.0
	for _, v := range d.F32 {
		big = max(big, math.Abs(float64(v)))
	}
	for i, want := range d.F32 {
		if math.Abs(float64(got[i])-float64(want)) > tol*big {
			return differ
		}
	}
	return nil
}
