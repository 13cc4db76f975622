package models

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/transforms"
)

// Preprocess is what a checkpoint records of the images its model was trained on, so that the
// model is served without them, as timm keeps a model's pretrained_cfg: the evaluation transform
// that makes an image the model's input, and the names of the classes. Config.Preprocess gives
// it to the trainer (train.Config.Preprocess) and its checkpoint records it; a trainer that loads
// the checkpoint has it back (train.Trainer.Preprocess), package predict applies it and the ONNX
// export records it.
type Preprocess struct {
	// Eval is the evaluation transform at the model's input size: Crop is the input's side. A
	// zero Resize and Crop mean that an image is resized to the input's height and width
	// (bilinear) without a crop, as stoke does to digits and other fixed-shape data (timm's
	// crop_mode "squash"); Mean and Std are the normalization either way.
	Eval EvalTransform
	// Classes names the classes in the order of the model's outputs; nil when the data named
	// none (MNIST's digits).
	Classes []string
}

// squash reports whether the transform resizes to the input without a crop.
func (p *Preprocess) squash() bool { return p.Eval.Resize == 0 && p.Eval.Crop == 0 }

// Chain returns the transform that makes an image the input of a model whose input is in: the
// resize and central crop of Eval (or the resize to in's size), its normalization, JPEG decoded
// exactly as PIL does.
func (p *Preprocess) Chain(in Shape) *transforms.Chain {
	if p.squash() {
		return transforms.Compose(transforms.ResizeTo(in.H, in.W), transforms.Normalize(p.Eval.Mean, p.Eval.Std)).
			WithDecode(transforms.ExactDecode)
	}
	return p.Eval.Chain(in.H)
}

// Check reports whether p fits a model whose input is in, with classes outputs.
func (p *Preprocess) Check(in Shape, classes int) error {
	e := p.Eval
	switch {
	case p.squash():
		if len(e.Mean) != in.C || len(e.Std) != in.C {
			return fmt.Errorf("preprocess: %d means and %d stds for a model of %d channels", len(e.Mean), len(e.Std), in.C)
		}
		if err := transforms.CheckNormalization(e.Mean, e.Std); err != nil {
			return fmt.Errorf("preprocess: %w", err)
		}
	case e.Crop != in.H || e.Crop != in.W:
		return fmt.Errorf("preprocess: a crop of %d for a model of input %v", e.Crop, in)
	case len(e.Mean) != in.C:
		return fmt.Errorf("preprocess: %d means for a model of %d channels", len(e.Mean), in.C)
	default:
		if err := e.Check(); err != nil {
			return fmt.Errorf("preprocess: %w", err)
		}
	}
	if p.Classes != nil && len(p.Classes) != classes {
		return fmt.Errorf("preprocess: %d class names for a model of %d classes", len(p.Classes), classes)
	}
	return nil
}

// Clone returns a copy of p that shares no slice with it (nil for nil).
func (p *Preprocess) Clone() *Preprocess {
	if p == nil {
		return nil
	}
	c := *p
	c.Eval.Mean, c.Eval.Std, c.Classes = slices.Clone(p.Eval.Mean), slices.Clone(p.Eval.Std), slices.Clone(p.Classes)
	return &c
}

// PretrainedCfg is a Preprocess as a checkpoint and an ONNX export hold it, under timm's
// pretrained_cfg keys, and "resize", the exact side crop_pct rounds (timm resizes to
// floor(crop/crop_pct)).
type PretrainedCfg struct {
	InputSize     []int     `json:"input_size"`
	Interpolation string    `json:"interpolation"`
	CropPct       float64   `json:"crop_pct"`
	CropMode      string    `json:"crop_mode"`
	Resize        int       `json:"resize,omitempty"`
	Mean          []float32 `json:"mean"`
	Std           []float32 `json:"std"`
	NumClasses    int       `json:"num_classes"`
	LabelNames    []string  `json:"label_names,omitempty"`
}

// Cfg is p as the PretrainedCfg of a model whose input is in, with classes outputs.
func (p *Preprocess) Cfg(in Shape, classes int) *PretrainedCfg {
	c := &PretrainedCfg{InputSize: []int{in.C, in.H, in.W}, Interpolation: p.Eval.Filter.String(), CropPct: 1, CropMode: "squash",
		Mean: p.Eval.Mean, Std: p.Eval.Std, NumClasses: classes, LabelNames: p.Classes}
	if !p.squash() {
		c.CropPct, c.CropMode, c.Resize = float64(p.Eval.Crop)/float64(p.Eval.Resize), "center", p.Eval.Resize
	}
	return c
}

