package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainAMSGrad: --amsgrad trains with --optimizer adam and adamw, says so, and a run resumed
// from its checkpoint must give it again; with any other optimizer, the recipe's included, it is
// a usage error (exit 2) that names --amsgrad.
func TestTrainAMSGrad(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	args := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--workers", "2", "--val-split", "0.25"}
	for _, refused := range [][]string{{"--optimizer", "sgd"}, {"--optimizer", "rmsprop"}, nil} {
		_, errOut, code := stoke(t, append(append(args, refused...), "--amsgrad", "-q")...)
		if code != 2 || !strings.Contains(errOut, "--amsgrad is Adam's and AdamW's") {
			t.Errorf("train %v --amsgrad: exit %d, stderr %q; want 2 and a usage error naming --amsgrad", refused, code, errOut)
		}
	}
	for _, opt := range []string{"adam", "adamw"} {
		ck := filepath.Join(t.TempDir(), "ck.bin")
		run := append(args, "--optimizer", opt, "--checkpoint", ck)
		out, errOut, code := stoke(t, append(run, "--epochs", "1", "--amsgrad")...)
		if code != 0 || !strings.Contains(out, " amsgrad=true") {
			t.Fatalf("train --optimizer %s --amsgrad: exit %d, stdout %q, stderr %s; want a run that says amsgrad=true", opt, code, out, errOut)
		}
		if _, errOut, code := stoke(t, append(run, "--epochs", "2", "--resume", ck, "--amsgrad", "-q")...); code != 0 {
			t.Errorf("resume --optimizer %s --amsgrad: exit %d: %s", opt, code, errOut)
		}
		if _, errOut, code := stoke(t, append(run, "--epochs", "3", "--resume", ck, "-q")...); code != 1 || !strings.Contains(errOut, "amsgrad=true") {
			t.Errorf("resume --optimizer %s without --amsgrad: exit %d, stderr %q; want 1 and the checkpoint's amsgrad=true", opt, code, errOut)
		}
	}
}
