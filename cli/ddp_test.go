package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
)

// freePort returns a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// splitFolder makes a folder with train/ and test/ subfolders of noisy classes.
func splitFolder(t *testing.T, classes, trainPer, testPer, side int) string {
	t.Helper()
	root := t.TempDir()
	for split, per := range map[string]int{"train": trainPer, "test": testPer} {
		if err := os.Rename(noisyFolder(t, classes, per, side), filepath.Join(root, split)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// procOut is what one process of a run wrote and how it ended.
type procOut struct {
	stdout, stderr string
	err            error
}

// runAll starts the commands at once and waits for all of them.
func runAll(cmds []*exec.Cmd) []procOut {
	outs := make([]procOut, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		wg.Go(func() {
			err := cmd.Run()
			outs[i] = procOut{o.String(), e.String(), err}
		})
	}
	wg.Wait()
	return outs
}

// TestTrainDataParallel trains on 2 ranks placed by flags: rank 0 alone reports, with the global
// batch; the accuracies it reports over the split evaluations, of the val split each epoch and
// of the test split after training, are those of its checkpoint on the whole splits, predicted
// by one process.
func TestTrainDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 training processes")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 3, 30, 11, 12)
	if err := os.Rename(noisyFolder(t, 3, 7, 12), filepath.Join(root, "val")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ck := filepath.Join(t.TempDir(), "ck")
	var cmds []*exec.Cmd
	for r := range 2 {
		cmd := exec.CommandContext(t.Context(), bin, "train", "--data", root, "--model", "mlp", "--size", "12", "--epochs", "2",
			"--batch", "8", "--workers", "1", "--rank", fmt.Sprint(r), "--world-size", "2", "--master-port", port,
			"--dist-timeout", "60s", "--checkpoint", ck, "--json")
		cmd.Env = withoutRankEnv()
		cmds = append(cmds, cmd)
	}
	outs := runAll(cmds)
	for r, o := range outs {
		if o.err != nil {
			t.Fatalf("rank %d: %v\n%s", r, o.err, o.stderr)
		}
	}
	if outs[1].stdout != "" {
		t.Errorf("rank 1 wrote to stdout: %q; rank 0 reports for every rank", outs[1].stdout)
	}
	var res trainResult
	lastJSON(t, outs[0].stdout, &res)
	if res.WorldSize != 2 || res.Batch != 8 || res.GlobalBatch != 16 || res.Epochs != 2 || res.Eval != "validation" || res.FinalTest == nil {
		t.Fatalf("rank 0 JSON: world %d, batch %d, global batch %d, %d epochs, eval %q, final test %v; want 2, 8, 16, 2, validation, one",
			res.WorldSize, res.Batch, res.GlobalBatch, res.Epochs, res.Eval, res.FinalTest)
	}
	if !strings.Contains(outs[0].stdout, "batch 8 per rank x 2 ranks = 16") {
		t.Errorf("rank 0's report does not state the global batch:\n%s", outs[0].stdout)
	}
	// The FLOP/s are of every rank's samples, against both ranks' peak (each started by hand takes
	// every core: no launcher said it shares the host).
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	peak := gpu.PeakFLOPS(dev)
	dev.Close()
	if res.FLOPsPerS != float64(res.TrainFLOPsPerSample)*res.SamplesPerS || peak > 0 && (res.PeakFLOPsPerS != 2*peak || res.MFU == nil) {
		t.Errorf("rank 0 JSON: %g FLOP/s of %d a sample at %g samples/s, peak %g, mfu %v; want their product, and 2 x the cpu's peak %g with an mfu",
			res.FLOPsPerS, res.TrainFLOPsPerSample, res.SamplesPerS, res.PeakFLOPsPerS, res.MFU, peak)
	}
	for _, split := range []struct {
		name    string
		samples int
		acc     float64
	}{{"val", 21, res.TestAcc}, {"test", 33, res.FinalTest.Accuracy}} {
		out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--split", split.name, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict: exit %d: %s", code, errOut)
		}
		var pred predictSummary
		lastJSON(t, out, &pred)
		if n := float64(split.samples); pred.Samples != split.samples || math.Abs(pred.Accuracy-split.acc) > 1/n+1e-9 {
			t.Errorf("the ranks reported %s accuracy %v; one process predicts %v on %d samples of the checkpoint (want %d, the same within one sample)",
				split.name, split.acc, pred.Accuracy, pred.Samples, split.samples)
		}
	}
}

// TestTrainSyncBN: resnet8 trained on 2 ranks at batch 4 with --sync-bn predicts what one process
// trained at batch 8 predicts (the ranks' batches together are the single process's), within
// float32 rounding; without --sync-bn the ranks' own BatchNorm statistics make it differ.
func TestTrainSyncBN(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 5 training processes")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 3, 12, 4, 12)
	args := []string{"train", "--data", root, "--model", "resnet8", "--size", "12", "--epochs", "1", "--workers", "1", "--dist-timeout", "60s", "--json"}
	trainRanks := func(world int, extra ...string) (trainResult, string) {
		t.Helper()
		ck := filepath.Join(t.TempDir(), "ck")
		port := freePort(t)
		var cmds []*exec.Cmd
		for r := range world {
			a := append(append(append([]string(nil), args...), extra...), "--batch", fmt.Sprint(8/world), "--checkpoint", ck,
				"--rank", fmt.Sprint(r), "--world-size", fmt.Sprint(world), "--master-port", port)
			cmd := exec.CommandContext(t.Context(), bin, a...)
			cmd.Env = withoutRankEnv()
			cmds = append(cmds, cmd)
		}
		outs := runAll(cmds)
		for r, o := range outs {
			if o.err != nil {
				t.Fatalf("world %d rank %d: %v\n%s", world, r, o.err, o.stderr)
			}
		}
		var res trainResult
		lastJSON(t, outs[0].stdout, &res)
		return res, ck
	}
	logits := func(ck string) [][]float32 {
		t.Helper()
		out, errOut, code := stoke(t, "predict", "--checkpoint", ck, "--data", root, "--json", "-q")
		if code != 0 {
			t.Fatalf("predict: exit %d: %s", code, errOut)
		}
		var all [][]float32
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var p predictJSON
			if err := json.Unmarshal([]byte(l), &p); err == nil && p.Logits != nil {
				all = append(all, p.Logits)
			}
		}
		return all
	}
	largest := func(a, b [][]float32) float64 {
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("predicted %d and %d samples", len(a), len(b))
		}
		d := 0.0
		for i := range a {
			for j := range a[i] {
				d = max(d, math.Abs(float64(a[i][j]-b[i][j])))
			}
		}
		return d
	}
	_, ck1 := trainRanks(1)
	one := logits(ck1)
	res, ckSync := trainRanks(2, "--sync-bn")
	if !res.SyncBN || res.WorldSize != 2 || res.GlobalBatch != 8 {
		t.Fatalf("rank 0 JSON: sync_bn %v, world %d, global batch %d; want true, 2, 8", res.SyncBN, res.WorldSize, res.GlobalBatch)
	}
	dSync := largest(one, logits(ckSync))
	res, ckOwn := trainRanks(2)
	if res.SyncBN {
		t.Fatalf("rank 0 JSON: sync_bn true without --sync-bn")
	}
	dOwn := largest(one, logits(ckOwn))
	t.Logf("largest logit difference to one process at batch 8: %.2g with --sync-bn, %.2g without", dSync, dOwn)
	if dSync > 1e-4 || dOwn < 100*dSync {
		t.Errorf("logits differ from one process's by %.2g with --sync-bn, %.2g without; want < 1e-4, and 100 times more without", dSync, dOwn)
	}
}

