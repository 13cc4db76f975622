package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stoke-ml/stoke/train"
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
// predict and train --allow-nonfinite load them.
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
	out, errOut, code = stoke(t, "predict", "--weights", bad, "--model", "mlp", "--size", "8", "--data", root, "--json", "--allow-nonfinite")
	if code != 0 || !strings.Contains(out, `"index"`) {
		t.Fatalf("predict --weights --allow-nonfinite: exit %d, stderr %q", code, errOut)
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

// failingSink is a --log-dir file on a disk that fills after left writes.
type failingSink struct{ left int }

func (s *failingSink) err() error {
	if s.left > 0 {
		return nil
	}
	return &os.PathError{Op: "write", Path: "/logs/scalars.csv", Err: syscall.ENOSPC}
}

func (s *failingSink) Scalar(string, int64, float64, time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	s.left--
	return nil
}
func (s *failingSink) Flush() error { return s.err() }
func (s *failingSink) Close() error { return s.err() }

// TestTrainLogDirFails: a --log-dir whose writes start failing mid-run (a full disk) is one
// warning, on stderr and in the JSON's warnings; the run finishes, exits 0 and reports the figures
// of a run without a log.
func TestTrainLogDirFails(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	args := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "2", "--epochs", "2", "--val-split", "0.25", "--json", "-q"}
	want, errOut, code := stoke(t, args...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	defer func(create func(string, time.Time) ([]scalarSink, error)) { createLogSinks = create }(createLogSinks)
	createLogSinks = func(string, time.Time) ([]scalarSink, error) {
		return []scalarSink{&failingSink{left: 1000}, &failingSink{left: 5}}, nil
	}
	out, errOut, code := stoke(t, append(args, "--log-dir", t.TempDir())...)
	if code != 0 || strings.Count(errOut, "no space left on device") != 1 || !strings.Contains(errOut, "stoke train: warning: --log-dir") {
		t.Fatalf("train with a failing --log-dir: exit %d, stderr %q; want 0 and one warning", code, errOut)
	}
	type result struct {
		TestAcc   float64           `json:"test_acc"`
		FinalLoss float64           `json:"final_loss"`
		History   []json.RawMessage `json:"history"`
		Warnings  []string          `json:"warnings"`
	}
	var a, b result
	lastJSON(t, want, &a)
	lastJSON(t, out, &b)
	if a.Warnings == nil || len(a.Warnings) != 0 {
		t.Errorf("a run without a log has warnings %v; want []", a.Warnings)
	}
	if len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "no space left on device") || !strings.Contains(b.Warnings[0], "global step 3") {
		t.Errorf("warnings %q; want one, of the full disk at global step 3", b.Warnings)
	}
	if b.TestAcc != a.TestAcc || b.FinalLoss != a.FinalLoss || len(b.History) != 2 {
		t.Errorf("with the failing log: test_acc %v, final_loss %v, %d epochs; without: %v, %v", b.TestAcc, b.FinalLoss, len(b.History), a.TestAcc, a.FinalLoss)
	}
}

// TestPredictReportsStop: the per-sample report and the confusion matrix stop at a cancelled
// context (Ctrl-C, SIGTERM) instead of writing every line.
func TestPredictReportsStop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	const n, classes = 1000, 3
	p := &train.Predictions{Classes: classes, Logits: make([]float32, n*classes), Labels: make([]int32, n)}
	for _, asJSON := range []bool{false, true} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: io.Discard, json: asJSON}
		if _, err := scorePredictions(ctx, e, p, nil, nil, true); !errors.Is(err, context.Canceled) || out.Len() != 0 {
			t.Errorf("scorePredictions(cancelled, json %v) = %v after %d bytes; want context.Canceled and nothing written", asJSON, err, out.Len())
		}
	}
	matrix := make([][]int, maxConfusionClasses)
	for i := range matrix {
		matrix[i] = make([]int, maxConfusionClasses)
	}
	var out bytes.Buffer
	err := writeConfusion(ctx, &env{stdout: &out}, matrix, make([]float64, maxConfusionClasses), nil)
	if !errors.Is(err, context.Canceled) || strings.Count(out.String(), "\n") > 2 {
		t.Errorf("writeConfusion(cancelled) = %v after %d lines; want context.Canceled after the header", err, strings.Count(out.String(), "\n"))
	}
}

// TestClassLimits: predict --confusion refuses a model over maxConfusionClasses naming its count,
// before predicting; --classes takes the counts the error on too many labels tells the user to
// declare.
func TestClassLimits(t *testing.T) {
	root := photoFolder(t, 2, 2, nil)
	ck := filepath.Join(t.TempDir(), "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--eval-on-train", "--classes", "1001", "--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train --classes 1001: exit %d: %s", code, errOut)
	}
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--confusion", "--json")
	if code != 2 || !strings.Contains(errOut, "--confusion: the model in "+ck+" has 1001 classes; the matrix is written for at most 1000") ||
		strings.Contains(out, `"index"`) {
		t.Fatalf("predict --confusion at 1001 classes: exit %d, stderr %q, stdout %q; want a usage error naming the count", code, errOut, out)
	}
	missing := filepath.Join(t.TempDir(), "no-such-data")
	for _, cmd := range []string{"train", "predict"} {
		args := func(classes string) []string {
			a := []string{cmd, "--data", missing, "--model", "mlp", "--classes", classes}
			if cmd == "predict" {
				a = append(a, "--weights", ck)
			}
			return a
		}
		if _, errOut, _ := stoke(t, args("100001")...); strings.Contains(errOut, "--classes") || !strings.Contains(errOut, "no-such-data") {
			t.Errorf("%s --classes 100001: stderr %q; want the flag taken (and the missing data refused)", cmd, errOut)
		}
		if _, errOut, code := stoke(t, args("10000001")...); code != 2 || !strings.Contains(errOut, "--classes 10000001; want 1 to 10000000") {
			t.Errorf("%s --classes 10000001: exit %d, stderr %q; want a usage error", cmd, code, errOut)
		}
	}
}

