package models

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// TestEvalTransforms: the evaluation transform of every model NewModel knows is that of its
// default weights, torchvision's weights.transforms() or timm's create_transform of its
// pretrained_cfg (resize, crop, interpolation, mean, std); a model neither has weights for takes
// transforms.Eval's (resize 256, crop 224, bilinear, ImageNet's).
func TestEvalTransforms(t *testing.T) {
	py := timmPython()
	if py == "" {
		t.Skip("no python3 with torch, torchvision and timm (set STOKE_PYTHON)")
	}
	names := train.Models()
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "eval_transforms.py")}, names...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.Bytes())
	}
	filters := map[string]transforms.Filter{"bilinear": transforms.Bilinear, "bicubic": transforms.Bicubic, "lanczos": transforms.Lanczos}
	sc := bufio.NewScanner(bytes.NewReader(out))
	seen, weights := 0, 0
	for sc.Scan() {
		var w struct {
			Name         string
			Resize, Crop int
			Filter       string
			Mean, Std    []float32
		}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		seen++
		want := train.EvalTransform{Resize: 256, Crop: 224, Filter: transforms.Bilinear, Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}
		if w.Resize != 0 {
			f, ok := filters[w.Filter]
			if !ok {
				t.Fatalf("%s: interpolation %q", w.Name, w.Filter)
			}
			want = train.EvalTransform{Resize: w.Resize, Crop: w.Crop, Filter: f, Mean: w.Mean, Std: w.Std}
			weights++
		}
		if got := train.EvalTransformFor(w.Name); got.String() != want.String() {
			t.Errorf("EvalTransformFor(%q) = %v; its weights' is %v", w.Name, got, want)
		}
	}
	if seen != len(names) || weights < 60 {
		t.Fatalf("%d models compared, %d with weights; want %d, most with weights", seen, weights, len(names))
	}
	// With arguments, the model keeps its name's.
	if got, want := train.EvalTransformFor("swin_t(stochastic_depth_prob=0.1)"), train.EvalTransformFor("swin_t"); !slices.Equal(
		[]int{got.Resize, got.Crop, int(got.Filter)}, []int{want.Resize, want.Crop, int(want.Filter)}) {
		t.Errorf("swin_t with arguments: %v; without: %v", got, want)
	}
}
