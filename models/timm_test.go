package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/weights"
)

// timmCases are the zoo's timm builders next to timm.create_model with the same arguments: small
// configurations, 3-channel images of the given size, 5 classes.
var timmCases = []struct {
	spec, python string
	size         int
}{
	{"timm/vit_tiny_patch16_224(img_size=32,patch_size=4,depth=2)",
		"timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=4, depth=2, num_classes=5)", 32},
	{"timm/deit_small_patch16_224(img_size=16,patch_size=4,embed_dim=64,depth=2,num_heads=4,mlp_ratio=2.5)",
		"timm.create_model('deit_small_patch16_224', img_size=16, patch_size=4, embed_dim=64, depth=2, num_heads=4, mlp_ratio=2.5, num_classes=5)", 16},
	{"timm/convnext_atto(drop_path_rate=0.1)", "timm.create_model('convnext_atto', drop_path_rate=0.1, num_classes=5)", 32},
	{"timm/convnext_tiny", "timm.create_model('convnext_tiny', num_classes=5)", 32},
	{"timm/efficientnet_b0", "timm.create_model('efficientnet_b0', num_classes=5)", 32},
	{"timm/efficientnet_b2(drop_rate=0.3,drop_path_rate=0.2)", "timm.create_model('efficientnet_b2', drop_rate=0.3, drop_path_rate=0.2, num_classes=5)", 32},
}

// TestTimm: each model of timmCases, built by timm with random weights and BatchNorm statistics
// and saved as safetensors, loads strictly into the zoo's model of the same name and arguments;
// on the same pixels its eval-mode logits equal timm's within 1e-5 of the largest.
func TestTimm(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	for _, tc := range timmCases {
		t.Run(tc.spec, func(t *testing.T) { compareParity(t, py, tc.spec, tc.size, 1e-5, tc.python) })
	}
}

// TestResamplePosEmbed: weights of a ViT made for one image size load into the same ViT for
// another (a larger grid, and a smaller one), timm's layout and torchvision's, the position
// embeddings resampled; the model predicts as timm's model of that size does with the weights'
// position embeddings resampled by timm's resample_abs_pos_embed.
func TestResamplePosEmbed(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	timmViT := func(size int) string {
		return "timm.create_model('vit_tiny_patch16_224', img_size=" + strconv.Itoa(size) + ", patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=5)"
	}
	for _, tc := range []struct {
		spec, from, at string
		size           int
		resampled      string
	}{
		{"timm/vit_tiny_patch16_224(img_size=48,patch_size=4,embed_dim=32,depth=2,num_heads=2)", timmViT(32), timmViT(48), 48,
			"pos_embed: file [1 65 32], model [1 145 32]"},
		{"timm/vit_tiny_patch16_224(img_size=20,patch_size=4,embed_dim=32,depth=2,num_heads=2)", timmViT(32), timmViT(20), 20,
			"pos_embed: file [1 65 32], model [1 26 32]"},
		{"vit(image_size=24,patch_size=4,num_layers=2,num_heads=2,hidden_dim=16,mlp_dim=32)",
			"torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=5)",
			"torchvision.models.VisionTransformer(24, 4, 2, 2, 16, 32, num_classes=5)", 24,
			"encoder.pos_embedding: file [1 17 16], model [1 37 16]"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			rep := compareParity(t, py, tc.spec, tc.size, 1e-5, tc.from, tc.at)
			if !slices.Equal(rep.Resampled, []string{tc.resampled}) {
				t.Errorf("report: resampled %q; want %q", rep.Resampled, tc.resampled)
			}
		})
	}
}

// TestBicubic: Stoke's bicubic resize of a random [1 C H W] tensor equals torch's
// F.interpolate(mode="bicubic", align_corners=False, antialias=False) within 1e-5 of its
// largest value, upsampling, downsampling, to a non-square grid and to the same size.
func TestBicubic(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy")
	const h, w, c = 7, 5, 3
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, h*w*c) // channels last
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	sizes := [][2]int{{14, 10}, {3, 2}, {11, 4}, {7, 5}, {1, 1}}
	in, _ := json.Marshal(src)
	sz, _ := json.Marshal(sizes)
	script := `import json, sys, torch
src = torch.tensor(json.loads(sys.argv[1])).reshape(1, ` + strconv.Itoa(h) + `, ` + strconv.Itoa(w) + `, ` + strconv.Itoa(c) + `).permute(0, 3, 1, 2)
for oh, ow in json.loads(sys.argv[2]):
    y = torch.nn.functional.interpolate(src, size=(oh, ow), mode="bicubic", align_corners=False, antialias=False)
    print(json.dumps(y.permute(0, 2, 3, 1).reshape(-1).tolist()))`
	out, err := exec.Command(py, "-c", script, string(in), string(sz)).Output()
	if err != nil {
		t.Fatalf("torch: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(sizes) {
		t.Fatalf("torch printed %d lines; want %d", len(lines), len(sizes))
	}
	for i, s := range sizes {
		var want []float32
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, s[0]*s[1]*c)
		models.Bicubic(got, src, h, w, c, s[0], s[1])
		var worst, scale float64
		for j := range want {
			worst = max(worst, math.Abs(float64(got[j]-want[j])))
			scale = max(scale, math.Abs(float64(want[j])))
		}
		if len(want) != len(got) || worst > 1e-5*scale {
			t.Errorf("%dx%d to %dx%d: %d values, differing from torch's %d by up to %.3g (largest %.3g)", h, w, s[0], s[1], len(got), len(want), worst, scale)
		}
	}
}

