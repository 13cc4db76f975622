package cli

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/internal/pyoracle"
)

// TestCheckpointLoadsIntoPyTorch: a checkpoint that stoke train writes is a state_dict PyTorch
// loads as it is. A torchvision resnet18 and a timm convnext_atto trained a little on photos load
// with load_state_dict(strict=True) from safetensors.torch.load_file(checkpoint), the script takes
// the input size, crop and normalization from the checkpoint's own "pretrained_cfg" metadata, and
// the logits equal stoke predict's on the same images within 1e-4 (at a learning rate that keeps
// them near 10: three batches of BatchNorm statistics at the default rate leave resnet18's logits
// near 1e5, where float32 itself rounds to 1e-2).
func TestCheckpointLoadsIntoPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two models")
	}
	py := pyoracle.Python(t, "torch", "torchvision", "timm", "safetensors", "numpy", "PIL")
	for _, tc := range []struct {
		kind, model, pyName string
		size                int
	}{
		{"torchvision", "resnet18", "resnet18", 64},
		{"timm", "timm/convnext_atto", "convnext_atto", 32},
	} {
		t.Run(tc.pyName, func(t *testing.T) {
			ck := filepath.Join(t.TempDir(), "ck")
			train := noisyFolder(t, 3, 4, tc.size+8)
			size := strconv.Itoa(tc.size)
			if _, errOut, code := stoke(t, "train", "--data", train, "--model", tc.model, "--size", size, "--batch", "4", "--epochs", "1",
				"--lr", "0.001", "--eval-on-train", "--checkpoint", ck, "-q"); code != 0 {
				t.Fatalf("train: exit %d: %s", code, errOut)
			}
			f, err := checkpoint.Read(ck)
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				Resize int `json:"resize"`
			}
			if err := json.Unmarshal([]byte(f.Meta["pretrained_cfg"]), &cfg); err != nil || cfg.Resize < tc.size {
				t.Fatalf("pretrained_cfg %q: %v; want a resize side of at least %d", f.Meta["pretrained_cfg"], err, tc.size)
			}
			// Images at the resize side: the evaluation transform's resize keeps them as they
			// are, and its center crop takes the script's pixels.
			imgs := noisyFolder(t, 2, 2, cfg.Resize)
			var paths []string
			for _, c := range []string{"a", "b"} {
				for _, i := range []string{"0", "1"} {
					paths = append(paths, filepath.Join(imgs, c, i+".png"))
				}
			}
			cmd := exec.Command(py, append([]string{filepath.Join("testdata", "torch_checkpoint.py"), tc.kind, tc.pyName, ck}, paths...)...)
			cmd.Stderr = os.Stderr
			pyOut, err := cmd.Output()
			if err != nil {
				t.Fatalf("torch_checkpoint.py: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(pyOut)), "\n")
			if len(lines) != len(paths) {
				t.Fatalf("torch_checkpoint.py printed %d lines for %d images", len(lines), len(paths))
			}
			out, errOut, code := stoke(t, append([]string{"predict", "--checkpoint", ck, "--json", "--top", "3", "--"}, paths...)...)
			if code != 0 {
				t.Fatalf("predict: exit %d: %s", code, errOut)
			}
			got := map[string][]float64{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var p struct {
					Path   string    `json:"path"`
					Logits []float64 `json:"logits"`
				}
				if err := json.Unmarshal([]byte(line), &p); err != nil {
					t.Fatalf("predict line %q: %v", line, err)
				}
				got[p.Path] = p.Logits
			}
			var worst float64
			for i, line := range lines {
				var want []float64
				if err := json.Unmarshal([]byte(line), &want); err != nil {
					t.Fatal(err)
				}
				g := got[paths[i]]
				if len(g) != len(want) {
					t.Fatalf("%s: stoke %v, PyTorch %v", paths[i], g, want)
				}
				for j := range want {
					worst = max(worst, math.Abs(want[j]-g[j]))
				}
			}
			t.Logf("%s: largest logit difference from PyTorch %.2g over %d images", tc.model, worst, len(paths))
			if worst > 1e-4 {
				t.Errorf("%s: PyTorch on the checkpoint differs from stoke predict by up to %.3g; want at most 1e-4", tc.model, worst)
			}
		})
	}
}
