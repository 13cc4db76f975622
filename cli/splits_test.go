package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// splitsFolder makes a folder whose subfolders are the splits named (photoFolder's images, 2
// classes, n per class).
func splitsFolder(t *testing.T, perClass map[string]int) string {
	t.Helper()
	root := t.TempDir()
	for split, n := range perClass {
		if err := os.Rename(photoFolder(t, 2, n, nil), filepath.Join(root, split)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// splitLabels returns the labels of split of spec, in order.
func splitLabels(t *testing.T, spec, split string) []int {
	t.Helper()
	ds, err := datasets.Open(spec, split)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", spec, split, err)
	}
	if c, ok := ds.(io.Closer); ok {
		defer c.Close()
	}
	labels := make([]int, ds.Len())
	for i := range labels {
		s, err := ds.Sample(t.Context(), i)
		if err != nil {
			t.Fatal(err)
		}
		labels[i] = s.Label
	}
	return labels
}

type trainSplitsJSON struct {
	Eval      string  `json:"eval"`
	EvalData  string  `json:"eval_data"`
	EvalSplit string  `json:"eval_split"`
	TestAcc   float64 `json:"test_acc"`
	FinalTest *struct {
		Data     string   `json:"data"`
		Split    string   `json:"split"`
		Samples  int      `json:"samples"`
		Accuracy *float64 `json:"accuracy"`
	} `json:"final_test"`
}

// trainSplits runs stoke train on a tiny model and returns its stdout and JSON.
func trainSplits(t *testing.T, args ...string) (string, trainSplitsJSON) {
	t.Helper()
	out, errOut, code := stoke(t, append([]string{"train", "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--workers", "1", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("train %v: exit %d: %s", args, code, errOut)
	}
	var r trainSplitsJSON
	lastJSON(t, out, &r)
	return out, r
}

// TestTrainSplits: stoke train evaluates each epoch on the validation data (a val/ folder,
// --val-data, --val-split) and then once on the test data, or each epoch on the test data when
// there is no validation data; the output and the JSON say which; combinations that cannot apply
// are refused.
func TestTrainSplits(t *testing.T) {
	all := splitsFolder(t, map[string]int{"train": 6, "val": 2, "test": 3})
	trainTest := splitsFolder(t, map[string]int{"train": 6, "test": 3})
	flat := photoFolder(t, 2, 4, nil)

	logs := t.TempDir()
	out, r := trainSplits(t, "--data", all, "--log-dir", logs)
	if r.Eval != "validation" || r.EvalData != all || r.EvalSplit != "val" || r.FinalTest == nil || r.FinalTest.Split != "test" ||
		r.FinalTest.Data != all || r.FinalTest.Samples != 6 || r.FinalTest.Accuracy == nil {
		t.Errorf("train on train/ val/ test/: JSON %+v (final %+v); want val each epoch, the 6 of test/ after", r, r.FinalTest)
	}
	if want := "evaluating each epoch on " + all + "'s val split, then once after training on " + all + "'s test split"; !strings.Contains(out, want) ||
		!strings.Contains(out, "validation accuracy") || !strings.Contains(out, "test accuracy") {
		t.Errorf("train on train/ val/ test/: stdout %q; want %q and both accuracies", out, want)
	}

	// TensorBoard's scalars (in the CSV beside them): the final test after the last step, 3 of 12.
	csvs, _ := filepath.Glob(filepath.Join(logs, "scalars.*.csv"))
	if b, err := os.ReadFile(strings.Join(csvs, "")); err != nil || r.FinalTest == nil || r.FinalTest.Accuracy == nil ||
		!strings.Contains(string(b), "\n3,epoch/validation_accuracy,") ||
		!strings.Contains(string(b), fmt.Sprintf("\n3,final/test_accuracy,%v,", *r.FinalTest.Accuracy)) {
		t.Errorf("--log-dir: %v %s; want final/test_accuracy at step 3 beside epoch/validation_accuracy", err, b)
	}

	// No val split: the test split each epoch, as before splits; nothing after.
	_, r = trainSplits(t, "--data", trainTest)
	if r.Eval != "test" || r.EvalSplit != "test" || r.FinalTest != nil {
		t.Errorf("train on train/ test/: JSON %+v; want test each epoch, no final test", r)
	}
	// --val-data of one split (all of it), the test split of --data after.
	_, r = trainSplits(t, "--data", trainTest, "--val-data", flat)
	if r.Eval != "validation" || r.EvalData != flat || r.EvalSplit != "train" || r.FinalTest == nil || r.FinalTest.Data != trainTest {
		t.Errorf("--val-data FLAT: JSON %+v; want FLAT each epoch, then --data's test", r)
	}
	// --test-data takes its test split; --val-data its val split.
	_, r = trainSplits(t, "--data", flat, "--test-data", all)
	if r.Eval != "test" || r.EvalData != all || r.EvalSplit != "test" || r.FinalTest != nil {
		t.Errorf("--test-data ALL: JSON %+v; want ALL's test split each epoch", r)
	}
	_, r = trainSplits(t, "--data", flat, "--val-data", all, "--test-data", trainTest)
	if r.EvalData != all || r.EvalSplit != "val" || r.FinalTest == nil || r.FinalTest.Data != trainTest || r.FinalTest.Samples != 6 {
		t.Errorf("--val-data ALL --test-data TT: JSON %+v (final %+v); want ALL's val, then TT's test", r, r.FinalTest)
	}
	// --val-split holds out part of train, and the test split follows.
	_, r = trainSplits(t, "--data", trainTest, "--val-split", "0.25")
	if r.Eval != "validation" || r.EvalSplit != "train" || r.FinalTest == nil || r.FinalTest.Split != "test" {
		t.Errorf("--val-split: JSON %+v; want the held-out part, then the test split", r)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", all, "--val-split", "0.2"}, all + " has a val split: choose one"},
		{[]string{"--data", flat, "--val-data", flat, "--val-split", "0.2"}, "--val-data " + flat + ": choose one"},
		{[]string{"--data", flat, "--val-data", trainTest}, "no val split and more than one other (train, test)"},
		{[]string{"--data", filepath.Join(all, "val"), "--test-data", filepath.Join(all, "nope")}, "nope"},
		{[]string{"--data", trainTest, "--eval-on-train"},
			"--eval-on-train is for data without validation or test data, and there is " + trainTest + "'s test split"},
		{[]string{"--data", flat}, "no test split and no val split"},
	} {
		_, errOut, code := stoke(t, append([]string{"train", "--size", "8", "--model", "mlp", "--epochs", "1", "-q"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("train %v: exit %d, stderr %q; want an error saying %q", tc.args, code, errOut, tc.want)
		}
	}
	// A folder of val/ and test/ has no training data.
	noTrain := splitsFolder(t, map[string]int{"val": 2, "test": 2})
	if _, errOut, code := stoke(t, "train", "--data", noTrain, "--size", "8", "-q"); code != 2 || !strings.Contains(errOut, "no train split") {
		t.Errorf("train on val/ test/ only: exit %d, stderr %q; want 2 saying no train split", code, errOut)
	}
}

type packSplitsJSON struct {
	Spec    string         `json:"spec"`
	Samples int            `json:"samples"`
	Splits  map[string]int `json:"splits"`
	Shards  []string       `json:"shards"`
}

// TestPackSplits: stoke pack writes every split of its input into one index, each read back by
// split; --split packs one; an older pack (before splits) is overwritten.
func TestPackSplits(t *testing.T) {
	root := splitsFolder(t, map[string]int{"train": 6, "val": 2, "test": 3})
	out := filepath.Join(t.TempDir(), "pack")
	stdout, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "--shard-size", "8K", "--json")
	if code != 0 {
		t.Fatalf("pack: exit %d: %s", code, errOut)
	}
	var r packSplitsJSON
	lastJSON(t, stdout, &r)
	if r.Samples != 22 || !maps.Equal(r.Splits, map[string]int{"train": 12, "val": 4, "test": 6}) || !strings.Contains(stdout, "(train 12, val 4, test 6)") {
		t.Errorf("pack of train/ val/ test/: %+v, stdout %q; want 12, 4 and 6 samples", r, stdout)
	}
	for _, split := range []string{"train", "val", "test"} {
		if !slices.ContainsFunc(r.Shards, func(s string) bool { return strings.HasPrefix(filepath.Base(s), "shard-"+split+"-") }) {
			t.Errorf("shards %v; want shard-%s-NNNNNN ones", r.Shards, split)
		}
		if got, want := splitLabels(t, r.Spec, split), splitLabels(t, root, split); !slices.Equal(got, want) {
			t.Errorf("split %s read back: labels %v; want %v", split, got, want)
		}
	}
	if got, err := datasets.Splits(r.Spec); err != nil || !slices.Equal(got, []string{"train", "val", "test"}) {
		t.Errorf("Splits(%s) = %v, %v; want train, val, test", r.Spec, got, err)
	}

	// --split packs one split, over the previous pack.
	stdout, errOut, code = stoke(t, "pack", "--data", root, "--out", out, "--overwrite", "--split", "val", "--json", "-q")
	if code != 0 {
		t.Fatalf("pack --split val: exit %d: %s", code, errOut)
	}
	r = packSplitsJSON{}
	lastJSON(t, stdout, &r)
	if !maps.Equal(r.Splits, map[string]int{"val": 4}) {
		t.Errorf("pack --split val: splits %v; want val's 4", r.Splits)
	}
	if _, err := datasets.Open(r.Spec, "train"); !errors.Is(err, datasets.ErrNoSplit) || !strings.Contains(err.Error(), "its splits: val") {
		t.Errorf("Open(a pack of val, train) = %v; want ErrNoSplit naming val", err)
	}

	// A pack written before splits (shard-NNNNNN.tar, no split in its index) is overwritten too.
	old := filepath.Join(t.TempDir(), "old")
	w, err := datasets.NewShardWriter(datasets.ShardWriterConfig{Pattern: filepath.Join(old, "shard-%06d.tar")})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(loaders.Sample{Input: transforms.Input{Pixels: make([]byte, 4*4*3), H: 4, W: 4, C: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := stoke(t, "pack", "--data", root, "--out", old, "--overwrite", "-q"); code != 0 {
		t.Fatalf("pack --overwrite over a pack before splits: exit %d: %s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(old, "shard-000000.tar")); len(left) != 0 {
		t.Errorf("the old pack's %v is still there", left)
	}
}

// TestPredictSplits: stoke predict --split predicts the split named, of a folder, of packed shards
// and of shards on a web server; without it, test, else val, else train; the JSON and the text say
// which.
func TestPredictSplits(t *testing.T) {
	root := splitsFolder(t, map[string]int{"train": 6, "val": 2, "test": 3})
	ck := filepath.Join(t.TempDir(), "ck")
	if _, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--checkpoint", ck, "-q"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	out := filepath.Join(t.TempDir(), "pack")
	if _, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "-q"); code != 0 {
		t.Fatalf("pack: exit %d: %s", code, errOut)
	}
	srv, _ := countingServer(t, out)
	noTest := splitsFolder(t, map[string]int{"train": 2, "val": 1})
	type summary struct {
		Data     string   `json:"data"`
		Split    string   `json:"split"`
		Samples  int      `json:"samples"`
		Accuracy *float64 `json:"accuracy"`
	}
	for _, tc := range []struct {
		data, split, want string
		samples           int
	}{
		{root, "", "test", 6}, {root, "train", "train", 12}, {root, "val", "val", 4}, {root, "test", "test", 6},
		{noTest, "", "val", 2}, {filepath.Join(root, "train"), "", "train", 12},
		{"shards:" + out, "val", "val", 4}, {"shards:" + out, "", "test", 6},
		{"shards:" + srv.URL + "/index.json", "val", "val", 4}, {"shards:" + srv.URL + "/index.json", "train", "train", 12},
	} {
		args := []string{"predict", "--checkpoint", ck, "--data", tc.data, "--size", "8"}
		if tc.split != "" {
			args = append(args, "--split", tc.split)
		}
		stdout, errOut, code := stoke(t, append(args, "--json")...)
		if code != 0 {
			t.Errorf("predict %v: exit %d: %s", args, code, errOut)
			continue
		}
		var s summary
		lastJSON(t, stdout, &s)
		if s.Data != tc.data || s.Split != tc.want || s.Samples != tc.samples || s.Accuracy == nil {
			t.Errorf("predict %v: %+v; want the %d samples of its %s split", args, s, tc.samples, tc.want)
		}
		if stdout, _, _ := stoke(t, args...); !strings.Contains(stdout, tc.want+" split of "+tc.data+")") {
			t.Errorf("predict %v: stdout %q; want it to name the %s split", args, stdout, tc.want)
		}
	}
	for _, tc := range []struct{ data, split, want string }{
		{noTest, "test", "no test split (its splits: train, val)"},
		{"shards:" + srv.URL + "/index.json", "validation-set", `split "validation-set"`},
	} {
		_, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", tc.data, "--split", tc.split, "--size", "8", "-q")
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("predict --data %s --split %s: exit %d, stderr %q; want an error saying %q", tc.data, tc.split, code, errOut, tc.want)
		}
	}
}

// TestTrainRemoteSplits: stoke train reads the splits of a pack on a web server: val each epoch,
// test after.
func TestTrainRemoteSplits(t *testing.T) {
	root := splitsFolder(t, map[string]int{"train": 6, "val": 2, "test": 3})
	out := filepath.Join(t.TempDir(), "pack")
	if _, errOut, code := stoke(t, "pack", "--data", root, "--out", out, "--format", "raw", "--compress", "zstd", "-q"); code != 0 {
		t.Fatalf("pack: exit %d: %s", code, errOut)
	}
	srv, _ := countingServer(t, out)
	spec := "shards:" + srv.URL + "/index.json"
	_, r := trainSplits(t, "--data", spec)
	if r.Eval != "validation" || r.EvalData != spec || r.EvalSplit != "val" || r.FinalTest == nil || r.FinalTest.Split != "test" || r.FinalTest.Samples != 6 {
		t.Errorf("train on %s: %+v (final %+v); want val each epoch, the 6 of test after", spec, r, r.FinalTest)
	}
}

// TestTrainFinalTestEMA: with --ema, the test once after training scores the weights stoke
// predict (and export) serve: the EMA's unless it scored below the model's at the last evaluation,
// as an EMA of decay 0.99 does after 12 steps without warm-up (near the initial weights).
func TestTrainFinalTestEMA(t *testing.T) {
	root := splitsFolder(t, map[string]int{"train": 8, "val": 2, "test": 10})
	ck := filepath.Join(t.TempDir(), "ck.bin")
	_, r := trainSplits(t, "--data", root, "--epochs", "3", "--lr", "0.05", "--ema", "0.99", "--ema-warmup=false", "--checkpoint", ck)
	if r.FinalTest == nil || r.FinalTest.Accuracy == nil {
		t.Fatalf("train --ema: no final test in %+v", r)
	}
	acc := map[string]float64{}
	served := false
	for _, ema := range []string{"--ema=true", "--ema=false"} {
		out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--split", "test", "--size", "8", ema, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict %s: exit %d: %s", ema, code, errOut)
		}
		var sum predictSummary
		lastJSON(t, out, &sum)
		acc[ema] = sum.Accuracy
		served = served || sum.EMA
	}
	if served || acc["--ema=true"] != acc["--ema=false"] {
		t.Errorf("predict served the EMA (%v) or scored %v against the trained weights' %v; want the trained weights", served, acc["--ema=true"], acc["--ema=false"])
	}
	if got := *r.FinalTest.Accuracy; got != acc["--ema=false"] {
		t.Errorf("final test accuracy %v; want the trained weights' %v, which predict serves", got, acc["--ema=false"])
	}
}

// lenDataset is a dataset of n samples that are never read: what loaders.SplitValidation needs.
type lenDataset int

func (n lenDataset) Len() int { return int(n) }
func (n lenDataset) Sample(context.Context, int) (loaders.Sample, error) {
	return loaders.Sample{}, errors.New("not read")
}

// TestPredictValSplit: stoke predict --val-split F --seed S scores the samples stoke train
// --val-split F --seed S held out (by their indices and paths in the folder, and the validation
// accuracy the run reported); on a folder without a test or val split, predict says on stderr that
// it scores the train split, unless --split train asks for it.
func TestPredictValSplit(t *testing.T) {
	root := photoFolder(t, 3, 8, nil)
	ck := filepath.Join(t.TempDir(), "ck.bin")
	out, _ := trainSplits(t, "--data", root, "--val-split", "0.25", "--seed", "7", "--checkpoint", ck)
	var run struct {
		TestAcc float64 `json:"test_acc"`
	}
	lastJSON(t, out, &run)
	_, want, err := loaders.SplitValidation(lenDataset(24), 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--val-split", "0.25", "--seed", "7", "--json")
	if code != 0 {
		t.Fatalf("predict --val-split: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum predictSummary
	lastJSON(t, out, &sum)
	if sum.Samples != want.Len() || sum.Split != "train" || sum.ValSplit != 0.25 || sum.Seed != 7 || sum.Accuracy != run.TestAcc || len(lines) != want.Len()+1 {
		t.Errorf("predict --val-split 0.25 --seed 7: %+v; want the %d held-out samples scoring the run's validation accuracy %v", sum, want.Len(), run.TestAcc)
	}
	for i, l := range lines[:len(lines)-1] {
		var r predictJSON
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Index != want.Index(i) || !strings.HasPrefix(r.Path, root) {
			t.Errorf("sample %d: index %d (%s); want the held-out index %d", i, r.Index, r.Path, want.Index(i))
		}
	}
	if out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--val-split", "0.25"); code != 0 ||
		!strings.Contains(out, "the part of the train split --val-split 0.25 --seed 1 holds out") || strings.Contains(errOut, "note") {
		t.Errorf("predict --val-split 0.25: exit %d, stdout %q, stderr %q; want the held-out part of seed 1 named", code, out, errOut)
	}

	_, errOut, code = stoke(t, "predict", "--checkpoint", ck, "--data", root, "-q")
	if code != 0 || !strings.Contains(errOut, "note: "+root+" has no test or val split: scoring its train split") {
		t.Errorf("predict on a folder: exit %d, stderr %q; want a note that it scores the train split", code, errOut)
	}
	if _, errOut, code = stoke(t, "predict", "--checkpoint", ck, "--data", root, "--split", "train", "-q"); code != 0 || errOut != "" {
		t.Errorf("predict --split train: exit %d, stderr %q; want no note", code, errOut)
	}
	if _, errOut, code = stoke(t, "predict", "--checkpoint", ck, "--data", root, "--val-split", "0.25", "--split", "test"); code != 2 || !strings.Contains(errOut, "--val-split") {
		t.Errorf("predict --val-split --split test: exit %d, %q; want a usage error", code, errOut)
	}
}
