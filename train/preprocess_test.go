package train

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/stoke-ml/stoke/models"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/onnx"
	"github.com/stoke-ml/stoke/transforms"
)

var digits = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}

// TestPreprocessRecorded: the Preprocess a trainer is given is what its checkpoint records, and a
// trainer that loads the checkpoint (to resume, predict or export) has it back, unchanged through
// a resume that gives none (package predict applies it and names the classes); ExportONNX records
// its normalization and the whole transform; a checkpoint written without one has none.
func TestPreprocessRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newFixture(t, 64)
	pre := &Preprocess{Eval: models.EvalTransform{Mean: []float32{0.3}, Std: []float32{0.3}}, Classes: digits} // the fixture's
	ck := filepath.Join(dir, "ck")
	_, first := fit(t, f, smallMLP(t), SGD{LR: 0.1}, Config{Checkpoint: ck, Preprocess: pre})
	pre.Classes[0] = "changed after New"
	if got := first.Preprocess().Classes[0]; got != "zero" {
		t.Errorf("the trainer's class 0 is %q after the caller's slice changed; want its own copy's zero", got)
	}
	pre.Classes[0] = "zero"

	// Resumed without a Preprocess: the checkpoint's, which the next checkpoint keeps.
	ck2 := filepath.Join(dir, "ck2")
	fit(t, f, smallMLP(t), SGD{LR: 0.1}, Config{Epochs: 2, Resume: ck, Checkpoint: ck2})
	for _, path := range []string{ck, ck2} {
		m, err := CheckpointModel(path)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(ctx, m, f.dev, nil, Config{Resume: path})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if got := tr.Preprocess(); !reflect.DeepEqual(got, pre) {
			t.Errorf("%s: Preprocess %+v; want %+v", path, got, pre)
		}
	}

	// ONNX: the normalization and the transform from the checkpoint, no mean or std given.
	m, err := CheckpointModel(ck)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(ctx, m, f.dev, nil, Config{Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	meta := onnxMeta(exportONNX(t, tr, nil, nil))
	if meta[ONNXMetaMean] != "0.3" || meta[ONNXMetaStd] != "0.3" {
		t.Errorf("ONNX normalization %q %q; want the checkpoint's 0.3 and 0.3", meta[ONNXMetaMean], meta[ONNXMetaStd])
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(meta[ONNXMetaPretrainedCfg]), &cfg); err != nil {
		t.Fatalf("%s: %q: %v", ONNXMetaPretrainedCfg, meta[ONNXMetaPretrainedCfg], err)
	}
	if cfg["crop_mode"] != "squash" || cfg["num_classes"] != 10.0 || len(cfg["label_names"].([]any)) != 10 ||
		!reflect.DeepEqual(cfg["input_size"], []any{1.0, 8.0, 8.0}) {
		t.Errorf("%s: %v", ONNXMetaPretrainedCfg, cfg)
	}

	// Without a Preprocess: none recorded, none in the ONNX file.
	ck3 := filepath.Join(dir, "ck3")
	fit(t, f, smallMLP(t), SGD{LR: 0.1}, Config{Checkpoint: ck3})
	tr3, err := New(ctx, smallMLP(t), f.dev, nil, Config{Resume: ck3})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.Close()
	if got := tr3.Preprocess(); got != nil {
		t.Errorf("a checkpoint written without a Preprocess has %+v", got)
	}
	if v, ok := onnxMeta(exportONNX(t, tr3, nil, nil))[ONNXMetaPretrainedCfg]; ok {
		t.Errorf("an ONNX file of a trainer without a Preprocess records %s %s", ONNXMetaPretrainedCfg, v)
	}
	// A trainer has the record of the checkpoint it loaded last: none after ck3.
	if err := tr.Load(ctx, ck3); err != nil {
		t.Fatal(err)
	}
	if got := tr.Preprocess(); got != nil {
		t.Errorf("after loading a checkpoint without a record, Preprocess %+v; want nil", got)
	}
	// Resuming on data whose classes have other names is refused.
	renamed := pre.clone()
	renamed.Classes[3] = "drei"
	if tr, err := New(ctx, smallMLP(t), f.dev, SGD{LR: 0.1}, Config{Resume: ck, Preprocess: renamed}); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "drei") {
		if err == nil {
			tr.Close()
		}
		t.Errorf("resume with other class names: %v; want ErrMismatch naming them", err)
	}
}

// TestPreprocessCenterCrop: a resize and central crop round-trips through the checkpoint, keeping
// the exact resize, and its Chain is the models.EvalTransform's at the input size.
func TestPreprocessCenterCrop(t *testing.T) {
	pre := &Preprocess{Eval: models.EvalTransform{Resize: 9, Crop: 8, Filter: transforms.Bicubic, Mean: []float32{0.5}, Std: []float32{0.25}}}
	cfg := pre.cfg(img8, 10)
	if cfg.CropMode != "center" || cfg.Resize != 9 || cfg.CropPct != 8.0/9 || cfg.Interpolation != "bicubic" {
		t.Errorf("pretrained_cfg %+v", cfg)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back pretrainedCfg
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.preprocess(img8, 10)
	if err != nil || !reflect.DeepEqual(got, pre) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, pre)
	}
	if a, b := got.Chain(img8).String(), pre.Eval.Chain(8).String(); a != b {
		t.Errorf("Chain %s; want %s", a, b)
	}
}

