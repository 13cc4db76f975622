package weights

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/safetensors"
)

// Resampler is a module (the model's, or one inside it) some of whose tensors can take a weights
// file's values made for another shape: a vision transformer's position embeddings, learned on
// one image size, resampled to the model's grid as timm's resample_abs_pos_embed does. Without
// it, weights trained at 224 px could not start a model of another image size. Load asks the
// module that holds a tensor whose shape differs from the file's.
type Resampler interface {
	// Resample returns the values of the module's tensor name (its nn.StateDict name) made from a
	// file's values of shape from, or an error saying why they cannot be (the tensor is then
	// reported mis-shaped). It must not keep values.
	Resample(name string, from []int, values []float32) ([]float32, error)
}

// Derived is a module (the model's, or one inside it) whose PyTorch twin keeps, as persistent
// buffers, tensors it derives from its configuration (a Swin's relative_position_index and V2's
// relative_coords_table). Stoke computes them in the forward pass, so they are neither trained
// nor loaded; but the twin's state_dict holds them, so Load accepts a file's copy when it equals
// the module's (and reports one that differs as mis-shaped: another window size), and package
// train's Export writes them, so that weights load strictly both ways.
type Derived interface {
	// Derived returns the derived tensors, named as in nn.StateDict.
	Derived() []nn.DerivedTensor
}

// DerivedTensors returns the derived tensors of module's Derived modules, named as in module's
// nn.StateDict.
func DerivedTensors(module nn.Module) []nn.DerivedTensor {
	var out []nn.DerivedTensor
	nn.Modules(module, func(name string, mod nn.Module) {
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

// resamplerOf is the innermost Resampler module holding the tensor of that name, and the
// tensor's name in it; nil when none.
func resamplerOf(module nn.Module, tensor string) (r Resampler, name string) {
	nn.Modules(module, func(prefix string, mod nn.Module) {
		if rs, ok := mod.(Resampler); ok && (prefix == "" || strings.HasPrefix(tensor, prefix+".")) {
			r, name = rs, strings.TrimPrefix(strings.TrimPrefix(tensor, prefix), ".")
		}
	})
	return r, name
}

// resample reads the file tensors that match left for their module to resample (the candidates:
// indices of tensors whose shape differs and whose module is a Resampler) and resamples them,
// reporting each as loaded and resampled, or as mis-shaped with the module's reason. It returns
// the values by tensor index. Memory: one host copy of each such file tensor, which the file's
// size bounds.
func resample(f *safetensors.File, module nn.Module, tensors []Tensor, rep *Report, candidates []int) (map[int][]float32, error) {
	out := map[int][]float32{}
	for _, i := range candidates {
		t := tensors[i]
		ft, _ := f.Tensor(t.Name)
		r, name := resamplerOf(module, t.Name)
		values := make([]float32, ft.Len())
		if err := f.Float32s(t.Name, values); err != nil {
			return nil, err
		}
		v, err := r.Resample(name, ft.Shape, values)
		if err == nil && len(v) != t.len() {
			err = fmt.Errorf("resampled to %d values; the model's tensor has %d", len(v), t.len())
		}
		if err != nil {
			rep.Mismatched = append(rep.Mismatched, fmt.Sprintf("%s: file %v, model %v (%v)", t.Name, ft.Shape, t.Shape, err))
			continue
		}
		rep.Loaded = append(rep.Loaded, t.Name)
		rep.Resampled = append(rep.Resampled, fmt.Sprintf("%s: file %v, model %v", t.Name, ft.Shape, t.Shape))
		out[i] = v
	}
	return out, nil
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
