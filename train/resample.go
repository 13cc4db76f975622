package train

import (
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/safetensors"
)

// Resampler is a module (the model's, or one inside it) some of whose tensors can take a weights file's values made for
// another shape: a vision transformer's position embeddings, learned on one image size, resampled
// to the model's grid as timm's resample_abs_pos_embed does. Without it, weights trained at 224 px
// could not start a model of another image size. LoadWeights (and so Config.Init and stoke
// predict --weights) asks the module that holds a tensor whose shape differs from the file's.
type Resampler interface {
	// Resample returns the values of the module's tensor name (its nn.StateDict name) made from a
	// file's values of shape from, or an error saying why they cannot be (the tensor is then
	// reported mis-shaped). It must not keep values.
	Resample(name string, from []int, values []float32) ([]float32, error)
}

// resampled is a model tensor whose values were made from a file tensor of another shape.
type resampled struct {
	p      *Param
	values []float32
}

// resamplerOf is the innermost Resampler module holding p, and p's name in it; nil when none.
func (m *Model) resamplerOf(p *Param) (r Resampler, name string) {
	nn.Modules(m.module, func(prefix string, mod nn.Module) { // StateDict walked the same tree: no error
		if rs, ok := mod.(Resampler); ok && (prefix == "" || strings.HasPrefix(p.Name, prefix+".")) {
			r, name = rs, strings.TrimPrefix(strings.TrimPrefix(p.Name, prefix), ".")
		}
	})
	return r, name
}

// resample reads the file tensors that match left for their module to resample (those whose
// shape differs and whose module is a Resampler) and resamples them, reporting each as loaded and
// resampled, or as mis-shaped with the module's reason. Memory: one host copy of each such file
// tensor, which the file's size bounds.
func (m *Model) resample(f *safetensors.File, rep *WeightsReport, candidates []*Param) ([]resampled, error) {
	var out []resampled
	for _, p := range candidates {
		ft, _ := f.Tensor(p.Name)
		r, name := m.resamplerOf(p)
		values := make([]float32, ft.Len())
		if err := f.Float32s(p.Name, values); err != nil {
			return nil, err
		}
		v, err := r.Resample(name, ft.Shape, values)
		if err == nil && len(v) != p.Len() {
			err = fmt.Errorf("resampled to %d values; the model's tensor has %d", len(v), p.Len())
		}
		if err != nil {
			rep.Mismatched = append(rep.Mismatched, fmt.Sprintf("%s: file %v, model %v (%v)", p.Name, ft.Shape, p.Shape, err))
			continue
		}
		rep.Loaded = append(rep.Loaded, p.Name)
		rep.Resampled = append(rep.Resampled, fmt.Sprintf("%s: file %v, model %v", p.Name, ft.Shape, p.Shape))
		out = append(out, resampled{p, v})
	}
	return out, nil
}
