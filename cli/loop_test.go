package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainLoopFlags: stoke train with accumulation, clipping, an EMA, the plateau schedule,
// early stopping and --keep-best, at a rate too small to move the validation accuracy: the
// plateau halves the rate after epoch 2 and the run stops after epoch 3, normally, the JSON
// saying so with the new scores; stoke predict on the best checkpoint evaluates its EMA and prints
// and emits a confusion matrix that adds up; export writes the EMA unless --ema=false.
func TestTrainLoopFlags(t *testing.T) {
	root := photoFolder(t, 3, 4, nil)
	dir := t.TempDir()
	best, ck := filepath.Join(dir, "best.bin"), filepath.Join(dir, "ck.bin")
	out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "2", "--epochs", "8", "--lr", "1e-6",
		"--val-split", "0.25", "--accumulate", "2", "--clip-grad-norm", "1", "--ema", "0.5", "--ema-warmup", "--schedule", "plateau:patience=0,factor=0.5",
		"--early-stop", "2", "--keep-best", best, "--checkpoint", ck, "--json")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	var res struct {
		Epochs       int       `json:"epochs"`
		StoppedEarly bool      `json:"stopped_early"`
		StoppedEpoch int       `json:"stopped_epoch"`
		BestEpoch    int       `json:"best_epoch"`
		ClassAcc     []float64 `json:"class_acc"`
		EMAAcc       *float64  `json:"ema_acc"`
		TestTop5     *float64  `json:"test_top5"`
		History      []struct {
			LR float64 `json:"lr"`
		} `json:"history"`
	}
	lastJSON(t, out, &res)
	if !res.StoppedEarly || res.StoppedEpoch != 3 || res.Epochs != 3 || res.BestEpoch != 1 || len(res.ClassAcc) != 3 || res.EMAAcc == nil || res.TestTop5 == nil {
		t.Fatalf("train --json: %s; want stopped after epoch 3, best 1, 3 class accuracies, ema_acc and test_top5", lastLine(out))
	}
	if lrs := res.History; lrs[0].LR != 1e-6 || lrs[1].LR != 1e-6 || lrs[2].LR != 0.5e-6 {
		t.Errorf("learning rates %+v; want 1e-6, 1e-6, 5e-7", lrs)
	}
	if !strings.Contains(out, "stopped early after epoch 3") || !strings.Contains(out, "EMA") || !strings.Contains(out, "top-5") {
		t.Errorf("train's report lacks the early stop, the EMA's or the top-5 accuracy:\n%s", out)
	}

	out, errOut, code = stoke(t, "predict", "--checkpoint", best, "--data", root, "--size", "8", "--confusion", "--json", "-q")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errOut)
	}
	var sum predictSummary
	lastJSON(t, out, &sum)
	total, diag := 0, 0
	for i, row := range sum.Confusion {
		for j, v := range row {
			total += v
			if i == j {
				diag += v
			}
		}
	}
	if !sum.EMA || len(sum.Confusion) != 3 || total != sum.Samples || diag != sum.Correct || sum.Samples != 12 || len(sum.ClassAcc) != 3 || sum.Top5 != 1 {
		t.Errorf("predict --confusion --json: %s; want the EMA, a 3x3 matrix over 12 samples whose diagonal is the correct ones, top-5 1", lastLine(out))
	}
	out, errOut, code = stoke(t, "predict", "--checkpoint", best, "--data", root, "--size", "8", "--confusion", "--ema=false")
	if code != 0 {
		t.Fatalf("predict --ema=false: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "confusion matrix (rows: label, columns: predicted class)") || !strings.Contains(out, "2 c") || strings.Contains(out, "EMA") {
		t.Errorf("predict --confusion --ema=false printed:\n%s", out)
	}

	var files [2][]byte
	for i, ema := range []string{"--ema=true", "--ema=false"} {
		path := filepath.Join(dir, "m.safetensors")
		out, errOut, code := stoke(t, "export", "--checkpoint", best, "--out", path, ema)
		if code != 0 {
			t.Fatalf("export %s: exit %d: %s", ema, code, errOut)
		}
		if strings.Contains(out, "EMA") != (i == 0) {
			t.Errorf("export %s said %q", ema, out)
		}
		var err error
		if files[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.Equal(files[0], files[1]) {
		t.Error("export wrote the same weights with and without --ema")
	}
}

// TestTrainLoopFlagsRefused: a bad loop flag is a usage error (exit 2) whose message names the
// flag, whether the flag's parsing or train.Config.Validate refuses it.
func TestTrainLoopFlagsRefused(t *testing.T) {
	root := photoFolder(t, 3, 4, nil)
	for _, bad := range [][]string{{"--accumulate", "0"}, {"--accumulate", "-2"}, {"--schedule", "plateau:bogus=1"}, {"--schedule", "plateau:factor=2"},
		{"--ema", "1"}, {"--ema-warmup"}, {"--early-stop", "-1"}, {"--clip-grad-norm", "-1"}, {"--clip-grad-norm", "+Inf"}} {
		_, errOut, code := stoke(t, append([]string{"train", "--data", root, "--size", "8", "--val-split", "0.25", "-q"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("train %v: exit %d (%s); want 2 and a message naming %s", bad, code, errOut, bad[0])
		}
	}
}

// TestTrainDataParallelLoop: on 2 ranks, with accumulation, clipping, an EMA, the plateau
// schedule and early stopping decided on the evaluation summed over the ranks, both ranks stop
// after the same epoch (a rank that went on would hang the other) and rank 0 keeps the best
// checkpoint.
func TestTrainDataParallelLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 training processes")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 3, 16, 7, 12)
	port := freePort(t)
	best := filepath.Join(t.TempDir(), "best")
	var cmds []*exec.Cmd
	for r := range 2 {
		cmd := exec.CommandContext(t.Context(), bin, "train", "--data", root, "--model", "mlp", "--size", "12", "--epochs", "6", "--lr", "1e-6",
			"--batch", "4", "--workers", "1", "--rank", fmt.Sprint(r), "--world-size", "2", "--master-port", port, "--dist-timeout", "60s",
			"--accumulate", "2", "--clip-grad-norm", "1", "--ema", "0.9", "--schedule", "plateau:patience=0", "--early-stop", "1", "--keep-best", best, "--json")
		cmd.Env = withoutRankEnv()
		cmds = append(cmds, cmd)
	}
	outs := runAll(cmds)
	for r, o := range outs {
		if o.err != nil {
			t.Fatalf("rank %d: %v: %s", r, o.err, o.stderr)
		}
	}
	var res struct {
		StoppedEarly bool `json:"stopped_early"`
		StoppedEpoch int  `json:"stopped_epoch"`
		Epochs       int  `json:"epochs"`
		WorldSize    int  `json:"world_size"`
	}
	lastJSON(t, outs[0].stdout, &res)
	if !res.StoppedEarly || res.StoppedEpoch != 2 || res.Epochs != 2 || res.WorldSize != 2 {
		t.Errorf("rank 0: %s; want stopped after epoch 2 of 2 ranks", lastLine(outs[0].stdout))
	}
	if c, err := os.Stat(best); err != nil || c.Size() == 0 {
		t.Errorf("--keep-best: %v", err)
	}
}

// TestEMAShortRun is the case: a run of 18 optimizer steps with --ema 0.999 (an average
// over ~1000 steps) and --ema-warmup=false keeps an EMA near the initial weights. The run warns;
// --keep-best keeps the best epoch by the model's accuracy, not the EMA's; stoke predict and
// export serve the trained weights and say why. Without --ema-warmup the run warms the decay up.
func TestEMAShortRun(t *testing.T) {
	root := photoFolder(t, 3, 8, nil)
	dir := t.TempDir()
	best := filepath.Join(dir, "best.bin")
	args := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "1", "--epochs", "1", "--lr", "0.05", "--val-split", "0.25",
		"--ema", "0.999", "--keep-best", best, "--json"}
	out, errOut, code := stoke(t, append(args, "--ema-warmup=false")...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	var res struct {
		TestAcc    float64  `json:"test_acc"`
		EMAAcc     float64  `json:"ema_acc"`
		BestMetric float64  `json:"best_metric"`
		EMAWarmup  bool     `json:"ema_warmup"`
		Warnings   []string `json:"warnings"`
	}
	lastJSON(t, out, &res)
	t.Logf("model %.3f, EMA %.3f", res.TestAcc, res.EMAAcc)
	if !(res.EMAAcc < res.TestAcc) {
		t.Fatalf("the EMA scores %v, the model %v: this run cannot show which is served", res.EMAAcc, res.TestAcc)
	}
	if res.EMAWarmup || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "~1000 optimizer steps") || !strings.Contains(errOut, "warning: --ema 0.999") {
		t.Errorf("train --ema-warmup=false: ema_warmup %v, warnings %q, stderr %q; want a warning that the EMA needs ~1000 steps", res.EMAWarmup, res.Warnings, errOut)
	}
	if res.BestMetric != res.TestAcc || !strings.Contains(out, "the model's: its EMA scored") {
		t.Errorf("--keep-best kept a metric of %v; want the model's %v, said so:\n%s", res.BestMetric, res.TestAcc, out)
	}
	var acc [2]float64
	for i, ema := range []string{"--ema=true", "--ema=false"} {
		out, errOut, code := stoke(t, "predict", "--checkpoint", best, "--data", root, "--size", "8", ema, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict %s: exit %d: %s", ema, code, errOut)
		}
		var sum predictSummary
		lastJSON(t, out, &sum)
		if sum.EMA {
			t.Errorf("predict %s served the EMA that scored %v against the model's %v", ema, res.EMAAcc, res.TestAcc)
		}
		acc[i] = sum.Accuracy
	}
	if acc[0] != acc[1] {
		t.Errorf("predict scores %v by default, %v with the trained weights; want the trained weights served", acc[0], acc[1])
	}
	out, errOut, code = stoke(t, "predict", "--checkpoint", best, "--data", root, "--size", "8")
	if code != 0 || !strings.Contains(out, "the trained weights: the checkpoint's EMA scored") {
		t.Errorf("predict: exit %d, printed %q (%s); want it to say it serves the trained weights and why", code, out, errOut)
	}
	out, errOut, code = stoke(t, "export", "--checkpoint", best, "--out", filepath.Join(dir, "m.safetensors"))
	if code != 0 || !strings.Contains(out, "the trained weights (the checkpoint's EMA scored") {
		t.Errorf("export: exit %d, printed %q (%s); want the trained weights, said so", code, out, errOut)
	}

	out, errOut, code = stoke(t, args...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	lastJSON(t, out, &res)
	if !res.EMAWarmup || len(res.Warnings) != 0 || !strings.Contains(out, "warming its decay up") {
		t.Errorf("train --ema 0.999 on 18 steps: ema_warmup %v, warnings %q; want the warm-up on, said so:\n%s", res.EMAWarmup, res.Warnings, out)
	}
}