// TestTrainRankMissing: a rank whose peer never arrives fails within --dist-timeout, names what it
// waited for, and writes no checkpoint.
func TestTrainRankMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a training process")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 2, 4, 2, 8)
	ck := filepath.Join(t.TempDir(), "ck")
	cmd := exec.CommandContext(t.Context(), bin, "train", "--data", root, "--model", "mlp", "--size", "8", "--rank", "0",
		"--world-size", "2", "--master-port", freePort(t), "--dist-timeout", "2s", "--checkpoint", ck)
	cmd.Env = withoutRankEnv()
	start := time.Now()
	out := runAll([]*exec.Cmd{cmd})[0]
	took := time.Since(start)
	if out.err == nil {
		t.Fatalf("rank 0 of 2 trained alone: %s", out.stdout)
	}
	if took > 30*time.Second {
		t.Errorf("rank 0 gave up after %v; --dist-timeout is 2s", took)
	}
	if !strings.Contains(out.stderr, "rank") {
		t.Errorf("stderr %q does not name the rank", out.stderr)
	}
	if _, err := os.Stat(ck); err == nil {
		t.Errorf("a checkpoint was written by a run that never trained")
	}
	t.Logf("after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(out.stderr))
}

// TestTorchrunTrain launches 2 ranks of stoke train with Debian's torchrun: they meet in the
// agent's c10d store and train together.
func TestTorchrunTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchrun")
	}
	torchrun, err := exec.LookPath("torchrun")
	if err != nil {
		t.Skip("torchrun not installed (Debian's python3-torch; .ci/run installs it)")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 3, 20, 6, 10)
	// --redirects/--tee: torchrun 1.13 on Python 3.11 fails at start without them (see
	// shared/peers/README.md); rank lines come back prefixed [defaultN]:.
	cmd := exec.CommandContext(t.Context(), torchrun, "--redirects", "1", "--tee", "1", "--nnodes", "1", "--nproc_per_node", "2",
		"--master_addr", "127.0.0.1", "--master_port", freePort(t), "--no_python",
		bin, "train", "--data", root, "--model", "mlp", "--size", "10", "--epochs", "1", "--batch", "4", "--workers", "1",
		"--dist-timeout", "60s", "--json")
	cmd.Env = append(withoutRankEnv(), "OMP_NUM_THREADS=1")
	out := runAll([]*exec.Cmd{cmd})[0]
	if out.err != nil {
		t.Fatalf("torchrun: %v\n%s\n%s", out.err, out.stdout, out.stderr)
	}
	var lines []string
	for _, l := range strings.Split(out.stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "[default0]:"); ok {
			lines = append(lines, rest)
		}
		if strings.HasPrefix(l, "[default1]:") {
			t.Errorf("rank 1 wrote to stdout: %q", l)
		}
	}
	var res trainResult
	lastJSON(t, strings.Join(lines, "\n"), &res)
	if res.WorldSize != 2 || res.GlobalBatch != 8 || res.Epochs != 1 {
		t.Fatalf("rank 0 JSON under torchrun: world %d, global batch %d, %d epochs; want 2, 8, 1", res.WorldSize, res.GlobalBatch, res.Epochs)
	}
}