// twoRanks runs stoke train on ranks 0 and 1 of a group on a fresh port, in this process, with
// the arguments args(r), and returns each rank's stderr and exit status.
func twoRanks(t *testing.T, args func(r int) []string) ([2]string, [2]int) {
	t.Helper()
	port := freePort(t)
	var errOuts [2]string
	var codes [2]int
	var wg sync.WaitGroup
	for r := range 2 {
		a := append([]string{"train", "--rank", fmt.Sprint(r), "--world-size", "2", "--master-addr", "127.0.0.1", "--master-port", port,
			"--dist-timeout", "60s", "-q"}, args(r)...)
		wg.Go(func() {
			var out, errOut bytes.Buffer
			codes[r] = Run(t.Context(), a, &out, &errOut)
			errOuts[r] = errOut.String()
		})
	}
	wg.Wait()
	return errOuts, codes
}

// TestRanksAgreeOnFlagsAndData: ranks that differ in a flag that changes the weights, or train on
// other samples of the same count, shape and classes, are refused at start on both ranks, naming
// the flag or the data and both values; ranks that differ only in a rank-local flag train.
func TestRanksAgreeOnFlagsAndData(t *testing.T) {
	data := noisyFolder(t, 2, 4, 8)
	other := noisyFolder(t, 2, 4, 8)
	// Other bytes in one sample: the same count, shape and labels.
	a, err := os.ReadFile(filepath.Join(other, "a", "0.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "a", "1.png"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--model", "mlp", "--size", "8", "--batch", "2", "--epochs", "1", "--eval-on-train"}
	for _, tc := range []struct {
		name string
		args func(r int) []string
		want []string // "" for a run that trains
	}{
		{"schedule", func(r int) []string {
			return append(base, "--data", data, "--schedule", []string{"cosine", "constant"}[r])
		}, []string{"ranks disagree on --schedule: rank 0 has cosine, rank 1 has constant"}},
		{"augmentation", func(r int) []string {
			return append(base, "--data", data, "--random-erasing", []string{"0", "0.25"}[r])
		}, []string{"ranks disagree on --random-erasing: rank 0 has 0, rank 1 has 0.25"}},
		{"data", func(r int) []string {
			return append(base, "--data", []string{data, other}[r])
		}, []string{"ranks disagree on training data: rank 0 has 8 samples, 8 of them read: sha256 ", ", rank 1 has 8 samples"}},
		{"rank-local", func(r int) []string {
			return append(base, "--data", data, "--workers", []string{"1", "2"}[r], "--checkpoint", filepath.Join(t.TempDir(), "ck"))
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errOuts, codes := twoRanks(t, tc.args)
			for r := range 2 {
				if tc.want == nil {
					if codes[r] != 0 {
						t.Errorf("rank %d: exit %d: %s", r, codes[r], errOuts[r])
					}
					continue
				}
				for _, w := range tc.want {
					if codes[r] != 1 || !strings.Contains(errOuts[r], w) {
						t.Errorf("rank %d: exit %d, stderr %q; want 1 and %q", r, codes[r], errOuts[r], w)
					}
				}
			}
		})
	}
}

// TestRankLocalFlagsExist: every flag rankLocalFlags exempts from the ranks' agreement is one of
// stoke train's (a renamed flag would otherwise be agreed under its new name and its exemption
// kept for nothing).
func TestRankLocalFlagsExist(t *testing.T) {
	_, errOut, _ := stoke(t, "train", "--help")
	for name := range rankLocalFlags {
		if !regexp.MustCompile(`\n  -` + regexp.QuoteMeta(name) + `\s`).MatchString(errOut) {
			t.Errorf("rankLocalFlags names --%s, which stoke train does not have", name)
		}
	}
}

// TestErrorLineBounded: an error of megabytes is printed as its head and tail, with the count of
// the bytes left out, cut at character boundaries.
func TestErrorLineBounded(t *testing.T) {
	long := "what failed: " + strings.Repeat("é", 1<<20) + ": the cause"
	got := oneLine(errors.New(long))
	if len(got) > maxErrorLine+100 || !strings.HasPrefix(got, "what failed: éé") || !strings.HasSuffix(got, "éé: the cause") ||
		!strings.Contains(got, " bytes left out] ... ") || !utf8.ValidString(got) {
		t.Fatalf("oneLine(%d bytes) = %d bytes: %.80q ... %.80q", len(long), len(got), got, got[len(got)-80:])
	}
	if short := "a: b"; oneLine(errors.New(short)) != short {
		t.Fatalf("oneLine(%q) = %q", short, oneLine(errors.New(short)))
	}
}

// TestDivergenceOnePolicy: a run whose loss is not finite, in training or in validation, ends
// with the divergence error whether or not it writes a checkpoint, and never with a checkpoint
// that failed to encode a NaN.
func TestDivergenceOnePolicy(t *testing.T) {
	data := photoFolder(t, 2, 4, nil)
	for _, extra := range [][]string{nil, {"--checkpoint", filepath.Join(t.TempDir(), "ck")}} {
		args := append([]string{"train", "--data", data, "--size", "8", "--model", "mlp", "--eval-on-train", "-q", "--epochs", "2", "--lr", "1e9"}, extra...)
		_, errOut, code := stoke(t, args...)
		if code == 0 || !strings.Contains(errOut, "diverged; lower the learning rate") || strings.Contains(errOut, "json") {
			t.Fatalf("train %v: exit %d, stderr %q; want the divergence error", extra, code, errOut)
		}
	}
}
