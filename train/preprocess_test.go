package train

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/onnx"
	"github.com/stoke-ml/stoke/optim"
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
	pre := &models.Preprocess{Eval: models.EvalTransform{Mean: []float32{0.3}, Std: []float32{0.3}}, Classes: digits} // the fixture's
	ck := filepath.Join(dir, "ck")
	_, first := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Checkpoint: ck, Preprocess: pre})
	pre.Classes[0] = "changed after New"
	if got := first.Preprocess().Classes[0]; got != "zero" {
		t.Errorf("the trainer's class 0 is %q after the caller's slice changed; want its own copy's zero", got)
	}
	pre.Classes[0] = "zero"

	// Resumed without a Preprocess: the checkpoint's, which the next checkpoint keeps.
	ck2 := filepath.Join(dir, "ck2")
	fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Epochs: 2, Resume: ck, Checkpoint: ck2})
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
	if meta[onnx.MetaMean] != "0.3" || meta[onnx.MetaStd] != "0.3" {
		t.Errorf("ONNX normalization %q %q; want the checkpoint's 0.3 and 0.3", meta[onnx.MetaMean], meta[onnx.MetaStd])
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(meta[onnx.MetaPretrainedCfg]), &cfg); err != nil {
		t.Fatalf("%s: %q: %v", onnx.MetaPretrainedCfg, meta[onnx.MetaPretrainedCfg], err)
	}
	if cfg["crop_mode"] != "squash" || cfg["num_classes"] != 10.0 || len(cfg["label_names"].([]any)) != 10 ||
		!reflect.DeepEqual(cfg["input_size"], []any{1.0, 8.0, 8.0}) {
		t.Errorf("%s: %v", onnx.MetaPretrainedCfg, cfg)
	}

	// Without a Preprocess: none recorded, none in the ONNX file.
	ck3 := filepath.Join(dir, "ck3")
	fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Checkpoint: ck3})
	tr3, err := New(ctx, smallMLP(t), f.dev, nil, Config{Resume: ck3})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.Close()
	if got := tr3.Preprocess(); got != nil {
		t.Errorf("a checkpoint written without a Preprocess has %+v", got)
	}
	if v, ok := onnxMeta(exportONNX(t, tr3, nil, nil))[onnx.MetaPretrainedCfg]; ok {
		t.Errorf("an ONNX file of a trainer without a Preprocess records %s %s", onnx.MetaPretrainedCfg, v)
	}
	// A trainer has the record of the checkpoint it loaded last: none after ck3.
	if err := tr.Load(ctx, ck3); err != nil {
		t.Fatal(err)
	}
	if got := tr.Preprocess(); got != nil {
		t.Errorf("after loading a checkpoint without a record, Preprocess %+v; want nil", got)
	}
	// Resuming on data whose classes have other names is refused.
	renamed := pre.Clone()
	renamed.Classes[3] = "drei"
	if tr, err := New(ctx, smallMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{Resume: ck, Preprocess: renamed}); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "drei") {
		if err == nil {
			tr.Close()
		}
		t.Errorf("resume with other class names: %v; want ErrMismatch naming them", err)
	}
}

// TestPreprocessRefused: a Preprocess that does not fit the model is a configuration error before
// anything is allocated, and a checkpoint whose recorded one does not fit is refused as damaged.
func TestPreprocessRefused(t *testing.T) {
	ctx := context.Background()
	dev := openCPU(t)
	for name, pre := range map[string]*models.Preprocess{
		"class names":  {Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{1}}, Classes: digits[:3]},
		"channels":     {Eval: models.EvalTransform{Mean: []float32{0, 0, 0}, Std: []float32{1, 1, 1}}},
		"zero std":     {Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{0}}},
		"crop":         {Eval: models.EvalTransform{Resize: 256, Crop: 224, Mean: []float32{0}, Std: []float32{1}}},
		"resize":       {Eval: models.EvalTransform{Resize: 4, Crop: 8, Mean: []float32{0}, Std: []float32{1}}},
		"no normalize": {Eval: models.EvalTransform{Resize: 9, Crop: 8}},
	} {
		tr, err := New(ctx, smallMLP(t), dev, optim.SGD{LR: 0.1}, Config{Preprocess: pre})
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "preprocess") {
			t.Errorf("%s: New = %v; want ErrConfig naming the preprocessing", name, err)
		}
	}

	f := newFixture(t, 64)
	ck := filepath.Join(t.TempDir(), "ck")
	fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Checkpoint: ck,
		Preprocess: &models.Preprocess{Eval: models.EvalTransform{Mean: []float32{0}, Std: []float32{1}}, Classes: digits}})
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
