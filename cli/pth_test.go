package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPyTorchWeightsRefused names a torch.save file as --weights and as --init: the error says
// what the file is and how to convert it, where it used to report an absurd header length.
func TestPyTorchWeightsRefused(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	pth := filepath.Join(t.TempDir(), "resnet18.pth")
	if err := os.WriteFile(pth, []byte("PK\x03\x04\x14\x00\x00\x08\x00\x00resnet18/data.pkl"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"predict", "--weights", pth, "--model", "mlp", "--size", "8", "--data", root},
		{"train", "--init", pth, "--model", "mlp", "--size", "8", "--epochs", "1", "--eval-on-train", "--data", root},
	} {
		_, errOut, code := stoke(t, args...)
		if code != 1 || !strings.Contains(errOut, pth+": bad safetensors file: it is a zip archive (torch.save's format") ||
			!strings.Contains(errOut, `save_file(model.state_dict(), "resnet18.safetensors")`) {
			t.Errorf("stoke %s: exit %d: %s; want status 1 and the conversion", args[0], code, errOut)
		}
	}
}
