package cli

import (
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPredictImages: stoke predict --checkpoint on image files (one file, a flat folder, a glob)
// prints each file's top classes by the names the checkpoint records, with the logits stoke
// predict gives the same files as a dataset; a model trained on gray digits takes colour and gray
// files alike; what is not an image fails naming the file.
func TestPredictImages(t *testing.T) {
	root, ck := photoCheckpoint(t)
	// The dataset's logits, by file.
	want := map[string][]float32{}
	_, lines := predictJSONLines(t, ck, root, 8)
	for _, l := range lines[:8] {
		var r predictJSON
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		want[r.Path] = r.Logits
	}
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--json", filepath.Join(root, "a", "0.png"), filepath.Join(root, "b"),
		filepath.Join(root, "a", "[12].png"), "--top", "1")
	if code != 0 {
		t.Fatalf("predict images: exit %d: %s", code, errOut)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != 1+4+2+1 {
		t.Fatalf("predict images printed %d lines; want 7 images and a summary:\n%s", len(got), out)
	}
	for _, l := range got[:7] {
		var r imagePrediction
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		w, ok := want[r.Path]
		if !ok || len(r.Top) != 1 || (r.Top[0].ClassName != "a" && r.Top[0].ClassName != "b") || r.Top[0].Prob <= 0.5 {
			t.Fatalf("line %s: want a file of the folder, its top class named a or b with its probability", l)
		}
		for c := range w {
			if math.Abs(float64(r.Logits[c]-w[c])) > 1e-5 {
				t.Fatalf("%s: logits %v; stoke predict --data gives %v", r.Path, r.Logits, w)
			}
		}
	}
	var sum imagesSummary
	lastJSON(t, out, &sum)
	if sum.Images != 7 || sum.Model != "resnet8" {
		t.Errorf("summary %+v", sum)
	}

	// Digits: a gray model takes a colour PNG and a gray one.
	digits := filepath.Join(t.TempDir(), "ck")
	if _, errOut, code := stoke(t, "train", "--data", "mnist:"+mnistDir(t, 40, 8, 8), "--model", "mlp", "--batch", "20", "--epochs", "1",
		"--eval-on-train", "--checkpoint", digits, "-q"); code != 0 {
		t.Fatalf("train digits: exit %d: %s", code, errOut)
	}
	dir := t.TempDir()
	gray := filepath.Join(dir, "gray.png")
	writePNG(t, gray, image.NewGray(image.Rect(0, 0, 8, 8)))
	out, errOut, code = stoke(t, "predict", "--checkpoint", digits, gray, filepath.Join(root, "a", "0.png"))
	if code != 0 || strings.Count(out, ": class ") != 2 {
		t.Fatalf("a gray model on a gray and a colour file: exit %d, stdout %q, stderr %s", code, out, errOut)
	}

	// "-": the paths on stdin, one per line.
	cmd := exec.Command(stokeBin(t), "predict", "--checkpoint", ck, "-")
	cmd.Stdin = strings.NewReader(filepath.Join(root, "a", "0.png") + "\n\n" + filepath.Join(root, "b", "1.png") + "\n")
	if b, err := cmd.Output(); err != nil || strings.Count(string(b), ".png: ") != 2 {
		t.Fatalf("paths on stdin: %v, stdout %q", err, b)
	}

	notImage := filepath.Join(dir, "notes.png")
	if err := os.WriteFile(notImage, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--checkpoint", ck, gray, notImage}, 1, notImage + ": "},
		{[]string{"--checkpoint", ck, t.TempDir()}, 1, "holds no image file"},
		{[]string{"--checkpoint", ck, filepath.Join(dir, "*.jpg")}, 1, "matches no file"},
		{[]string{"--checkpoint", ck, "--data", root, gray}, 2, "choose one"},
		{[]string{gray}, 2, "predicted with --checkpoint"},
		{[]string{"--checkpoint", ck, "--size", "16", gray}, 2, "--size score a dataset"},
		{[]string{"--checkpoint", ck, "-", "-"}, 2, "given twice"},
		{[]string{"--checkpoint", withoutPreprocess(t, ck), gray}, 1, "does not record the transform and normalization of its data"},
	} {
		_, errOut, code := stoke(t, append([]string{"predict"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("predict %v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

func writePNG(t *testing.T, path string, im image.Image) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, im); err != nil {
		t.Fatal(err)
	}
}

// TestClassNamesThroughSubsets: the class names reach the checkpoint through --val-split's subset
// and --classes's declared count, as they do from the folder itself.
func TestClassNamesThroughSubsets(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	for _, extra := range [][]string{{"--val-split", "0.25"}, {"--classes", "2", "--eval-on-train"}} {
		ck := filepath.Join(t.TempDir(), "ck")
		args := append([]string{"train", "--data", root, "--size", "8", "--model", "cnn", "--batch", "2", "--epochs", "1", "--checkpoint", ck, "-q"}, extra...)
		if _, errOut, code := stoke(t, args...); code != 0 {
			t.Fatalf("train %v: exit %d: %s", extra, code, errOut)
		}
		out, errOut, code := stoke(t, "predict", "--checkpoint", ck, filepath.Join(root, "a", "0.png"))
		if code != 0 || !(strings.Contains(out, ": a ") || strings.Contains(out, ": b ")) {
			t.Errorf("train %v, then predict: exit %d, stdout %q, stderr %s; want the class named", extra, code, out, errOut)
		}
	}
}

// photoCheckpoint trains resnet8 one epoch on a folder of 2 classes (a, b) of 4 photos at 8 px and
// returns the folder and the checkpoint.
func photoCheckpoint(t *testing.T) (root, ck string) {
	t.Helper()
	root, ck = photoFolder(t, 2, 4, nil), filepath.Join(t.TempDir(), "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--epochs", "1", "--eval-on-train",
		"--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	return root, ck
}
