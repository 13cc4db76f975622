package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// poisonSafetensors writes a copy of the safetensors file src with the second value of the tensor
// named by the header's first entry in data order set to NaN, and returns the copy's path and the
// tensor's name.
func poisonSafetensors(t *testing.T, src string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]struct {
		Offsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	name := ""
	for k, v := range header {
		if k != "__metadata__" && v.Offsets[1]-v.Offsets[0] >= 8 && (name == "" || v.Offsets[0] < header[name].Offsets[0]) {
			name = k
		}
	}
	binary.LittleEndian.PutUint32(b[8+int64(n)+header[name].Offsets[0]+4:], math.Float32bits(float32(math.NaN())))
	dst := filepath.Join(t.TempDir(), "nan.safetensors")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst, name
}

// TestNonFiniteWeightsCLI: predict --weights and train --init refuse weights with a NaN before
// reading any data, naming the file and the tensor (predict --json ends with the error object);
// train --allow-nonfinite loads them.
func TestNonFiniteWeightsCLI(t *testing.T) {
	root := photoFolder(t, 2, 2, nil)
	dir := t.TempDir()
	ck, st := filepath.Join(dir, "ck"), filepath.Join(dir, "w.safetensors")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", st); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	bad, tensor := poisonSafetensors(t, st)
	want := []string{bad, `tensor "` + tensor + `"`, "non-finite weights: 1 of"}
	out, errOut, code := stoke(t, "predict", "--weights", bad, "--model", "mlp", "--size", "8", "--data", root, "--json")
	var e struct{ Error string }
	lastJSON(t, out, &e)
	for _, w := range want {
		if code != 1 || !strings.Contains(errOut, w) || !strings.Contains(e.Error, w) {
			t.Fatalf("predict --weights with a NaN: exit %d, stderr %q, stdout %q; want 1 and %q", code, errOut, out, w)
		}
	}
	if strings.Contains(out, `"index"`) {
		t.Fatalf("predict --weights with a NaN predicted: %s", out)
	}
	train := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1", "--eval-on-train", "-q", "--init", bad}
	_, errOut, code = stoke(t, train...)
	for _, w := range want {
		if code != 1 || !strings.Contains(errOut, w) {
			t.Fatalf("train --init with a NaN: exit %d, stderr %q; want 1 and %q", code, errOut, w)
		}
	}
	if _, errOut, _ = stoke(t, append(train, "--allow-nonfinite")...); strings.Contains(errOut, "non-finite weights") {
		t.Fatalf("train --init --allow-nonfinite: %s", errOut)
	}
}

// TestKeepBestIsNotCheckpointCLI: --keep-best naming the --checkpoint file is a usage error at
// start, before any training.
func TestKeepBestIsNotCheckpointCLI(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	_, errOut, code := stoke(t, "train", "--data", photoFolder(t, 2, 2, nil), "--size", "8", "--model", "mlp", "--eval-on-train", "-q",
		"--checkpoint", ck, "--keep-best", filepath.Join(dir, ".", "ck"))
	if code != 2 || !strings.Contains(errOut, "--keep-best and --checkpoint: two files") {
		t.Fatalf("train --keep-best = --checkpoint: exit %d, stderr %q; want 2 and a refusal naming both flags", code, errOut)
	}
	if _, err := os.Stat(ck); err == nil {
		t.Fatal("the refused run wrote a checkpoint")
	}
}
