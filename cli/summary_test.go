package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummary: stoke summary counts the parameters and mult-adds torchvision's model pages give
// for its weights (the "Params" and "GFLOPS" columns, at 224 px and 1000 classes, GFLOPS rounded
// to two places as torchvision does), prints a row per layer, sums a checkpoint's model, and
// refuses a command line that names no model.
func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		model  string
		params int64
		gflops string
	}{
		{"resnet18", 11689512, "1.81"},
		{"efficientnet_b0", 5288548, "0.39"},
		{"mobilenet_v3_large", 5483032, "0.22"},
		{"convnext_tiny", 28589128, "4.46"},
		{"vit_b_16", 86567656, "17.56"},
	} {
		out, errOut, code := stoke(t, "summary", "--model", tc.model, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.model, code, errOut)
		}
		var s summaryJSON
		lastJSON(t, out, &s)
		if got := fmt.Sprintf("%.2f", float64(s.MACs)/1e9); s.Trainable != tc.params || got != tc.gflops {
			t.Errorf("%s: %d parameters, %s GFLOPS; torchvision's %d and %s", tc.model, s.Trainable, got, tc.params, tc.gflops)
		}
		if len(s.Layers) < 10 || s.Layers[len(s.Layers)-1].Output[1] != 1000 || !strings.Contains(out, "Total params: ") {
			t.Errorf("%s: %d layers, the last %+v", tc.model, len(s.Layers), s.Layers[len(s.Layers)-1])
		}
	}
	_, ck := photoCheckpoint(t)
	out, errOut, code := stoke(t, "summary", "--checkpoint", ck, "--batch", "4", "--optimizer", "adamw", "--json", "-q")
	var s summaryJSON
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Model != "resnet8" || fmt.Sprint(s.Input) != "[4 3 8 8]" || s.Classes != 2 ||
		s.TrainMemoryBytes != 4*(4*s.Trainable+s.Buffers)+s.ActivationBytes {
		t.Errorf("summary of a checkpoint: exit %d, %+v, %s", code, s, errOut)
	}
	for _, args := range [][]string{{}, {"--model", "mlp", "--checkpoint", filepath.Join(t.TempDir(), "x")}, {"--model", "mlp", "--batch", "0"}} {
		if _, _, code := stoke(t, append([]string{"summary"}, args...)...); code != 2 {
			t.Errorf("summary %v: exit %d; want 2", args, code)
		}
	}
}

// TestLRFind: stoke train --lr-find runs the range test on the run's model and data, prints the
// curve and a suggestion within the range, writes no checkpoint and trains no epoch.
func TestLRFind(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--eval-on-train",
		"--checkpoint", ck, "--lr-find", "--json")
	if code != 0 {
		t.Fatalf("--lr-find: exit %d: %s", code, errOut)
	}
	var f lrFindJSON
	lastJSON(t, out, &f)
	if len(f.LRs) < 13 || len(f.LRs) != len(f.Losses) || f.LRs[0] != 1e-7 || !(f.SuggestedLR > 1e-7 && f.SuggestedLR < 10) {
		t.Errorf("range test %+v", f)
	}
	if !strings.Contains(out, "suggested lr: ") || strings.Contains(out, "epoch 1/") {
		t.Errorf("stdout %q; want the suggestion and no epoch", out)
	}
	if entries, err := os.ReadDir(filepath.Dir(ck)); err != nil || len(entries) != 0 {
		t.Errorf("--lr-find left %v in the checkpoint's folder (%v); want nothing", entries, err)
	}
}