// TestTrainRestartResumes: a run that torchrun restarted (TORCHELASTIC_RESTART_COUNT > 0)
// continues from its --checkpoint instead of training again from scratch.
func TestTrainRestartResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs training processes")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 2, 8, 4, 8)
	ck := filepath.Join(t.TempDir(), "ck")
	args := []string{"train", "--data", root, "--model", "mlp", "--size", "8", "--batch", "4", "--workers", "1", "--checkpoint", ck, "--json"}
	launcher := append(withoutRankEnv(), "RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+freePort(t))
	first := exec.CommandContext(t.Context(), bin, append(args, "--epochs", "1")...)
	first.Env = append(launcher, "TORCHELASTIC_RESTART_COUNT=0")
	if o := runAll([]*exec.Cmd{first})[0]; o.err != nil {
		t.Fatalf("first attempt: %v\n%s", o.err, o.stderr)
	}
	again := exec.CommandContext(t.Context(), bin, append(args, "--epochs", "2")...)
	again.Env = append(launcher, "TORCHELASTIC_RESTART_COUNT=1")
	o := runAll([]*exec.Cmd{again})[0]
	if o.err != nil {
		t.Fatalf("restarted attempt: %v\n%s", o.err, o.stderr)
	}
	var res trainResult
	lastJSON(t, o.stdout, &res)
	if !strings.Contains(o.stdout, "resuming from "+ck) || res.Epochs != 2 || len(res.History) != 2 {
		t.Fatalf("restart: %d epochs, %d in the history; want 2 and 2, resumed from %s:\n%s", res.Epochs, len(res.History), ck, o.stdout)
	}
}

