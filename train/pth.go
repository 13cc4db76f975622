package train

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CheckWeightsFile reports a PyTorch file that LoadWeights cannot read (a pickle as torch.save
// wrote before PyTorch 1.6 and pickle.dump writes; torch.save's zip archive, a .pth or .pt file,
// it reads) with an error wrapping ErrSafetensors that says how to convert it, where the
// safetensors reader would report a header of absurd length. Any other file, and one that
// cannot be read, gives nil: LoadWeights and Config.Init check it and say what is wrong.
func CheckWeightsFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var head [9]byte
	n, _ := io.ReadFull(f, head[:])
	kind := pyTorchKind(head[:n])
	if kind == "" {
		return nil
	}
	out := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) + ".safetensors"
	return fmt.Errorf("train: weights %s: %w: it is %s; convert it in Python: "+
		"from safetensors.torch import save_file; save_file(model.state_dict(), %q) "+
		"(a file that holds a state_dict: save_file(torch.load(%q, map_location=\"cpu\"), %q))",
		path, ErrSafetensors, kind, out, path, out)
}

// pyTorchKind names the PyTorch format LoadWeights does not read that a file starting with head is
// in, or "" when it is not one. A safetensors file starts with its header's length, 8 bytes that may be anything,
// then its JSON header's '{': a 9th byte '{' is safetensors, whatever the first 8.
func pyTorchKind(head []byte) string {
	switch {
	case len(head) > 8 && head[8] == '{':
		return ""
	case len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5:
		return fmt.Sprintf("a pickle (protocol %d: torch.save's format before PyTorch 1.6, or pickle.dump's)", head[1])
	}
	return ""
}
