package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/onnx"
)

// ExportONNX writes the model to path as an ONNX model (opset onnx.Opset) that computes its
// logits in evaluation mode, as Predict does (onnx.FromModule writes the module's forward pass
// down). The graph's input "input" is a float32 tensor [N C H W] (NCHW, N dynamic, named
// "batch") of images already normalized: each pixel scaled to [0, 1], then (x - mean[c]) /
// std[c]. Its output "logits" is [N classes]. mean and std are the normalization the model was
// trained with (Data.Normalization: one value per channel; nil for the trainer's Preprocess's, or
// without one mean 0 and std 1); they are not part of the graph but recorded in its
// metadata_props (onnx.Model.Describe: onnx.MetaMean and onnx.MetaStd), with the input's shape,
// a description of the input, the model's own (Model.String) and, when the trainer has a
// Preprocess, the whole evaluation transform and the class names (onnx.MetaPretrainedCfg). The weights are initializers under their state_dict names,
// as Export names them. A pass ONNX cannot write down gives an error wrapping ErrModel. The file
// is written atomically (a temporary file renamed over path), once the weights are read back
// from the device: if ctx ends first, nothing is written.
func (t *Trainer) ExportONNX(ctx context.Context, path string, mean, std []float32) error {
	m := t.m
	fail := func(err error) error { return fmt.Errorf("train: export onnx %s: %w", path, err) }
	var cfg *models.PretrainedCfg
	if t.pre != nil {
		if mean == nil && std == nil {
			mean, std = t.pre.Eval.Mean, t.pre.Eval.Std
		}
		cfg = t.pre.Cfg(m.in, m.classes)
	}
	mean, std, err := onnxNormalization(m.in.C, mean, std)
	if err != nil {
		return fail(err)
	}
	sd, err := t.StateDict(ctx)
	if err != nil {
		return fail(err)
	}
	weights := map[string][]float32{}
	for _, w := range sd {
		weights[w.Name] = w.F32
	}
	if cfg != nil {
		cfg.Mean, cfg.Std = mean, std
	}
	model, err := onnx.FromModule(m.name, m.module, []int{m.in.C, m.in.H, m.in.W}, m.classes, weights)
	if errors.Is(err, onnx.ErrNoForm) {
		return fail(fmt.Errorf("%w: %w", ErrModel, err))
	}
	if err != nil {
		return fail(err)
	}
	var cfgJSON []byte
	if cfg != nil {
		if cfgJSON, err = json.Marshal(cfg); err != nil {
			return fail(err)
		}
	}
	model.Describe(m.String(), []int{m.in.C, m.in.H, m.in.W}, m.classes, mean, std, cfgJSON)
	b, err := onnx.Marshal(model)
	if err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fail(err)
	}
	return nil
}

// onnxNormalization checks mean and std (one finite value per channel, std positive), nil
// meaning mean 0 and std 1.
func onnxNormalization(c int, mean, std []float32) ([]float32, []float32, error) {
	if mean == nil && std == nil {
		mean, std = make([]float32, c), make([]float32, c)
		for i := range std {
			std[i] = 1
		}
	}
	if len(mean) != c || len(std) != c {
		return nil, nil, fmt.Errorf("%w: normalization of %d means and %d stds for %d channels", ErrConfig, len(mean), len(std), c)
	}
	for i := range c {
		if math.IsNaN(float64(mean[i])) || math.IsInf(float64(mean[i]), 0) || !(std[i] > 0) || math.IsInf(float64(std[i]), 0) {
			return nil, nil, fmt.Errorf("%w: channel %d's normalization is mean %g, std %g; want finite values, std positive", ErrConfig, i, mean[i], std[i])
		}
	}
	return mean, std, nil
}
