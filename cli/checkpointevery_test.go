package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// TestLimits: --limit-train and --limit-val train and evaluate on a seeded part of the data (a
// number of samples or a fraction), the same part on every run with the seed; a limit that is no
// count or fraction is a usage error.
func TestLimits(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	args := []string{"train", "--data", root, "--size", "8", "--model", "cnn", "--batch", "2", "--epochs", "1", "--eval-on-train",
		"--limit-train", "6", "--limit-val", "0.25", "--seed", "5", "--json"}
	out, errOut, code := stoke(t, args...)
	if code != 0 || !strings.Contains(out, "(6 samples), 6 samples of 2 classes") {
		t.Fatalf("train with limits: exit %d, stdout %q, stderr %s; want 6 training samples", code, out, errOut)
	}
	var first, again train.Result
	lastJSON(t, out, &first)
	out, _, _ = stoke(t, args...)
	lastJSON(t, out, &again)
	if first.FinalLoss != again.FinalLoss || first.TestAcc != again.TestAcc {
		t.Errorf("two runs with one seed: loss %v and %v, accuracy %v and %v; want the same part of the data", first.FinalLoss, again.FinalLoss,
			first.TestAcc, again.TestAcc)
	}
	for _, bad := range []string{"2.5", "-1"} {
		if _, errOut, code := stoke(t, "train", "--data", root, "--limit-train", bad, "--eval-on-train"); code != 2 || !strings.Contains(errOut, "--limit-train") {
			t.Errorf("--limit-train %s: exit %d, stderr %q; want a usage error", bad, code, errOut)
		}
	}
}

// TestResumeBatch: a run resumed on other ranks takes the recorded global batch over them; on as
// many ranks, or without a record, the flags decide; a global batch that does not divide, or a
// damaged record, is an error.
func TestResumeBatch(t *testing.T) {
	for _, tc := range []struct {
		was          runRecord
		world, batch int
		changed, bad bool
	}{
		{runRecord{GlobalBatch: 16, WorldSize: 2}, 4, 4, true, false},
		{runRecord{GlobalBatch: 16, WorldSize: 2}, 1, 16, true, false},
		{runRecord{GlobalBatch: 16, WorldSize: 2}, 2, 0, false, false},
		{runRecord{}, 3, 0, false, false},
		{runRecord{GlobalBatch: 16, WorldSize: 2}, 3, 0, false, true},
		{runRecord{GlobalBatch: -16, WorldSize: 2}, 1, 0, false, true},
	} {
		batch, changed, err := resumeBatch(tc.was, tc.world)
		if batch != tc.batch || changed != tc.changed || (err != nil) != tc.bad {
			t.Errorf("resumeBatch(%+v, %d) = %d, %v, %v; want %d, %v, error %v", tc.was, tc.world, batch, changed, err, tc.batch, tc.changed, tc.bad)
		}
	}
}
