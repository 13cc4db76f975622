package cli

import (
	"path/filepath"
	"testing"
)

// TestMaxSteps: --max-steps ends the run inside an epoch, reported in the JSON's steps; --resume
// with a higher bound goes on from there.
func TestMaxSteps(t *testing.T) {
	root := photoFolder(t, 2, 8, nil) // 16 images, 4 steps an epoch at batch 4
	ck := filepath.Join(t.TempDir(), "ck")
	train := func(args ...string) trainResultJSON {
		t.Helper()
		out, errOut, code := stoke(t, append([]string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4",
			"--epochs", "3", "--eval-on-train", "--checkpoint", ck, "--json", "-q"}, args...)...)
		if code != 0 {
			t.Fatalf("train %v: exit %d: %s", args, code, errOut)
		}
		var r trainResultJSON
		lastJSON(t, out, &r)
		return r
	}
	if r := train("--max-steps", "6"); r.Steps != 6 || r.Epochs != 1 {
		t.Errorf("--max-steps 6: %d steps, %d epochs; want 6 steps, 1 whole epoch", r.Steps, r.Epochs)
	}
	if r := train("--max-steps", "10", "--resume", ck); r.Steps != 10 || r.Epochs != 2 {
		t.Errorf("--resume --max-steps 10: %d steps, %d epochs; want 10 steps, 2 whole epochs", r.Steps, r.Epochs)
	}
}

// trainResultJSON is the part of stoke train's JSON the tests of short runs read.
type trainResultJSON struct {
	Steps  int `json:"steps"`
	Epochs int `json:"epochs"`
}