// TestRestartOnFewerRanks: a run of 2 ranks at batch 4 whose group restarts on 1 (an elastic
// restart after a rank's node died: torchrun's TORCHELASTIC_RESTART_COUNT, WORLD_SIZE 1) resumes
// its checkpoint at batch 8, the global batch the checkpoint's steps took; on 3 ranks, which do
// not divide it, the restart is refused with the reason.
func TestRestartOnFewerRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs training processes")
	}
	bin := stokeBin(t)
	root := splitFolder(t, 2, 16, 4, 8)
	ck := filepath.Join(t.TempDir(), "ck")
	args := []string{"train", "--data", root, "--model", "mlp", "--size", "8", "--batch", "4", "--workers", "1", "--checkpoint", ck,
		"--checkpoint-every", "2", "--dist-timeout", "60s", "--json"}
	port := freePort(t)
	var cmds []*exec.Cmd
	for r := range 2 {
		cmd := exec.CommandContext(t.Context(), bin, append(args, "--epochs", "1")...)
		cmd.Env = torchrunEnv(r, 2, port, 0)
		cmds = append(cmds, cmd)
	}
	for r, o := range runAll(cmds) {
		if o.err != nil {
			t.Fatalf("rank %d of 2: %v\n%s", r, o.err, o.stderr)
		}
	}
	restart := func(world int) procOut {
		var cmds []*exec.Cmd
		port := freePort(t)
		for r := range world {
			cmd := exec.CommandContext(t.Context(), bin, append(args, "--epochs", "2")...)
			cmd.Env = torchrunEnv(r, world, port, 1)
			cmds = append(cmds, cmd)
		}
		return runAll(cmds)[0]
	}
	if o := restart(3); o.err == nil || !strings.Contains(o.stderr, "global batch of 8 on 2 ranks, which does not divide over 3") {
		t.Errorf("restart on 3 ranks: %v; want the refusal saying why:\n%s", o.err, o.stderr)
	}
	o := restart(1)
	if o.err != nil {
		t.Fatalf("restart on 1 rank: %v\n%s", o.err, o.stderr)
	}
	var res trainResult
	lastJSON(t, o.stdout, &res)
	if !strings.Contains(o.stdout, "resuming on 1 ranks a run of 2: batch 8 per rank keeps its global batch of 8") || res.Epochs != 2 ||
		res.Batch != 8 || res.GlobalBatch != 8 || len(res.History) != 2 {
		t.Fatalf("restart on 1 rank: %d epochs, batch %d, global %d; want 2 epochs at batch 8:\n%s", res.Epochs, res.Batch, res.GlobalBatch, o.stdout)
	}
}

// torchrunEnv is the environment torchrun gives rank r of world on one host, the store at port of
// 127.0.0.1, after restarts restarts of the group.
func torchrunEnv(r, world int, port string, restarts int) []string {
	return append(withoutRankEnv(), fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", world), fmt.Sprintf("LOCAL_RANK=%d", r),
		fmt.Sprintf("LOCAL_WORLD_SIZE=%d", world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port, fmt.Sprintf("TORCHELASTIC_RESTART_COUNT=%d", restarts))
}
