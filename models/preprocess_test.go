package models

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/transforms"
)

// in8 is the input of the tests' models: one channel of 8x8.
var in8 = Shape{C: 1, H: 8, W: 8}

// TestPreprocessCenterCrop: a resize and central crop round-trips through the checkpoint, keeping
// the exact resize, and its Chain is the EvalTransform's at the input size.
func TestPreprocessCenterCrop(t *testing.T) {
	pre := &Preprocess{Eval: EvalTransform{Resize: 9, Crop: 8, Filter: transforms.Bicubic, Mean: []float32{0.5}, Std: []float32{0.25}}}
	cfg := pre.Cfg(in8, 10)
	if cfg.CropMode != "center" || cfg.Resize != 9 || cfg.CropPct != 8.0/9 || cfg.Interpolation != "bicubic" {
		t.Errorf("pretrained_cfg %+v", cfg)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back PretrainedCfg
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.Preprocess(in8, 10)
	if err != nil || !reflect.DeepEqual(got, pre) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, pre)
	}
	if a, b := got.Chain(in8).String(), pre.Eval.Chain(8).String(); a != b {
		t.Errorf("Chain %s; want %s", a, b)
	}
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
		want := EvalTransform{Resize: tc.resize, Crop: tc.crop, Filter: transforms.Bicubic,
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
