package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stoke-ml/stoke/train"
)

// TestCheckpointEveryResumes: a run that a corrupt file stops within an epoch keeps the steps
// before it (--checkpoint-every 1), and once the file is mended --resume continues inside that
// epoch and ends where a run on the mended data ends: the same validation loss and accuracy.
func TestCheckpointEveryResumes(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	args := []string{"train", "--data", root, "--size", "8", "--model", "cnn", "--batch", "2", "--epochs", "2", "--eval-on-train",
		"--workers", "1", "--seed", "3", "--checkpoint", ck, "--checkpoint-every", "1", "--json", "-q"}
	// Corrupt one file after another until one stops the first epoch after its first batch.
	var mended string
	for c := 0; c < 2 && mended == ""; c++ {
		for i := range 8 {
			path := filepath.Join(root, string(rune('a'+c)), strconv.Itoa(i)+".png")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("not a png"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(ck)
			if _, _, code := stoke(t, args...); code != 1 {
				t.Fatalf("a run over the corrupt %s: exit %d; want 1", path, code)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(ck); err == nil {
				mended = path
				break
			}
		}
	}
	if mended == "" {
		t.Fatal("no corrupt file left a checkpoint within the first epoch")
	}
	out, errOut, code := stoke(t, append(args, "--resume", ck)...)
	if code != 0 {
		t.Fatalf("resume after mending %s: exit %d: %s", mended, code, errOut)
	}
	var resumed, whole train.Result
	lastJSON(t, out, &resumed)
	os.Remove(ck)
	out, errOut, code = stoke(t, args...)
	if code != 0 {
		t.Fatalf("uninterrupted run: exit %d: %s", code, errOut)
	}
	lastJSON(t, out, &whole)
	r, w := resumed.History[len(resumed.History)-1], whole.History[len(whole.History)-1]
	if len(resumed.History) != 2 || r.TestLoss != w.TestLoss || r.TestAcc != w.TestAcc {
		t.Errorf("resumed within the epoch: %d epochs, last validation loss %v accuracy %v; uninterrupted: %v %v", len(resumed.History), r.TestLoss, r.TestAcc,
			w.TestLoss, w.TestAcc)
	}
}