// TestPreprocessRefused: a Preprocess that does not fit the model is a configuration error before
// anything is allocated, and a checkpoint whose recorded one does not fit is refused as damaged.
func TestPreprocessRefused(t *testing.T) {
	ctx := context.Background()
	dev := openCPU(t)
	for name, pre := range map[string]*Preprocess{
		"class names":  {Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{1}}, Classes: digits[:3]},
		"channels":     {Eval: models.EvalTransform{Mean: []float32{0, 0, 0}, Std: []float32{1, 1, 1}}},
		"zero std":     {Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{0}}},
		"crop":         {Eval: models.EvalTransform{Resize: 256, Crop: 224, Mean: []float32{0}, Std: []float32{1}}},
		"resize":       {Eval: models.EvalTransform{Resize: 4, Crop: 8, Mean: []float32{0}, Std: []float32{1}}},
		"no normalize": {Eval: models.EvalTransform{Resize: 9, Crop: 8}},
	} {
		tr, err := New(ctx, smallMLP(t), dev, SGD{LR: 0.1}, Config{Preprocess: pre})
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "preprocess") {
			t.Errorf("%s: New = %v; want ErrConfig naming the preprocessing", name, err)
		}
	}

	f := newFixture(t, 64)
	ck := filepath.Join(t.TempDir(), "ck")
	fit(t, f, smallMLP(t), SGD{LR: 0.1}, Config{Checkpoint: ck,
		Preprocess: &Preprocess{Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{1}}, Classes: digits}})
	c, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Meta[metaPretrainedCfg]
	if !strings.Contains(cfg, `"crop_mode":"squash"`) {
		t.Fatalf("the checkpoint's %s is %q; want the squash crop mode", metaPretrainedCfg, cfg)
	}
	// A version 3 checkpoint kept it in the loop's state: it still loads.
	v3 := *c
	v3.State = []byte(strings.Replace(string(c.State), `{`, `{"pretrained_cfg":`+cfg+`,`, 1))
	old := filepath.Join(t.TempDir(), "v3")
	if err := os.WriteFile(old, v3.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	tr3, err := New(ctx, smallMLP(t), dev, nil, Config{Resume: old})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr3.Preprocess(); got == nil || !slices.Equal(got.Classes, digits) {
		t.Errorf("a version 3 checkpoint's Preprocess: %+v; want its classes", got)
	}
	tr3.Close()
	c.Meta[metaPretrainedCfg] = strings.Replace(cfg, `"crop_mode":"squash"`, `"crop_mode":"diagonal"`, 1)
	bad := filepath.Join(t.TempDir(), "bad")
	if err := checkpoint.Write(bad, c, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := New(ctx, smallMLP(t), dev, nil, Config{Resume: bad})
	if err == nil {
		tr.Close()
	}
	if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "diagonal") {
		t.Errorf("a checkpoint with crop_mode diagonal: %v; want ErrCheckpoint naming it", err)
	}
}

// onnxMeta is the metadata_props of an ONNX model.
func onnxMeta(m *onnx.Model) map[string]string {
	meta := map[string]string{}
	for _, p := range m.Metadata {
		meta[p.Key] = p.Value
	}
	return meta
}

// TestPreprocessOfTimmConfig: timm's config.json of convnext_atto.d2_in1k gives the transform
// timm's create_transform builds from it (Resize(235, bicubic), CenterCrop(224), ImageNet's
// normalization; at 288, its test_input_size, Resize(303)); a config of other classes, or no
// JSON, is refused.
func TestPreprocessOfTimmConfig(t *testing.T) {
	config := []byte(`{"architecture": "convnext_atto", "num_classes": 1000, "num_features": 320,
		"pretrained_cfg": {"tag": "d2_in1k", "custom_load": false, "input_size": [3, 224, 224], "test_input_size": [3, 288, 288],
		"fixed_input_size": false, "interpolation": "bicubic", "crop_pct": 0.95, "test_crop_pct": 1.0, "crop_mode": "center",
		"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "num_classes": 1000, "pool_size": [7, 7],
		"first_conv": "stem.0", "classifier": "head.fc"}}`)
	for _, tc := range []struct {
		in           Shape
		resize, crop int
	}{{Shape{}, 235, 224}, {Shape{C: 3, H: 224, W: 224}, 235, 224}, {Shape{C: 3, H: 288, W: 288}, 303, 288}} {
		p, err := PreprocessOf(config, tc.in, 1000*min(tc.in.H, 1))
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		want := models.EvalTransform{Resize: tc.resize, Crop: tc.crop, Filter: transforms.Bicubic,
			Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225}}
		if !reflect.DeepEqual(p.Eval, want) || p.Classes != nil {
			t.Errorf("%v: %+v, classes %v; want %+v", tc.in, p.Eval, p.Classes, want)
		}
	}
	if _, err := PreprocessOf(config, Shape{C: 3, H: 224, W: 224}, 10); err == nil || !strings.Contains(err.Error(), "1000 classes; the model has 10") {
		t.Errorf("a config of 1000 classes for a model of 10: %v", err)
	}
	if _, err := PreprocessOf([]byte("<html>"), Shape{}, 0); err == nil {
		t.Error("no JSON: no error")
	}
}
