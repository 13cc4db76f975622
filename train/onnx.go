package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/onnx"
)

// The metadata_props keys ExportONNX writes.
const (
	// ONNXMetaModel is the model's description (Model.String).
	ONNXMetaModel = "stoke.model"
	// ONNXMetaInputShape is the shape of one input image, "C,H,W" ("3,224,224").
	ONNXMetaInputShape = "stoke.input_shape"
	// ONNXMetaMean and ONNXMetaStd are the per-channel normalization the input must have had,
	// comma-separated ("0.485,0.456,0.406").
	ONNXMetaMean = "stoke.mean"
	ONNXMetaStd  = "stoke.std"
	// ONNXMetaInput says in words what the input is.
	ONNXMetaInput = "stoke.input"
	// ONNXMetaPretrainedCfg is the trainer's Preprocess, when it has one, as JSON under timm's
	// pretrained_cfg keys: the whole evaluation transform that makes an image the input
	// (input_size, interpolation, crop_pct, crop_mode, mean, std, and resize, the exact shorter
	// side of a center crop's resize) and the class names (num_classes, label_names).
	ONNXMetaPretrainedCfg = "stoke.pretrained_cfg"
)

// ExportONNX writes the model to path as an ONNX model (opset onnx.Opset) that computes its
// logits in evaluation mode, as Predict does (onnx.FromModule writes the module's forward pass
// down). The graph's input "input" is a float32 tensor [N C H W] (NCHW, N dynamic, named
// "batch") of images already normalized: each pixel scaled to [0, 1], then (x - mean[c]) /
// std[c]. Its output "logits" is [N classes]. mean and std are the normalization the model was
// trained with (Data.Normalization: one value per channel; nil for the trainer's Preprocess's, or
// without one mean 0 and std 1); they are not part of the graph but recorded in its
// metadata_props, under ONNXMetaMean and ONNXMetaStd, with the input's shape
// (ONNXMetaInputShape), a description of the input (ONNXMetaInput), the model's own
// (ONNXMetaModel) and, when the trainer has a Preprocess, the whole evaluation transform and the
// class names (ONNXMetaPretrainedCfg). The weights are initializers under their state_dict names,
// as Export names them. A pass ONNX cannot write down gives an error wrapping ErrModel. The file
// is written atomically (a temporary file renamed over path), once the weights are read back
// from the device: if ctx ends first, nothing is written.
func (t *Trainer) ExportONNX(ctx context.Context, path string, mean, std []float32) error {
	m := t.m
	fail := func(err error) error { return fmt.Errorf("train: export onnx %s: %w", path, err) }
	var cfg *pretrainedCfg
	if t.pre != nil {
		if mean == nil && std == nil {
			mean, std = t.pre.Eval.Mean, t.pre.Eval.Std
		}
		cfg = t.pre.cfg(m.in, m.classes)
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
	if err := m.onnxMetadata(model, mean, std, cfg); err != nil {
		return fail(err)
	}
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

// onnxMetadata sets model's metadata and doc: m's description, its input, its normalization and
// its Preprocess (cfg, when there is one).
func (m *Model) onnxMetadata(model *onnx.Model, mean, std []float32, cfg *pretrainedCfg) error {
	in := m.in
	floats := func(v []float32) string {
		s := make([]string, len(v))
		for i, f := range v {
			s[i] = strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
		return strings.Join(s, ",")
	}
	input := fmt.Sprintf("float32 [N %d %d %d] (NCHW), each pixel scaled to [0, 1] then normalized per channel as (x - mean[c]) / std[c] "+
		"with %s and %s; output logits [N %d]", in.C, in.H, in.W, ONNXMetaMean, ONNXMetaStd, m.classes)
	model.Metadata = []onnx.Property{
		{Key: ONNXMetaModel, Value: m.String()},
		{Key: ONNXMetaInputShape, Value: fmt.Sprintf("%d,%d,%d", in.C, in.H, in.W)},
		{Key: ONNXMetaMean, Value: floats(mean)},
		{Key: ONNXMetaStd, Value: floats(std)},
		{Key: ONNXMetaInput, Value: input},
	}
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		model.Metadata = append(model.Metadata, onnx.Property{Key: ONNXMetaPretrainedCfg, Value: string(b)})
	}
	model.Doc = fmt.Sprintf("%s, exported by Stoke. Input: %s.", m.String(), input)
	return nil
}
