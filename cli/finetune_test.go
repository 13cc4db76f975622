package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tensorBytes reads a safetensors file written by stoke export: each tensor's raw data by name.
func tensorBytes(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for name, raw := range header {
		var e struct {
			Offsets [2]int `json:"data_offsets"`
		}
		if name == "__metadata__" || json.Unmarshal(raw, &e) != nil {
			continue
		}
		out[name] = b[8+int(n)+e.Offsets[0] : 8+int(n)+e.Offsets[1]]
	}
	return out
}

// TestTrainInitFreeze: weights trained on one photo set and exported start a run on another set
// with another class count (--init: the head fc is replaced) and a frozen backbone (--freeze):
// after training, every backbone tensor, BatchNorm statistics included, is bit for bit the
// pretrained one, and the head has the new class count.
func TestTrainInitFreeze(t *testing.T) {
	dir := t.TempDir()
	pre, ck, w := photoFolder(t, 4, 4, nil), filepath.Join(dir, "ck"), filepath.Join(dir, "w.safetensors")
	ck2, w2 := filepath.Join(dir, "ck2"), filepath.Join(dir, "w2.safetensors")
	if _, errOut, code := stoke(t, "train", "--data", pre, "--size", "16", "--model", "resnet8", "--batch", "4", "--epochs", "2",
		"--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", w); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	next := photoFolder(t, 3, 5, nil)
	// Three epochs, where the weights had two: a frozen BatchNorm's num_batches_tracked must stay.
	out, errOut, code := stoke(t, "train", "--data", next, "--size", "16", "--model", "resnet8", "--batch", "4", "--epochs", "3", "--eval-on-train",
		"--init", w, "--freeze", "--checkpoint", ck2, "--json")
	if code != 0 {
		t.Fatalf("train --init --freeze: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"initialized from " + w + ": 45 tensors loaded; new head (3 classes): fc.weight, fc.bias", "frozen: 77392 of 77587 parameters"} {
		if !strings.Contains(out, want) {
			t.Errorf("stoke train printed %q; want %q", out, want)
		}
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck2, "--out", w2); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	a, b := tensorBytes(t, w), tensorBytes(t, w2)
	if len(a) != len(b) || len(a) < 20 {
		t.Fatalf("%d and %d tensors", len(a), len(b))
	}
	for name, v := range a {
		switch {
		case strings.HasPrefix(name, "fc."):
			if len(b[name])*4 != len(v)*3 {
				t.Errorf("%s: %d bytes after fine-tuning; want 3/4 of %d", name, len(b[name]), len(v))
			}
		case !bytes.Equal(v, b[name]):
			t.Errorf("frozen %s changed in fine-tuning", name)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--freeze", "--freeze-upto", "layer1"}, "choose one"},
		{[]string{"--backbone-lr-scale", "-1"}, "--backbone-lr-scale"},
		{[]string{"--freeze-upto", "layer9"}, `FreezeUpTo "layer9" names no layer of resnet8`},
		{[]string{"--init", filepath.Join(pre, "a", "0.png")}, "bad safetensors file"},
	} {
		args := append([]string{"train", "--data", next, "--size", "16", "--model", "resnet8", "--eval-on-train", "-q"}, tc.args...)
		if _, errOut, code := stoke(t, args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("stoke %v: exit %d, stderr %q; want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
}
