package models_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/hub"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/predict"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// TestEvalTransforms: the evaluation transform of every model NewModel knows is that of its
// default weights, torchvision's weights.transforms() or timm's create_transform of its
// pretrained_cfg (resize, crop, interpolation, mean, std); a model neither has weights for takes
// transforms.Eval's (resize 256, crop 224, bilinear, ImageNet's).
func TestEvalTransforms(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	names := models.Names()
	out := runPython(t, py, "eval_transforms.py", names...)
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
		want := models.EvalTransform{Resize: 256, Crop: 224, Filter: transforms.Bilinear, Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}
		if w.Resize != 0 {
			f, ok := transforms.ParseFilter(w.Filter)
			if !ok {
				t.Fatalf("%s: interpolation %q", w.Name, w.Filter)
			}
			want = models.EvalTransform{Resize: w.Resize, Crop: w.Crop, Filter: f, Mean: w.Mean, Std: w.Std}
			weights++
		}
		if got := models.EvalTransformFor(w.Name); got.String() != want.String() {
			t.Errorf("EvalTransformFor(%q) = %v; its weights' is %v", w.Name, got, want)
		}
	}
	if seen != len(names) || weights < 60 {
		t.Fatalf("%d models compared, %d with weights; want %d, most with weights", seen, weights, len(names))
	}
	// With arguments, the model keeps its name's.
	if got, want := models.EvalTransformFor("swin_t(stochastic_depth_prob=0.1)"), models.EvalTransformFor("swin_t"); !slices.Equal(
		[]int{got.Resize, got.Crop, int(got.Filter)}, []int{want.Resize, want.Crop, int(want.Filter)}) {
		t.Errorf("swin_t with arguments: %v; without: %v", got, want)
	}
}

// TestEvalTransformsTorchvisionDefault: the evaluation transform of every model with torchvision
// weights is that of its DEFAULT weights in package hub's table, the one place that gives each
// weights name its own (hub.TransformOf).
func TestEvalTransformsTorchvisionDefault(t *testing.T) {
	n := 0
	for _, name := range models.Names() {
		tv, ok := hub.TransformOf(name + ".DEFAULT")
		if !ok {
			continue
		}
		n++
		want := models.EvalTransform{Resize: tv.Resize, Crop: tv.Crop, Filter: tv.Filter, Mean: tv.Mean[:], Std: tv.Std[:]}
		if got := models.EvalTransformFor(name); got.String() != want.String() {
			t.Errorf("EvalTransformFor(%q) = %v; its DEFAULT weights' (hub.TransformOf) is %v", name, got, want)
		}
	}
	if n < 50 {
		t.Errorf("%d models with torchvision weights; want the zoo's 50 and more", n)
	}
}

// TestPredictorEvalTransform: a Predictor of a timm ViT built at 16 px, given no transform,
// applies its augreg weights' (bicubic, mean and std 0.5), the resize scaled to the size
// (floor(16*248/224) = 17): its logits are those of that transform given by hand, bit for bit,
// and not those of transforms.Eval.
func TestPredictorEvalTransform(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := train.NewModel("timm/vit_tiny_patch16_224(img_size=16,patch_size=8,embed_dim=16,depth=1,num_heads=2)", train.Shape{C: 3, H: 16, W: 16}, 3)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(context.Background(), m, dev, nil, train.Config{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := rand.New(rand.NewPCG(7, 7))
	pix := make([]byte, 23*29*3)
	for i := range pix {
		pix[i] = byte(r.IntN(256))
	}
	in := []transforms.Input{{Pixels: pix, H: 23, W: 29, C: 3}}
	half := []float32{0.5, 0.5, 0.5}
	logits := func(cfg predict.Config) []float32 {
		p, err := predict.New(tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out, err := p.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if mean, std := p.Normalization(); cfg.Transform == nil && (!slices.Equal(mean, half) || !slices.Equal(std, half)) {
			t.Errorf("default normalization %v, %v; want the augreg weights' 0.5", mean, std)
		}
		return out[0].Logits
	}
	got := logits(predict.Config{})
	want := logits(predict.Config{Transform: transforms.Compose(transforms.ResizeFilter(17, transforms.Bicubic), transforms.CenterCrop(16),
		transforms.Normalize(half, half))})
	eval := logits(predict.Config{Transform: transforms.Eval(16)})
	for c := range got {
		if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
			t.Fatalf("default transform's logits %v; the weights' transform's %v", got, want)
		}
	}
	if slices.Equal(got, eval) {
		t.Errorf("default transform's logits %v equal transforms.Eval's", got)
	}
}
