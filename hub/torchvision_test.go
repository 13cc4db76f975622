package hub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/transforms"
)

// TestTorchvisionNames: every torchvision name is MODEL.MEMBER of a model the zoo builds, its file
// torchvision's MODEL...-HASH8.pth, its transform one the loaders apply (a resize from the crop up,
// bilinear or bicubic), and each model has one DEFAULT, which resolves as torchvision's does
// (vit_h_14's and regnet_y_128gf's are SWAG weights, vit_b_16's not; efficientnet_b1's is V2,
// mobilenet_v3_small's V1).
func TestTorchvisionNames(t *testing.T) {
	file := regexp.MustCompile(`^([a-z0-9_]+)-[0-9a-f]{8}\.pth$`)
	member := regexp.MustCompile(`^IMAGENET1K_(V[12]|SWAG_E2E_V1|SWAG_LINEAR_V1)$`)
	defaults := map[string]int{}
	for name, w := range torchvision {
		model, m, _ := strings.Cut(name, ".")
		f := file.FindStringSubmatch(w.file)
		switch {
		case !slices.Contains(models.Names(), model):
			t.Errorf("%s: %s is no model of the zoo", name, model)
		case !member.MatchString(m):
			t.Errorf("%s: member %q is none of torchvision's ImageNet members", name, m)
		case f == nil || !strings.HasPrefix(f[1], model):
			t.Errorf("%s: file %q is not torchvision's %s...-HASH8.pth", name, w.file, model)
		case w.crop < 1 || w.resize < w.crop || (w.filter != bilinear && w.filter != bicubic) || (w.norm != imageNet && w.norm != half):
			t.Errorf("%s: transform resize %d crop %d %v %v", name, w.resize, w.crop, w.filter, w.norm)
		case w.alias != "" && w.alias != "DEFAULT":
			t.Errorf("%s: alias %q; want DEFAULT or none", name, w.alias)
		}
		if w.alias == "DEFAULT" {
			defaults[model]++
		}
		if got, ok := URL(name); !ok || got != "https://download.pytorch.org/models/"+w.file {
			t.Errorf("URL(%s) = %s, %v", name, got, ok)
		}
	}
	for name := range torchvision {
		if model, _, _ := strings.Cut(name, "."); defaults[model] != 1 {
			t.Errorf("%s has %d DEFAULT members; want 1", model, defaults[model])
		}
	}
	for name, want := range map[string]string{
		"vit_h_14": "IMAGENET1K_SWAG_E2E_V1", "regnet_y_128gf": "IMAGENET1K_SWAG_E2E_V1", "vit_b_16": "IMAGENET1K_V1",
		"regnet_y_16gf": "IMAGENET1K_V2", "efficientnet_b1": "IMAGENET1K_V2", "mobilenet_v3_small": "IMAGENET1K_V1",
		"mobilenet_v3_large": "IMAGENET1K_V2", "resnext101_64x4d": "IMAGENET1K_V1", "resnet50": "IMAGENET1K_V2",
	} {
		got, ok := torchvisionWeights(name + ".DEFAULT")
		if w := torchvision[name+"."+want]; !ok || got != w {
			t.Errorf("%s.DEFAULT = %+v, %v; want %s's %+v", name, got, ok, want, w)
		}
	}
	if n := len(defaults); n < 50 {
		t.Errorf("torchvision weights of %d models; want the zoo's 50 and more", n)
	}
}

