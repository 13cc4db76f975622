package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPyTorchWeightsRefused names PyTorch files it cannot read as --weights and as --init: a
// torch.save archive cut short says so, naming the file; a pickle of before PyTorch 1.6 says what
// it is and how to convert it, where it used to report an absurd header length.
func TestPyTorchWeightsRefused(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	dir := t.TempDir()
	damaged, legacy := filepath.Join(dir, "resnet18.pth"), filepath.Join(dir, "legacy.pt")
	if err := os.WriteFile(damaged, []byte("PK\x03\x04\x14\x00\x00\x08\x00\x00resnet18/data.pkl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{damaged, damaged + ": pth: bad PyTorch file: not a zip archive"},
		{legacy, `a pickle (protocol 2: torch.save's format before PyTorch 1.6`},
	} {
		for _, args := range [][]string{
			{"predict", "--weights", tc.file, "--model", "mlp", "--size", "8", "--data", root},
			{"train", "--init", tc.file, "--model", "mlp", "--size", "8", "--epochs", "1", "--eval-on-train", "--data", root},
		} {
			_, errOut, code := stoke(t, args...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("stoke %s %s: exit %d: %s; want status 1 and %q", args[0], filepath.Base(tc.file), code, errOut, tc.want)
			}
		}
	}
	_, errOut, _ := stoke(t, "predict", "--weights", legacy, "--model", "mlp", "--size", "8", "--data", root)
	if !strings.Contains(errOut, `save_file(model.state_dict(), "legacy.safetensors")`) {
		t.Errorf("a legacy pickle: %s; want the conversion", errOut)
	}
}
