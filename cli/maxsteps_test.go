package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestSampleLog: --sample-log-dir writes, for the one rank of a run, each epoch's samples once,
// a line each, in its batches.
func TestSampleLog(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	dir := t.TempDir()
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--epochs", "2",
		"--eval-on-train", "--sample-log-dir", dir, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "rank0-of-1.restart0.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int]bool{}
	batches := map[[2]int]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e, batch, i int
		if _, err := fmt.Sscan(line, &e, &batch, &i); err != nil || seen[[2]int{e, i}] || e > 1 || i < 0 || i >= 16 {
			t.Fatalf("line %q (%v): want EPOCH BATCH INDEX, each sample once an epoch", line, err)
		}
		seen[[2]int{e, i}] = true
		batches[[2]int{e, batch}]++
	}
	if len(seen) != 32 || len(batches) != 8 {
		t.Errorf("%d samples in %d batches over 2 epochs; want 16 an epoch in 4 batches of 4", len(seen), len(batches))
	}
}