// Preprocess is the Preprocess c describes, checked against a model whose input is in, with
// classes outputs.
func (c *PretrainedCfg) Preprocess(in Shape, classes int) (*Preprocess, error) {
	p := &Preprocess{Eval: EvalTransform{Mean: c.Mean, Std: c.Std}, Classes: c.LabelNames}
	switch c.CropMode {
	case "squash":
	case "center":
		p.Eval.Resize, p.Eval.Crop = c.Resize, in.H
	default:
		return nil, fmt.Errorf("preprocess: crop_mode %q; want center or squash", c.CropMode)
	}
	f, ok := transforms.ParseFilter(c.Interpolation)
	if !ok {
		return nil, fmt.Errorf("preprocess: interpolation %q", c.Interpolation)
	}
	p.Eval.Filter = f
	if len(c.InputSize) != 3 || c.InputSize[0] != in.C || c.InputSize[1] != in.H || c.InputSize[2] != in.W || c.NumClasses != classes {
		return nil, fmt.Errorf("preprocess: input_size %v and %d classes for a model of input %v and %d classes", c.InputSize, c.NumClasses, in, classes)
	}
	return p, p.Check(in, classes)
}

// ConfigInput is the input shape and the class count of a model's config.json on the Hugging Face
// hub (timm's pretrained_cfg: input_size, num_classes), as PreprocessOf reads it.
func ConfigInput(config []byte) (Shape, int, error) {
	c, err := readPretrainedCfg(config)
	if err != nil {
		return Shape{}, 0, err
	}
	if len(c.InputSize) != 3 {
		return Shape{}, 0, fmt.Errorf("models: config.json: input_size %v; want [C, H, W]", c.InputSize)
	}
	return Shape{C: c.InputSize[0], H: c.InputSize[1], W: c.InputSize[2]}, c.NumClasses, nil
}

// readPretrainedCfg reads config.json's pretrained_cfg, with the class count and label names at
// the top when it has none, and timm's default crop mode.
func readPretrainedCfg(config []byte) (PretrainedCfg, error) {
	var file struct {
		Cfg        PretrainedCfg `json:"pretrained_cfg"`
		NumClasses int           `json:"num_classes"`
		LabelNames []string      `json:"label_names"`
	}
	if err := json.Unmarshal(config, &file); err != nil {
		return PretrainedCfg{}, fmt.Errorf("models: config.json: %w", err)
	}
	c := file.Cfg
	if c.NumClasses == 0 {
		c.NumClasses = file.NumClasses
	}
	if c.LabelNames == nil {
		c.LabelNames = file.LabelNames
	}
	if c.CropMode == "" {
		c.CropMode = "center" // timm's default
	}
	return c, nil
}

// PreprocessOf reads the config.json that timm keeps beside a model's weights on the Hugging Face
// hub: its pretrained_cfg (input_size, interpolation, crop_pct, crop_mode, mean, std) and the
// class count and label_names (there or at the top). For a model whose input is in with classes
// outputs, the model's input decides the crop (as timm's test_input_size or stoke's --size may
// differ from input_size) and the resize is floor(crop/crop_pct), as timm computes it; a zero in
// gives the config's own input_size and class count. A config of another class count, or of
// settings stoke does not apply, is an error.
func PreprocessOf(config []byte, in Shape, classes int) (*Preprocess, error) {
	c, err := readPretrainedCfg(config)
	if err != nil {
		return nil, err
	}
	if in == (Shape{}) {
		if in, classes, err = ConfigInput(config); err != nil {
			return nil, err
		}
	}
	c.InputSize = []int{in.C, in.H, in.W}
	if c.NumClasses != classes {
		return nil, fmt.Errorf("models: config.json: %d classes; the model has %d", c.NumClasses, classes)
	}
	if c.CropMode == "center" && c.Resize == 0 {
		if !(c.CropPct > 0 && c.CropPct <= 1) {
			return nil, fmt.Errorf("models: config.json: crop_pct %v; want in (0, 1]", c.CropPct)
		}
		c.Resize = int(math.Floor(float64(in.H) / c.CropPct))
	}
	p, err := c.Preprocess(in, classes)
	if err != nil {
		return nil, fmt.Errorf("models: config.json: %w", err)
	}
	return p, nil
}