// TestResamplePosEmbedShapes: the same grid resamples to itself exactly and the class token's
// embedding is kept; shapes that are not a class token and a square grid of the model's width
// are refused with the reason, and LoadWeights reports such a tensor mis-shaped.
func TestResamplePosEmbedShapes(t *testing.T) {
	const e = 3
	values := make([]float32, (1+16)*e)
	for i := range values {
		values[i] = float32(i%7) - 2.5
	}
	same, err := models.ResamplePosEmbed([]int{1, 17, e}, values, e, 4)
	if err != nil || !slices.Equal(same, values) {
		t.Errorf("4x4 to 4x4: %v, %v; want the values unchanged", same, err)
	}
	up, err := models.ResamplePosEmbed([]int{1, 17, e}, values, e, 6)
	if err != nil || len(up) != (1+36)*e || !slices.Equal(up[:e], values[:e]) {
		t.Errorf("4x4 to 6x6: %d values (class token %v), %v; want %d, the class token's kept", len(up), up[:min(e, len(up))], err, (1+36)*e)
	}
	for _, from := range [][]int{{1, 16, e}, {1, 17, e + 1}, {2, 17, e}, {17, e}, {1, 1, e}} {
		if _, err := models.ResamplePosEmbed(from, make([]float32, prod(from)), e, 4); err == nil || !strings.Contains(err.Error(), "position embeddings of shape") {
			t.Errorf("%v: error %v; want one naming the shape", from, err)
		}
	}
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// TestLoadResampled: weights a timm ViT exports at 32 px load strictly into the same ViT at 48
// px, its position embeddings resampled (and reported so), by LoadWeights and as Config.Init
// (stoke train --init); into a ViT of another width,
// whose embeddings cannot be resampled, they fail as mis-shaped, naming the reason.
func TestLoadResampled(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	trainer := func(spec string, size, classes int, init string) *train.Trainer {
		m, err := train.NewModel(spec, train.Shape{C: 3, H: size, W: size}, classes)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 1e-3}, train.Config{Seed: 1, Init: init})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	file := filepath.Join(t.TempDir(), "w.safetensors")
	if err := trainer("timm/vit_tiny_patch16_224(img_size=32,patch_size=8,embed_dim=16,depth=1,num_heads=2)", 32, 5, "").Export(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	const at48 = "timm/vit_tiny_patch16_224(img_size=48,patch_size=8,embed_dim=16,depth=1,num_heads=2)"
	rep, err := trainer(at48, 48, 5, "").LoadWeights(context.Background(), file, weights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pos_embed: file [1 17 16], model [1 37 16]"}
	if !slices.Equal(rep.Resampled, want) || !slices.Contains(rep.Loaded, "pos_embed") {
		t.Errorf("report: resampled %q, loaded %q; want %q, and pos_embed loaded", rep.Resampled, rep.Loaded, want)
	}
	rep = trainer(at48, 48, 5, file).InitReport()
	if !slices.Equal(rep.Resampled, want) || len(rep.NewHead) > 0 {
		t.Errorf("Config.Init's report: resampled %q, new head %q; want %q and no new head", rep.Resampled, rep.NewHead, want)
	}
	_, err = trainer("timm/vit_tiny_patch16_224(img_size=48,patch_size=8,embed_dim=8,depth=1,num_heads=2)", 48, 5, "").LoadWeights(context.Background(), file, weights.Options{})
	if !errors.Is(err, train.ErrMismatch) || !strings.Contains(err.Error(), "pos_embed: file [1 17 16], model [1 37 8] (position embeddings of shape [1 17 16]: want [1 1+n*n 8]") {
		t.Errorf("loading a ViT of another width: %v; want ErrMismatch naming pos_embed and why", err)
	}
}

// TestTimmShapes: every timm builder of the zoo has timm's parameters (timm.create_model of the
// name without the prefix): the same names with the same shapes, so timm's weights load strictly,
// and the same parameter count, for 224 px RGB images and 5 classes. One Python process lists
// them all.
func TestTimmShapes(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	var names []string
	for _, m := range models.Names() {
		if name, ok := strings.CutPrefix(m, models.TimmPrefix); ok {
			names = append(names, name)
		}
	}
	if len(names) != len(models.TimmViTs)+len(models.TimmConvNeXts)+4 {
		t.Fatalf("models.Names() has the timm builders %v", names)
	}
	var want map[string]map[string][]int
	pythonJSON(t, &want, py, "timm_shapes.py", append([]string{"5"}, names...)...)
	for _, name := range names {
		checkShapes(t, models.TimmPrefix+name, 5, want[name], "timm's")
	}
}

// TestTimmArguments: timm's builders take create_model's keyword arguments, refuse others and
// images they were not built for, naming the cause, and record the arguments in the model's name.
func TestTimmArguments(t *testing.T) {
	for _, tc := range []struct {
		spec string
		size int
		want string
	}{
		{"timm/vit_small_patch16_224(img_size=32,patch_size=4,depht=2)", 32, `argument "depht=2"`},
		{"timm/vit_small_patch16_224(patch_size=4)", 32, "img_size 224; the images are 32x32 (give img_size=32"},
		{"timm/vit_base_patch16_224(img_size=32,patch_size=4,num_heads=5)", 32, "embed_dim 768 is not a multiple of num_heads 5"},
		{"timm/vit_tiny_patch16_224(img_size=32,patch_size=64)", 32, "patch_size 64 and img_size 32"},
		{"timm/vit_tiny_patch16_224(img_size=32,patch_size=4,mlp_ratio=0.001)", 32, "mlp_ratio 0.001"},
		{"timm/vit_base_patch16_224(img_size=32,patch_size=4,mlp_ratio=63)", 32, "is 48384 hidden units; want 1 to 32768"},
		{"timm/deit_tiny_patch16_224(img_size=32,patch_size=4,drop_path_rate=1)", 32, "drop_path_rate=1: want a number in [0, 1)"},
		{"timm/convnext_atto", 16, "the images are 16x16"},
		{"timm/convnext_tiny(depths=3)", 32, `argument "depths=3": want one of drop_rate, drop_path_rate`},
		{"timm/efficientnet_b1(drop_rate=-1)", 32, "drop_rate=-1"},
		{"convnext_atto", 32, "unknown model"},
	} {
		_, err := train.NewModel(tc.spec, train.Shape{C: 3, H: tc.size, W: tc.size}, 10)
		if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrModel saying %q", tc.spec, err, tc.want)
		}
	}
	m, err := train.NewModel("timm/vit_small_patch16_224(img_size=32,patch_size=4,drop_rate=0.1,depth=2)", train.Shape{C: 1, H: 32, W: 32}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := "timm/vit_small_patch16_224(img_size=32,patch_size=4,depth=2,drop_rate=0.1)"; m.Name() != want {
		t.Errorf("name %q; want %q (the arguments in the builder's order)", m.Name(), want)
	}
}

// TestTimmExport: a timm builder's weights as Stoke exports them load into timm's model of the
// same arguments with load_state_dict(strict=True), BatchNorm statistics included.
func TestTimmExport(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "timm")
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dir := t.TempDir()
	var args []string
	for i, tc := range []struct{ spec, python string }{
		{"timm/deit_tiny_patch16_224(img_size=32,patch_size=8,depth=1)", "timm.create_model('deit_tiny_patch16_224', img_size=32, patch_size=8, depth=1, num_classes=5)"},
		{"timm/convnext_atto", "timm.create_model('convnext_atto', num_classes=5)"},
		{"timm/efficientnet_b0", "timm.create_model('efficientnet_b0', num_classes=5)"},
	} {
		m, err := train.NewModel(tc.spec, train.Shape{C: 3, H: 32, W: 32}, 5)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(context.Background(), m, dev, nil, train.Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, strconv.Itoa(i)+".safetensors")
		err = tr.Export(context.Background(), path)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, path, tc.python)
	}
	script := `import sys, timm
from safetensors.torch import load_file
for path, expr in zip(sys.argv[1::2], sys.argv[2::2]):
    eval(expr).load_state_dict(load_file(path), strict=True)`
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("timm's load_state_dict(strict=True) of Stoke's exports: %v\n%s", err, out)
	}
}
