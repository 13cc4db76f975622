package cli

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/optim"
)

// TestTrainLogDir trains 2 epochs of 3 steps with --log-dir and checks the CSV: every tag at its
// steps, the learning rate the schedule gives, the last epoch's loss equal to the run's
// final_loss; then (with $STOKE_PYTHON) that TensorBoard's EventAccumulator reads the event file
// to the same tags, steps and float32 values.
func TestTrainLogDir(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	dir := filepath.Join(t.TempDir(), "logs", "run1") // created, parents included
	out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "2", "--epochs", "2",
		"--val-split", "0.25", "--lr", "0.05", "--ema", "0.5", "--log-dir", dir, "--json", "-q")
	if code != 0 {
		t.Fatalf("train --log-dir: exit %d: %s", code, errOut)
	}
	var res trainJSON
	lastJSON(t, out, &res)
	var losses struct {
		TestLoss float64 `json:"test_loss"`
		EMALoss  float64 `json:"ema_loss"`
		EMAAcc   float64 `json:"ema_acc"`
		History  []struct {
			TestLoss float64   `json:"test_loss"`
			ClassAcc []float64 `json:"class_acc"`
		} `json:"history"`
	}
	lastJSON(t, out, &losses)
	if len(losses.History) != 2 || losses.TestLoss <= 0 || losses.EMALoss <= 0 || losses.History[1].TestLoss != losses.TestLoss {
		t.Errorf("train --json: test_loss %v, ema_loss %v, history %+v; want the validation losses, the last epoch's the run's", losses.TestLoss, losses.EMALoss, losses.History)
	}

	csvs, _ := filepath.Glob(filepath.Join(dir, "scalars.*.csv"))
	if len(csvs) != 1 {
		t.Fatalf("--log-dir holds %v; want one scalars CSV", csvs)
	}
	f, err := os.Open(csvs[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != "step,tag,value,wall_time" {
		t.Fatalf("CSV header %v", rows[0])
	}
	got := map[string]map[int64]float64{}
	for _, r := range rows[1:] {
		step, err1 := strconv.ParseInt(r[0], 10, 64)
		v, err2 := strconv.ParseFloat(r[2], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("CSV row %v", r)
		}
		if got[r[1]] == nil {
			got[r[1]] = map[int64]float64{}
		}
		got[r[1]][step] = v
	}
	const steps, total = 3, 6 // 6 training samples (a quarter of 8 held out), batch 2
	wantSteps := map[string][]int64{
		"train/loss": {1, 2, 3, 4, 5, 6}, "train/learning_rate": {1, 2, 3, 4, 5, 6}, "train/samples_per_s": {2, 3, 5, 6},
		"epoch/train_loss": {3, 6}, "epoch/validation_accuracy": {3, 6}, "epoch/samples_per_s": {3, 6}, "epoch/data_wait_fraction": {3, 6},
		"epoch/validation_loss": {3, 6}, "epoch/validation_top5": {3, 6},
		"epoch/validation_class_accuracy/0": {3, 6}, "epoch/validation_class_accuracy/1": {3, 6},
		"epoch/ema_validation_accuracy": {3, 6}, "epoch/ema_validation_top5": {3, 6}, "epoch/ema_validation_loss": {3, 6},
	}
	if len(got) != len(wantSteps) {
		t.Errorf("tags %v; want %v", keys(got), keys(wantSteps))
	}
	for tag, ss := range wantSteps {
		if len(got[tag]) != len(ss) {
			t.Errorf("%s at steps %v; want %v", tag, got[tag], ss)
		}
		for _, s := range ss {
			if _, ok := got[tag][s]; !ok {
				t.Errorf("%s has no step %d (has %v)", tag, s, got[tag])
			}
		}
	}
	sched := optim.Cosine(0.2)
	for s, v := range got["train/learning_rate"] {
		if want := 0.05 * sched(int(s)-1, steps, total); math.Abs(v-want) > 1e-12 {
			t.Errorf("learning rate at step %d = %v; want %v", s, v, want)
		}
	}
	if res.FinalLoss == nil || math.Abs(got["epoch/train_loss"][6]-*res.FinalLoss) > 1e-9*math.Abs(*res.FinalLoss) {
		t.Errorf("epoch/train_loss at step 6 = %v; want the run's final_loss %v", got["epoch/train_loss"][6], res.FinalLoss)
	}
	if v := got["epoch/validation_loss"][6]; math.Abs(v-losses.TestLoss) > 1e-9*losses.TestLoss {
		t.Errorf("epoch/validation_loss at step 6 = %v; want the run's test_loss %v", v, losses.TestLoss)
	}
	if v := got["epoch/ema_validation_loss"][6]; math.Abs(v-losses.EMALoss) > 1e-9*losses.EMALoss || got["epoch/ema_validation_accuracy"][6] != losses.EMAAcc {
		t.Errorf("epoch/ema_validation_loss and accuracy at step 6 = %v, %v; want the run's %v, %v", v, got["epoch/ema_validation_accuracy"][6], losses.EMALoss, losses.EMAAcc)
	}
	for c, a := range losses.History[len(losses.History)-1].ClassAcc {
		if v := got[fmt.Sprintf("epoch/validation_class_accuracy/%d", c)][6]; v != a {
			t.Errorf("class %d accuracy at step 6 = %v; want the run's %v", c, v, a)
		}
	}
	for _, tag := range []string{"epoch/validation_accuracy", "epoch/data_wait_fraction", "epoch/validation_top5", "epoch/ema_validation_accuracy"} {
		for s, v := range got[tag] {
			if !(v >= 0 && v <= 1) {
				t.Errorf("%s at %d = %v; want a fraction", tag, s, v)
			}
		}
	}

	py := pyoracle.Python(t, "tensorboard")
	script := `
import sys, json
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
json.dump({tag: [[e.step, e.value] for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}, sys.stdout)
`
	b, err := exec.Command(py, "-c", script, dir).Output()
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	var tb map[string][][2]float64
	if err := json.Unmarshal(b, &tb); err != nil {
		t.Fatal(err)
	}
	if len(tb) != len(got) {
		t.Errorf("TensorBoard tags %v; the CSV has %v", keys(tb), keys(got))
	}
	for tag, vs := range got {
		if len(tb[tag]) != len(vs) {
			t.Errorf("%s: TensorBoard has %d scalars; the CSV %d", tag, len(tb[tag]), len(vs))
			continue
		}
		for _, e := range tb[tag] {
			if v, ok := vs[int64(e[0])]; !ok || e[1] != float64(float32(v)) {
				t.Errorf("%s at step %v: TensorBoard %v; the CSV %v (as float32 %v)", tag, e[0], e[1], v, float32(v))
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestTrainLogDirRefused: a --log-dir that is a file, or under one, fails at once, before the
// run opens its data.
func TestTrainLogDirRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		out, errOut, code := stoke(t, "train", "--data", filepath.Join(t.TempDir(), "no-such-data"), "--model", "mlp", "--log-dir", dir)
		if code == 0 || !strings.Contains(errOut, "--log-dir") || strings.Contains(errOut, "no-such-data") || strings.Contains(out, "training") {
			t.Errorf("--log-dir %s: exit %d, stdout %q, stderr %q; want a --log-dir error before the data is opened", dir, code, out, errOut)
		}
	}
}