// TestTransformOf: each torchvision member gives its own transform, resnet50.IMAGENET1K_V1 a resize
// of 256 and IMAGENET1K_V2 (its DEFAULT) 232, vit_b_16's SWAG_E2E 384 bicubic, efficientnet_v2_l's a
// normalization of 0.5; other names give none.
func TestTransformOf(t *testing.T) {
	in, half := [3]float32{0.485, 0.456, 0.406}, [3]float32{0.5, 0.5, 0.5}
	std := [3]float32{0.229, 0.224, 0.225}
	for name, want := range map[string]Transform{
		"resnet50.IMAGENET1K_V1":          {256, 224, transforms.Bilinear, in, std},
		"resnet50.IMAGENET1K_V2":          {232, 224, transforms.Bilinear, in, std},
		"resnet50.DEFAULT":                {232, 224, transforms.Bilinear, in, std},
		"vit_b_16.IMAGENET1K_SWAG_E2E_V1": {384, 384, transforms.Bicubic, in, std},
		"efficientnet_b1.IMAGENET1K_V1":   {256, 240, transforms.Bicubic, in, std},
		"efficientnet_b1.DEFAULT":         {255, 240, transforms.Bilinear, in, std},
		"efficientnet_v2_l.DEFAULT":       {480, 480, transforms.Bicubic, half, half},
	} {
		if got, ok := TransformOf(name); !ok || got != want {
			t.Errorf("TransformOf(%s) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"resnet50", "resnet50.IMAGENET9K", "maxvit_t.DEFAULT", "convnext_atto.d2_in1k", "hf-hub:timm/a.b", "resnet50-0676ba61.pth"} {
		if got, ok := TransformOf(name); ok {
			t.Errorf("TransformOf(%s) = %+v; want none", name, got)
		}
	}
}

// TestFetchTorchvisionName: a torchvision name of another family than ResNet's is downloaded from
// download.pytorch.org (a local server in its place) into torch.hub's cache under its file's
// name, and names its model and its own transform. Its hash is the served file's: the test swaps
// it into the table, since no test file has the real one.
func TestFetchTorchvisionName(t *testing.T) {
	_, torchHome := caches(t)
	const name = "efficientnet_b1.IMAGENET1K_V1"
	body := weights(400)
	saved := torchvision[name]
	t.Cleanup(func() { torchvision[name] = saved })
	w := saved
	w.file = "efficientnet_b1_rwightman-" + sum(body)[:8] + ".pth"
	torchvision[name] = w
	pytorchServer(t, "/models/"+w.file, body)
	p, err := Fetch(t.Context(), name, nil)
	if want := filepath.Join(torchHome, "hub/checkpoints", w.file); err != nil || p != want {
		t.Fatalf("Fetch(%s) = %s, %v; want torch.hub's %s", name, p, err, want)
	}
	if model, ok := Model(name); model != "efficientnet_b1" || !ok {
		t.Errorf("Model(%s) = %q, %v", name, model, ok)
	}
	tr, ok := TransformOf(name)
	if want := (Transform{256, 240, transforms.Bicubic, imageNet.mean, imageNet.std}); !ok || tr != want {
		t.Errorf("TransformOf(%s) = %+v, %v; want %+v", name, tr, ok, want)
	}
}

// TestTorchvisionOracle: every name of the table that the oracle's torchvision knows, and every
// model's DEFAULT, has torchvision's file (its url) and transform (resize, crop, interpolation,
// mean, std); names of a later torchvision than the oracle's are left out.
func TestTorchvisionOracle(t *testing.T) {
	py := pyoracle.Python(t, "torchvision")
	var names []string
	for name := range torchvision {
		model, _, _ := strings.Cut(name, ".")
		names = append(names, name, model+".DEFAULT")
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out, err := exec.Command(py, append([]string{filepath.Join("testdata", "torchvision_weights.py")}, names...)...).Output()
	if err != nil {
		t.Fatalf("torchvision_weights.py: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	seen, known := 0, 0
	for sc.Scan() {
		var o struct {
			Name, URL, Filter string
			Resize, Crop      int
			Mean, Std         []float32
		}
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		seen++
		if o.URL == "" {
			t.Logf("%s: not in the oracle's torchvision", o.Name)
			continue
		}
		known++
		w, _ := torchvisionWeights(o.Name)
		got := []any{"https://download.pytorch.org/models/" + w.file, w.resize, w.crop, w.filter.String(), w.norm.mean[:], w.norm.std[:]}
		if want := []any{o.URL, o.Resize, o.Crop, o.Filter, o.Mean, o.Std}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v; torchvision's %v", o.Name, got, want)
		}
	}
	if seen != len(names) || known == 0 {
		t.Fatalf("the oracle answered %d of %d names, knew %d", seen, len(names), known)
	}
}
