package cli

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/onnx"
)

// noisyFolder writes classes x perClass RGB PNGs of side x side: a class colour with noise, so
// every pixel differs and a layout error in the export cannot hide.
func noisyFolder(t *testing.T, classes, perClass, side int) string {
	t.Helper()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for c := range classes {
		dir := filepath.Join(root, string(rune('a'+c)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perClass {
			img := image.NewRGBA(image.Rect(0, 0, side, side))
			for y := range side {
				for x := range side {
					img.Set(x, y, color.RGBA{uint8(c*100 + r.IntN(100)), uint8(x * 3), uint8(r.IntN(256)), 255})
				}
			}
			f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	return root
}

// TestExportLoadsIntoTorchvision trains resnet18 a little at 64 px, exports it, loads the file
// into torchvision's resnet18(num_classes=3) with load_state_dict (strict) and checks that
// PyTorch's logits match stoke predict's within 1e-3 on the same images.
func TestExportLoadsIntoTorchvision(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy", "PIL")
	// 73 px images: the evaluation transform's Resize(64*8/7) keeps them as they are and its
	// CenterCrop(64) takes the same pixels as the script's crop.
	root := noisyFolder(t, 3, 4, 73)
	dir := t.TempDir()
	ck, st := filepath.Join(dir, "ck"), filepath.Join(dir, "m.safetensors")
	if _, errOut, code := stoke(t, "train", "--data", root, "--model", "resnet18", "--size", "64", "--batch", "4", "--epochs", "1", "--lr", "0.02",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", st); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	preds := predictLines(t, out)
	if len(preds) != 12 {
		t.Fatalf("predict printed %d samples; want 12", len(preds))
	}
	args := []string{filepath.Join("testdata", "torch_logits.py"), st, "3", "64"}
	for _, p := range preds {
		args = append(args, p.Path)
	}
	cmd := exec.Command(py, args...)
	cmd.Stderr = os.Stderr
	pyOut, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch_logits.py: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(pyOut)), "\n")
	if len(lines) != len(preds) {
		t.Fatalf("torch_logits.py printed %d rows; want %d", len(lines), len(preds))
	}
	var worst float64
	for i, line := range lines {
		var logits []float64
		if err := json.Unmarshal([]byte(line), &logits); err != nil {
			t.Fatal(err)
		}
		for j, v := range logits {
			d := math.Abs(v - float64(preds[i].Logits[j]))
			worst = max(worst, d)
			if d > 1e-3 {
				t.Errorf("%s logit %d: torchvision %v, stoke predict %v", preds[i].Path, j, v, preds[i].Logits[j])
			}
		}
	}
	t.Logf("largest logit difference %.2g over %d images", worst, len(preds))
}

// predictJSONLines runs stoke predict --json on the checkpoint ck and data, and returns its output
// and lines: n samples' and the summary.
func predictJSONLines(t *testing.T, ck, data string, n int) (string, []string) {
	t.Helper()
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", data, "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n+1 {
		t.Fatalf("predict --json printed %d lines; want %d samples and a summary", len(lines), n)
	}
	return out, lines
}

func TestPredictAndExportErrors(t *testing.T) {
	root, ck := photoCheckpoint(t)
	out, lines := predictJSONLines(t, ck, root, 8)
	var first predictJSON
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Path == "" || len(first.Logits) != 2 || first.ClassName == "" {
		t.Fatalf("first line %q (%v); want index, path, class, class_name, label, 2 logits", lines[0], err)
	}
	var sum predictSummary
	lastJSON(t, out, &sum)
	if sum.Samples != 8 || sum.Model != "resnet8" || sum.Split != "train" || sum.Accuracy < 0 || sum.Accuracy > 1 {
		t.Fatalf("summary %+v", sum)
	}
	// The checkpoint names its classes: a folder of other names is refused, not scored against
	// labels that are not the model's classes; a folder of some of them is mapped by name (its
	// one class folder "b" is label 0 of the folder, class 1 of the model).
	subset := photoFolder(t, 2, 4, nil)
	if err := os.RemoveAll(filepath.Join(subset, "a")); err != nil {
		t.Fatal(err)
	}
	_, sub := predictJSONLines(t, ck, subset, 4)
	for _, l := range sub[:4] {
		var r predictJSON
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Label != 1 {
			t.Fatalf("a folder of class b only: line %s (%v); want label 1, b's class in the model", l, err)
		}
	}
	renamed := photoFolder(t, 2, 4, nil)
	for from, to := range map[string]string{"a": "dog", "b": "cat"} {
		if err := os.Rename(filepath.Join(renamed, from), filepath.Join(renamed, to)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"predict", "--checkpoint", ck, "--data", renamed}, 1, `has class "cat", which the model in ` + ck + " was not trained on (its classes: a, b)"},
		{[]string{"predict", "--data", root}, 2, "--checkpoint is required"},
		{[]string{"export", "--checkpoint", ck}, 2, "--out is required"},
		{[]string{"predict", "--checkpoint", root + "/a/0.png", "--data", root}, 1, "checkpoint"},
		{[]string{"predict", "--checkpoint", ck, "--data", photoFolder(t, 3, 1, nil)}, 1, `has class "c", which the model in`},
		{[]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--eval-on-train", "--precision", "fp8", "-q"}, 1, "want fp32, bf16 or fp16"},
		{[]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--eval-on-train", "--label-smoothing", "1", "-q"}, 2, "--label-smoothing"},
	} {
		_, errOut, code := stoke(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("stoke %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestExportONNXRuntime trains every model stoke builds (the zoo's as onnxRuntimeSpec says) a
// little on 48 px photos, exports it with --format onnx, and runs the file with onnxruntime
// (after onnx.checker's full check) on the pixels stoke predict sees, normalized as the file's
// metadata says: the logits agree with stoke predict's within 1e-4 of each sample's largest
// logit, at batch 1 and at batch 3.
func TestExportONNXRuntime(t *testing.T) {
	py := pyoracle.Python(t, "onnx", "onnxruntime", "numpy", "PIL")
	// 48 px gives the resnets from 18 up torchvision's own stem (7x7 stride 2 and max pooling).
	for _, name := range models.Names() {
		t.Run(name, func(t *testing.T) {
			spec, skip := onnxRuntimeSpec(t, name)
			if skip != "" {
				t.Skip(skip)
			}
			// Images at the side the model's evaluation transform resizes to (54 px for
			// Resize(48*8/7)): it keeps them as they are, and its CenterCrop(48) takes the same
			// pixels as the script's crop.
			root := noisyFolder(t, 3, 2, evalSide(spec, 48))
			dir := t.TempDir()
			ck, path := filepath.Join(dir, "ck"), filepath.Join(dir, "m.onnx")
			if _, errOut, code := stoke(t, "train", "--data", root, "--model", spec, "--size", "48", "--batch", "3", "--epochs", "1",
				"--lr", "0.01", "--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
				t.Fatalf("train: exit %d: %s", code, errOut)
			}
			if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--data", root, "--out", path); code != 0 {
				t.Fatalf("export: exit %d: %s", code, errOut)
			}
			out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--json", "-q")
			if code != 0 {
				t.Fatalf("predict: exit %d: %s", code, errOut)
			}
			preds := predictLines(t, out)
			if len(preds) != 6 {
				t.Fatalf("predict printed %d samples; want 6", len(preds))
			}
			args := []string{filepath.Join("testdata", "onnx_logits.py"), path}
			for _, p := range preds {
				args = append(args, p.Path)
			}
			cmd := exec.Command(py, args...)
			cmd.Stderr = os.Stderr
			pyOut, err := cmd.Output()
			if err != nil {
				t.Fatalf("onnx_logits.py: %v", err)
			}
			var got map[string][][]float64
			if err := json.Unmarshal(pyOut, &got); err != nil {
				t.Fatalf("onnx_logits.py printed %q: %v", pyOut, err)
			}
			var worst float64
			for _, batch := range []string{"batch1", "batch3"} {
				if len(got[batch]) != len(preds) {
					t.Fatalf("%s: %d rows; want %d", batch, len(got[batch]), len(preds))
				}
				for i, row := range got[batch] {
					want := preds[i].Logits
					largest := 0.0
					for _, v := range want {
						largest = max(largest, math.Abs(float64(v)))
					}
					for j, v := range row {
						d := math.Abs(v - float64(want[j]))
						worst = max(worst, d/largest)
						if d > 1e-4*largest {
							t.Errorf("%s %s logit %d: onnxruntime %v, stoke predict %v (largest logit %.3g)", batch, preds[i].Path, j, v, want[j], largest)
						}
					}
				}
			}
			t.Logf("largest logit difference %.2g of the sample's largest logit", worst)
		})
	}
}

// zooSpecs are the model zoo's families as TestExportONNXRuntime builds them: small instances at
// 48 px of the builders that take an architecture's arguments, whose named configurations
// (vit_b_16, convnext_base, ...) run the same operators.
var zooSpecs = map[string]string{
	"vit":      "vit(image_size=48,patch_size=16,num_layers=1,num_heads=2,hidden_dim=16,mlp_dim=32)",
	"convnext": "convnext(width_1=8,width_2=16,width_3=32,width_4=64,depth_1=1,depth_2=1,depth_3=1,depth_4=1)",
	"regnet": "regnet(depth_1=1,depth_2=1,depth_3=1,depth_4=1,width_1=8,width_2=16,width_3=32,width_4=64," +
		"group_width=8,se_ratio=0.25,stem_width=8)",
	"resnet": "resnet(layers_1=1,layers_2=1,layers_3=1,layers_4=1,bottleneck=1,groups=2,width_per_group=16)",
	"swin": "swin(patch_size=4,embed_dim=8,depth_1=2,depth_2=2,depth_3=1,depth_4=1,num_heads_1=2,num_heads_2=2," +
		"num_heads_3=2,num_heads_4=2,window_size=4)",
	"swin_v2": "swin_v2(patch_size=4,embed_dim=8,depth_1=2,depth_2=2,depth_3=1,depth_4=1,num_heads_1=2,num_heads_2=2," +
		"num_heads_3=2,num_heads_4=2,window_size=4)",
	"timm/vit_tiny_patch16_224": "timm/vit_tiny_patch16_224(img_size=48,patch_size=16,depth=1)",
}

// builtinModels are train's own models, which TestExportONNXRuntime runs whatever their size.
var builtinModels = []string{"cnn", "mlp", "resnet18", "resnet20", "resnet50", "resnet8"}

// zooNamed are the named configurations TestExportONNXRuntime runs as they are: the families
// whose builders take no architecture arguments, one model per set of operators.
var zooNamed = []string{"mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "timm/convnext_atto"}

// zooFamilies maps the prefixes of the zoo's names to the model that runs their operators: a
// small instance of zooSpecs or a model of zooNamed. Every named configuration of a family
// (vit_b_16, convnext_base, resnext50_32x4d, regnet_y_400mf, efficientnet_b3, ...) runs the same
// operators as it, so the test trains one model a family: under -race each costs tens of seconds.
var zooFamilies = map[string]string{
	"vit": "vit", "convnext": "convnext", "regnet": "regnet", "resnet": "resnet", "resnext": "resnet",
	"wide_resnet": "resnet", "mobilenet": "mobilenet_v3_small", "efficientnet": "efficientnet_b0",
	"swin_t": "swin", "swin_s": "swin", "swin_b": "swin", "swin_v2_": "swin_v2",
	// timm's: its ViT and DeiT one family; its ConvNeXt atto runs the 1x1-convolution MLPs of
	// atto to nano (tiny and up have Linear ones, as convnext's); its EfficientNet's operators
	// are torchvision's.
	"timm/vit_": "timm/vit_tiny_patch16_224", "timm/deit_": "timm/vit_tiny_patch16_224",
	"timm/convnext_": "timm/convnext_atto", "timm/efficientnet_": "efficientnet_b0",
}

// onnxRuntimeSpec is the model TestExportONNXRuntime trains for the name models.Names gives, or
// why it skips it: a built-in model as it is, a zoo family's small instance (zooSpecs), a model
// of zooNamed as it is; the zoo's other names are skipped for the model of their family. A name
// of no known family fails the test, so that a new family gets its entry.
func onnxRuntimeSpec(t *testing.T, name string) (spec, skip string) {
	if slices.Contains(builtinModels, name) || slices.Contains(zooNamed, name) {
		return name, ""
	}
	if s, ok := zooSpecs[name]; ok {
		return s, ""
	}
	for prefix, runs := range zooFamilies {
		if strings.HasPrefix(name, prefix) {
			return "", fmt.Sprintf("%s: its family's %s runs the same operators", name, runs)
		}
	}
	t.Fatalf("%s is of no family TestExportONNXRuntime knows: give it an entry in zooSpecs or zooNamed and zooFamilies", name)
	return "", ""
}

// readONNX reads an exported ONNX file back.
func readONNX(t *testing.T, path string) *onnx.Model {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExportONNXFlags: the format follows --format or --out's extension; the normalization comes
// from --mean and --std, else from --data (the evaluation's, as predict applies it), else from the
// checkpoint, which records it with the evaluation transform and the class names (one written
// before it did needs --data or --mean and --std); --weights --model --data gives the same file as
// the checkpoint it was exported from, but for that record.
func TestExportONNXFlags(t *testing.T) {
	root := noisyFolder(t, 2, 3, 12)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "3", "--epochs", "1",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	a := filepath.Join(dir, "a.onnx")
	out, errOut, code := stoke(t, "export", "--checkpoint", ck, "--data", root, "--out", a)
	if code != 0 || !strings.Contains(out, "ONNX opset 17, input float32 [N 3 8 8]") {
		t.Fatalf("export: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	m := readONNX(t, a)
	for key, want := range map[string]string{onnx.MetaMean: "0.485,0.456,0.406", onnx.MetaStd: "0.229,0.224,0.225",
		onnx.MetaInputShape: "3,8,8"} {
		if got, _ := m.Meta(key); got != want {
			t.Errorf("metadata %s = %q; want %q (the evaluation transform's)", key, got, want)
		}
	}
	if desc, _ := m.Meta(onnx.MetaModel); desc != "resnet8 3x8x8->2" {
		t.Errorf("model description %q", desc)
	}

	st, c := filepath.Join(dir, "w.safetensors"), filepath.Join(dir, "c.onnx")
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", st); code != 0 {
		t.Fatalf("export safetensors: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--weights", st, "--model", "resnet8", "--data", root, "--size", "8", "--out", c); code != 0 {
		t.Fatalf("export --weights: exit %d: %s", code, errOut)
	}
	// The same file but for the checkpoint's record of its data, which weights do not have.
	fromCk := readONNX(t, a)
	fromCk.Metadata = slices.DeleteFunc(fromCk.Metadata, func(p onnx.Property) bool { return p.Key == onnx.MetaPretrainedCfg })
	if ab, err := onnx.Marshal(fromCk); err != nil || string(ab) != string(readFile(t, c)) {
		t.Errorf("the ONNX file from --weights differs from the checkpoint's but for %s (%v)", onnx.MetaPretrainedCfg, err)
	}

	// Without --data: the checkpoint's own normalization, transform and class names.
	b := filepath.Join(dir, "b.onnx")
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", b); code != 0 {
		t.Fatalf("export without --data: exit %d: %s", code, errOut)
	}
	for key, want := range map[string]string{onnx.MetaMean: "0.485,0.456,0.406", onnx.MetaStd: "0.229,0.224,0.225",
		onnx.MetaPretrainedCfg: `{"input_size":[3,8,8],"interpolation":"bilinear","crop_pct":0.8888888888888888,"crop_mode":"center","resize":9,` +
			`"mean":[0.485,0.456,0.406],"std":[0.229,0.224,0.225],"num_classes":2,"label_names":["a","b"]}`} {
		if got, _ := readONNX(t, b).Meta(key); got != want {
			t.Errorf("export without --data: metadata %s = %q; want %q", key, got, want)
		}
	}
	// A checkpoint written before stoke recorded its data needs --data or --mean and --std.
	old := withoutPreprocess(t, ck)
	if _, errOut, code := stoke(t, "export", "--checkpoint", old, "--out", b); code != 2 ||
		!strings.Contains(errOut, "--format onnx records the input normalization, which "+old+" does not") {
		t.Errorf("export of a checkpoint without its data's record: exit %d, stderr %q", code, errOut)
	}

	d := filepath.Join(dir, "d.bin")
	for _, data := range [][]string{nil, {"--data", root}} { // --mean and --std, without --data or over its normalization
		args := append([]string{"export", "--checkpoint", ck, "--format", "onnx", "--mean", "0.5,0.5,0.5", "--std", "0.25,0.25,0.25", "--out", d}, data...)
		if _, errOut, code := stoke(t, args...); code != 0 {
			t.Fatalf("export %v: exit %d: %s", args, code, errOut)
		}
		if got, _ := readONNX(t, d).Meta(onnx.MetaStd); got != "0.25,0.25,0.25" {
			t.Errorf("export %v: metadata std %q", args, got)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--out", d, "--format", "xml"}, 2, `--format "xml"; want safetensors or onnx`},
		{[]string{"--out", a, "--mean", "0.5,0.5,0.5"}, 2, "--mean and --std go together"},
		{[]string{"--out", st, "--mean", "0.5,0.5,0.5", "--std", "1,1,1"}, 2, "--mean and --std go with --format onnx"},
		{[]string{"--out", a, "--mean", "0.5,x", "--std", "1,1"}, 2, "want finite numbers"},
		{[]string{"--out", a, "--mean", "0.5,0.5", "--std", "1,1"}, 1, "2 means and 2 stds for 3 channels"},
		{[]string{"--out", a, "--data", root, "--size", "20"}, 1, "gives 3x20x20 images; the model in"},
	} {
		args := append([]string{"export", "--checkpoint", ck}, tc.args...)
		if _, errOut, code := stoke(t, args...); code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("stoke %v: exit %d, stderr %q; want %d and %q", args, code, errOut, tc.code, tc.want)
		}
	}
	if _, errOut, code := stoke(t, "export", "--weights", st, "--model", "resnet8", "--out", c); code != 2 || !strings.Contains(errOut, "give --data (the input shape and classes)") {
		t.Errorf("--weights of a file without --data: exit %d, stderr %q", code, errOut)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExportNeverDestroysItsInput: --out naming the checkpoint or the weights read (by the same
// path, another spelling or a symbolic link) is refused and the input is untouched; an --out that
// is a folder is refused; an existing file is replaced only by a whole export (a failed export
// leaves it as it was, and no temporary file stays).
func TestExportNeverDestroysItsInput(t *testing.T) {
	root := noisyFolder(t, 2, 3, 12)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "3", "--epochs", "1",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	st := filepath.Join(dir, "w.safetensors")
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", st); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ck, link); err != nil {
		t.Fatal(err)
	}
	ckBytes, stBytes := readFile(t, ck), readFile(t, st)
	for _, args := range [][]string{
		{"--checkpoint", ck, "--out", ck},
		{"--checkpoint", ck, "--out", dir + "/./../" + filepath.Base(dir) + "//ck"},
		{"--checkpoint", ck, "--out", link},
		{"--checkpoint", link, "--out", ck, "--format", "onnx", "--mean", "0", "--std", "1"},
		{"--weights", st, "--model", "mlp", "--data", root, "--size", "8", "--out", st},
		{"--weights", st, "--model", "mlp", "--data", root, "--size", "8", "--out", st, "--format", "onnx"},
	} {
		if _, errOut, code := stoke(t, append([]string{"export"}, args...)...); code != 2 || !strings.Contains(errOut, "is the input") {
			t.Errorf("export %v: exit %d, stderr %q; want 2 and the input named", args, code, errOut)
		}
	}
	if string(readFile(t, ck)) != string(ckBytes) || string(readFile(t, st)) != string(stBytes) {
		t.Fatal("a refused export changed its input")
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", dir); code != 2 || !strings.Contains(errOut, "is not a regular file") {
		t.Errorf("--out a folder: exit %d, stderr %q", code, errOut)
	}

	old := filepath.Join(dir, "old.onnx")
	if err := os.WriteFile(old, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := stoke(t, "export", "--checkpoint", ck, "--out", old, "--format", "onnx", "--mean", "0,0", "--std", "1,1"); code != 1 || string(readFile(t, old)) != "keep me" {
		t.Errorf("a failed export over an existing file: exit %d, the file now %q; want it untouched", code, readFile(t, old))
	}
	out, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", old, "--mean", "0,0,0", "--std", "1,1,1")
	if code != 0 || !strings.Contains(out, "replaced the file that was there") {
		t.Fatalf("export over an existing file: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	readONNX(t, old)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "ck.train-") { // the checkpoint's training state
			names = append(names, "ck.train-ID")
		} else {
			names = append(names, n)
		}
	}
	if want := []string{"ck", "ck.split.json", "ck.train-ID", "link", "old.onnx", "w.safetensors"}; !slices.Equal(names, want) {
		t.Errorf("folder holds %v; want %v (no temporary file left)", names, want)
	}
}

// idxFolder writes MNIST's four files into a new folder: n training and n test images of 28 x 28
// whose pixels are 255 or 0, about mean of them 255 (MNIST's mean pixel is 0.13, Fashion-MNIST's
// 0.29), and labels i mod 10.
func idxFolder(t *testing.T, n int, mean float64) string {
	t.Helper()
	dir := t.TempDir()
	img := binary.BigEndian.AppendUint32(nil, 0x803)
	for _, d := range []int{n, 28, 28} {
		img = binary.BigEndian.AppendUint32(img, uint32(d))
	}
	lab := binary.BigEndian.AppendUint32(nil, 0x801)
	lab = binary.BigEndian.AppendUint32(lab, uint32(n))
	for i := range n {
		for p := range 28 * 28 {
			px := byte(0)
			if float64((i*784+p)*37%1000) < mean*1000 {
				px = 255
			}
			img = append(img, px)
		}
		lab = append(lab, byte(i%10))
	}
	for _, split := range []string{"train", "t10k"} {
		for name, b := range map[string][]byte{split + "-images-idx3-ubyte": img, split + "-labels-idx1-ubyte": lab} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestFashionMNIST: mnist:DIR on a folder of Fashion-MNIST's pixels trains, predicts and exports
// as Fashion-MNIST (its class names in predict's JSON, its normalization in the ONNX metadata),
// and on MNIST's as MNIST.
func TestFashionMNIST(t *testing.T) {
	fashion := []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}
	for _, tc := range []struct {
		name     string
		mean     float64
		classes  []string // nil: no names
		meanMeta string
	}{
		{"fashion-mnist", 0.29, fashion, "0.286"},
		{"mnist", 0.13, nil, "0.1307"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := "mnist:" + idxFolder(t, 40, tc.mean)
			dir := t.TempDir()
			ck, o := filepath.Join(dir, "ck"), filepath.Join(dir, "m.onnx")
			if _, errOut, code := stoke(t, "train", "--data", data, "--model", "mlp", "--batch", "10", "--epochs", "1", "--checkpoint", ck, "-q"); code != 0 {
				t.Fatalf("train: exit %d: %s", code, errOut)
			}
			_, lines := predictJSONLines(t, ck, data, 40)
			for _, line := range lines[:40] {
				var r predictJSON
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				want := ""
				if tc.classes != nil {
					want = tc.classes[r.Class]
				}
				if r.ClassName != want {
					t.Fatalf("sample %d: class %d named %q; want %q", r.Index, r.Class, r.ClassName, want)
				}
			}
			if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--data", data, "--out", o); code != 0 {
				t.Fatalf("export: exit %d: %s", code, errOut)
			}
			if got, _ := readONNX(t, o).Meta(onnx.MetaMean); got != tc.meanMeta {
				t.Errorf("ONNX metadata mean %q; want %q", got, tc.meanMeta)
			}
		})
	}
}

// TestDigitsCheckpointRecordsItsData: a model trained on fixed-shape gray data (MNIST's files)
// records a resize to its input, MNIST's normalization and no class names, and exports to ONNX
// without --data.
func TestDigitsCheckpointRecordsItsData(t *testing.T) {
	root := mnistDir(t, 40, 8, 8)
	dir := t.TempDir()
	ck, out := filepath.Join(dir, "ck"), filepath.Join(dir, "m.onnx")
	if _, errOut, code := stoke(t, "train", "--data", "mnist:"+root, "--model", "mlp", "--batch", "20", "--epochs", "1", "--eval-on-train",
		"--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	want := `{"input_size":[1,8,8],"interpolation":"bilinear","crop_pct":1,"crop_mode":"squash","mean":[0.1307],"std":[0.3081],"num_classes":10}`
	if got, _ := readONNX(t, out).Meta(onnx.MetaPretrainedCfg); got != want {
		t.Errorf("metadata %s = %s; want %s", onnx.MetaPretrainedCfg, got, want)
	}
}

// withoutPreprocess writes a copy of the checkpoint ck as stoke wrote it before checkpoints
// recorded their data (no pretrained_cfg), and returns its path.
func withoutPreprocess(t *testing.T, ck string) string {
	t.Helper()
	old := filepath.Join(t.TempDir(), "old")
	f, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta["pretrained_cfg"] == "" {
		t.Fatalf("the checkpoint's metadata %v records no pretrained_cfg", f.Meta)
	}
	delete(f.Meta, "pretrained_cfg")
	if err := checkpoint.Write(old, f, nil); err != nil {
		t.Fatal(err)
	}
	return old
}
