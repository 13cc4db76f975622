package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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

// torchPython is the interpreter with torch, torchvision, safetensors, numpy and PIL: $STOKE_PYTHON
// (.ci/run sets it to a venv over Debian's torchvision) or python3; "" when it lacks them.
func torchPython() string {
	py := os.Getenv("STOKE_PYTHON")
	if py == "" {
		py = "python3"
	}
	if exec.Command(py, "-c", "import torch, torchvision, safetensors, numpy, PIL").Run() != nil {
		return ""
	}
	return py
}

// TestExportLoadsIntoTorchvision trains resnet18 a little at 64 px, exports it, loads the file
// into torchvision's resnet18(num_classes=3) with load_state_dict (strict) and checks that
// PyTorch's logits match stoke predict's within 1e-3 on the same images.
func TestExportLoadsIntoTorchvision(t *testing.T) {
	py := torchPython()
	if py == "" {
		t.Skip("no python3 with torch, torchvision, safetensors, numpy and PIL (set STOKE_PYTHON)")
	}
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

func TestPredictAndExportErrors(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--epochs", "1", "--eval-on-train",
		"--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 9 {
		t.Fatalf("predict --json printed %d lines; want 8 samples and a summary", len(lines))
	}
	var first predictJSON
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Path == "" || len(first.Logits) != 2 || first.ClassName == "" {
		t.Fatalf("first line %q (%v); want index, path, class, class_name, label, 2 logits", lines[0], err)
	}
	var sum predictSummary
	lastJSON(t, out, &sum)
	if sum.Samples != 8 || sum.Model != "resnet8" || sum.Split != "train" || sum.Accuracy < 0 || sum.Accuracy > 1 {
		t.Fatalf("summary %+v", sum)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"predict", "--data", root}, 2, "--checkpoint is required"},
		{[]string{"export", "--checkpoint", ck}, 2, "--out are required"},
		{[]string{"predict", "--checkpoint", root + "/a/0.png", "--data", root}, 1, "checkpoint"},
		{[]string{"predict", "--checkpoint", ck, "--data", photoFolder(t, 3, 1, nil)}, 1, "3 classes"},
		{[]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--eval-on-train", "--precision", "fp8", "-q"}, 1, "want fp32, bf16 or fp16"},
		{[]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--eval-on-train", "--label-smoothing", "1", "-q"}, 2, "--label-smoothing"},
	} {
		_, errOut, code := stoke(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("stoke %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
