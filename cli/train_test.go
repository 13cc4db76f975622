package cli

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/models"
)

type trainJSON struct {
	TestAcc          *float64 `json:"test_acc"`
	FinalLoss        *float64 `json:"final_loss"`
	SamplesPerS      *float64 `json:"samples_per_s"`
	Seconds          *float64 `json:"seconds"`
	Epochs           int      `json:"epochs"`
	DataWaitFraction *float64 `json:"data_wait_fraction"`
}

func TestTrainCheckpointResume(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	ck := filepath.Join(t.TempDir(), "ck.bin")
	args := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--workers", "2", "--val-split", "0.25", "--json", "-q"}

	out, errOut, code := stoke(t, append(args, "--epochs", "1", "--checkpoint", ck)...)
	if code != 0 {
		t.Fatalf("train 1 epoch: exit %d: %s", code, errOut)
	}
	var first trainJSON
	lastJSON(t, out, &first)
	if first.Epochs != 1 || first.TestAcc == nil || first.FinalLoss == nil || first.SamplesPerS == nil || first.Seconds == nil || first.DataWaitFraction == nil {
		t.Errorf("train --json = %q; want epochs 1 and every contract field", out)
	}
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("--checkpoint wrote nothing: %v", err)
	}

	out, errOut, code = stoke(t, append(args, "--epochs", "2", "--resume", ck)...)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errOut)
	}
	var resumed trainJSON
	lastJSON(t, out, &resumed)
	if resumed.Epochs != 2 {
		t.Errorf("resumed run reports %d epochs; want 2 in total", resumed.Epochs)
	}

	// A checkpoint of another model, and a truncated one, are refused with one line on stderr.
	_, errOut, code = stoke(t, "train", "--data", root, "--size", "8", "--model", "cnn", "--batch", "4", "--val-split", "0.25", "--epochs", "2", "--resume", ck,
		"-q")
	if code != 1 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, "checkpoint") {
		t.Errorf("resume with another model: exit %d, stderr %q; want 1 and a one-line checkpoint error", code, errOut)
	}
	b, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = stoke(t, append(args, "--epochs", "2", "--resume", ck)...)
	if code != 1 || !strings.Contains(errOut, "checkpoint") {
		t.Errorf("resume from a truncated checkpoint: exit %d, stderr %q; want 1 and a checkpoint error", code, errOut)
	}
}

// TestTrainFLOPs: stoke train --json reports the model's training FLOPs a sample, 6 times the
// multiply-adds stoke summary counts for it, the FLOP/s they make at samples_per_s, the CPU
// device's peak and their share of it; the text summary says the same in one line.
func TestTrainFLOPs(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
		"--val-split", "0.25", "--json")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	var res struct {
		trainJSON
		PerSample *int64   `json:"train_flops_per_sample"`
		FLOPsPerS *float64 `json:"flops_per_s"`
		Peak      *float64 `json:"peak_flops_per_s"`
		MFU       *float64 `json:"mfu"`
	}
	lastJSON(t, out, &res)
	if res.PerSample == nil || res.FLOPsPerS == nil || res.SamplesPerS == nil || *res.PerSample <= 0 || *res.FLOPsPerS <= 0 {
		t.Fatalf("train --json = %q; want positive train_flops_per_sample, flops_per_s and samples_per_s", out)
	}
	if want := float64(*res.PerSample) * *res.SamplesPerS; math.Abs(*res.FLOPsPerS-want) > 1e-9*want {
		t.Errorf("flops_per_s = %g; want train_flops_per_sample x samples_per_s = %d x %g = %g", *res.FLOPsPerS, *res.PerSample, *res.SamplesPerS, want)
	}

	sumOut, errOut, code := stoke(t, "summary", "--model", "mlp", "--size", "8", "--channels", "3", "--classes", "2", "--json", "-q")
	if code != 0 {
		t.Fatalf("summary: exit %d: %s", code, errOut)
	}
	var sum summaryJSON
	lastJSON(t, sumOut, &sum)
	if sum.MACs <= 0 || *res.PerSample != 6*sum.MACs {
		t.Errorf("train_flops_per_sample = %d; want 6 x the %d multiply-adds stoke summary counts", *res.PerSample, sum.MACs)
	}

	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	peak := gpu.PeakFLOPS(dev)
	dev.Close()
	if peak == 0 {
		if res.Peak != nil || res.MFU != nil {
			t.Errorf("train --json = %q; want no peak_flops_per_s nor mfu where the CPU's peak is unknown", out)
		}
		t.Skip("this host's CPU peak is unknown: no mfu to check")
	}
	if res.Peak == nil || *res.Peak != peak || res.MFU == nil {
		t.Fatalf("train --json = %q; want peak_flops_per_s %g (gpu.PeakFLOPS of the cpu device) and mfu", out, peak)
	}
	if want := *res.FLOPsPerS / peak; *res.MFU <= 0 || *res.MFU > 1 || math.Abs(*res.MFU-want) > 1e-9*want {
		t.Errorf("mfu = %g; want flops_per_s / peak_flops_per_s = %g, in (0, 1]", *res.MFU, want)
	}
	if !regexp.MustCompile(`model FLOPs: [0-9.e+]+ GFLOP/s \([0-9.e+]+ MFLOP a training sample\), [0-9.]+% of the device's float32 peak of [0-9.e+]+ GFLOP/s \(MFU\)\n`).MatchString(out) {
		t.Errorf("train's summary %q has no line of its model FLOPs and MFU", out)
	}
}

// TestRunFLOPs: over several ranks the peak is theirs together; without a known float32 peak
// (unknown, or 16-bit products on a device other than the CPU) there is no peak nor mfu.
func TestRunFLOPs(t *testing.T) {
	f := runFLOPs(600, 1000, 1e9, 2, true)
	if f.TrainFLOPsPerSample != 600 || f.FLOPsPerS != 6e5 || f.PeakFLOPsPerS != 2e9 || f.MFU == nil || *f.MFU != 3e-4 {
		t.Errorf("runFLOPs(600, 1000, 1e9, 2 ranks) = %+v; want 6e5 FLOP/s of a 2e9 peak, mfu 3e-4", f)
	}
	if got, want := f.text(2), "model FLOPs: 0.0006 GFLOP/s (0.0006 MFLOP a training sample) over 2 ranks, 0.0% of the devices' float32 peak of 2 GFLOP/s (MFU)"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	for _, c := range []struct {
		peak   float64
		atPeak bool
	}{{0, true}, {1e9, false}} {
		f := runFLOPs(600, 1000, c.peak, 1, c.atPeak)
		if f.FLOPsPerS != 6e5 || f.PeakFLOPsPerS != 0 || f.MFU != nil {
			t.Errorf("runFLOPs(peak %g, at peak %v) = %+v; want 6e5 FLOP/s, no peak, no mfu", c.peak, c.atPeak, f)
		}
		b, err := marshalJSON(f)
		if err != nil || strings.Contains(string(b), "mfu") || strings.Contains(string(b), "peak") {
			t.Errorf("marshalJSON(%+v) = %s, %v; want neither peak_flops_per_s nor mfu", f, b, err)
		}
		if got := f.text(1); !strings.HasSuffix(got, ", the device's peak unknown") {
			t.Errorf("text = %q; want the peak said unknown", got)
		}
	}
}

// TestTrainPrecision: --precision bf16 and fp16 train on the CPU backend (its documented
// emulation) and say so in the --json line.
func TestTrainPrecision(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	for _, p := range []string{"bf16", "fp16"} {
		out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "cnn", "--batch", "4", "--epochs", "1",
			"--val-split", "0.25", "--precision", p, "--json")
		if code != 0 {
			t.Fatalf("--precision %s: exit %d: %s", p, code, errOut)
		}
		var res struct {
			trainJSON
			Precision string `json:"precision"`
		}
		lastJSON(t, out, &res)
		if res.Precision != p || res.Epochs != 1 || res.FinalLoss == nil {
			t.Errorf("--precision %s: --json line %q; want precision %q after 1 epoch", p, out, p)
		}
		if !strings.Contains(out, p+" products") {
			t.Errorf("--precision %s: output %q does not name the precision", p, out)
		}
	}
}

// TestTrainZooRecipe: stoke train --model vit(...) trains with the ViT family's recipe (AdamW,
// the learning rate scaled to the batch, weight decay 0.05), its augmentation (RandAugment, MixUp,
// CutMix, random erasing) only with --augment recipe; its flags override each part, and a rate
// from the recipe follows --batch. Fine-tuned from its weights (--init), it decays the rate by
// layer as the recipe says.
func TestTrainZooRecipe(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	const vit = "vit(image_size=8,patch_size=4,num_layers=1,num_heads=2,hidden_dim=8,mlp_dim=16)"
	r := models.RecipeFor(vit)
	args := []string{"train", "--data", root, "--size", "8", "--model", vit, "--epochs", "1", "--val-split", "0.25", "--json"}
	for _, c := range []struct {
		flags []string
		want  trainResult
	}{
		{nil, trainResult{Optimizer: "adamw", LR: r.ScaledLR(r.Batch), WeightDecay: 0.05, Batch: r.Batch, Augment: "none"}},
		{[]string{"--augment", "recipe"}, trainResult{Optimizer: "adamw", LR: r.ScaledLR(r.Batch), WeightDecay: 0.05, Batch: r.Batch,
			Augment: "randaugment:2:9", MixUp: 0.8, CutMix: 1, RandomErasing: 0.25}},
		{[]string{"--batch", "8", "--augment", "recipe", "--mixup", "0.3", "--random-erasing", "0"}, trainResult{Optimizer: "adamw", LR: r.ScaledLR(8),
			WeightDecay: 0.05, Batch: 8, Augment: "randaugment:2:9", MixUp: 0.3, CutMix: 1}},
		{[]string{"--optimizer", "sgd", "--lr", "0.05", "--wd", "0", "--batch", "3", "--augment", "trivialaugment", "--ema", "0.9"},
			trainResult{Optimizer: "sgd", LR: 0.05, Batch: 3, Augment: "trivialaugment", EMA: 0.9}},
		{[]string{"--optimizer", "rmsprop", "--lr", "0.01", "--wd", "1e-5", "--batch", "3"},
			trainResult{Optimizer: "rmsprop", LR: 0.01, WeightDecay: 1e-5, Batch: 3, Augment: "none"}},
	} {
		out, errOut, code := stoke(t, append(args, c.flags...)...)
		if code != 0 {
			t.Fatalf("train --model %s %v: exit %d: %s", vit, c.flags, code, errOut)
		}
		var res trainResult
		lastJSON(t, out, &res)
		got := trainResult{Optimizer: res.Optimizer, LR: res.LR, WeightDecay: res.WeightDecay, Batch: res.Batch, Augment: res.Augment, MixUp: res.MixUp,
			CutMix: res.CutMix, RandomErasing: res.RandomErasing, EMA: res.EMA}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("train --model %s %v: the run's recipe %+v; want %+v", vit, c.flags, got, c.want)
		}
	}
	// MobileNetV3 trains with its recipe's RMSprop and AutoAugment, torchvision's.
	{
		const v3 = "mobilenet_v3_small(width_mult=0.25)"
		out, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", v3, "--epochs", "1", "--val-split", "0.25", "--batch", "3",
			"--augment", "recipe", "--json")
		if code != 0 {
			t.Fatalf("train --model %s: exit %d: %s", v3, code, errOut)
		}
		var res trainResult
		lastJSON(t, out, &res)
		if r3 := models.RecipeFor(v3); res.Optimizer != "rmsprop" || res.LR != r3.ScaledLR(3) || res.WeightDecay != 1e-5 || res.RandomErasing != 0.2 ||
			res.Augment != "autoaugment" {
			t.Errorf("train --model %s: optimizer %q, lr %v, weight decay %v, random erasing %v, augment %q; want its recipe's rmsprop, %v, 1e-5, 0.2, autoaugment", v3,
				res.Optimizer, res.LR, res.WeightDecay, res.RandomErasing, res.Augment, r3.ScaledLR(3))
		}
	}
	// Fine-tuning from its weights: the new head is heads.head, the rest frozen, and the recipe's
	// layer decay applies.
	dir := t.TempDir()
	ck, w := filepath.Join(dir, "ck"), filepath.Join(dir, "w.safetensors")
	if _, errOut, code := stoke(t, append(args, "--checkpoint", ck)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if _, errOut, code := stoke(t, "export", "--checkpoint", ck, "--out", w); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	out, errOut, code := stoke(t, "train", "--data", photoFolder(t, 3, 4, nil), "--size", "8", "--model", vit, "--epochs", "1", "--eval-on-train",
		"--init", w, "--freeze", "--json")
	if code != 0 {
		t.Fatalf("train --init --freeze: exit %d: %s", code, errOut)
	}
	var res trainResult
	lastJSON(t, out, &res)
	if want := "new head (3 classes): heads.head.weight, heads.head.bias"; !strings.Contains(out, want) || !strings.Contains(out, "frozen: ") ||
		res.LayerDecay != 0.75 {
		t.Errorf("train --init --freeze printed %q; want %q, the frozen count and layer decay 0.75", out, want)
	}
	out, errOut, _ = stoke(t, "train", "--help")
	help := out + errOut
	for _, want := range []string{
		`vit_l_32[^;]*: adamw lr 0\.004 x batch/512, weight decay 0\.05[^;]*, and when asked \(stoke train --augment recipe\) randaugment:2:9, mixup 0\.8`,
		`efficientnet_v2_s[^;]*: sgd lr 4 x batch/1024[^;]*, and when asked \(stoke train --augment recipe\) trivialaugment, mixup 0\.2`,
		`mobilenet_v3_small[^;]*: rmsprop [^;]*, and when asked \(stoke train --augment recipe\) autoaugment, random erasing 0\.2`,
	} {
		if !regexp.MustCompile(want).MatchString(help) {
			t.Errorf("train --help does not show the recipe %s: %s", want, help)
		}
	}
}

// TestTrainRecipeDefaults: with no flag but --model, stoke train runs the model's recipe
// (models.RecipeFor: learning rate, weight decay, batch, label smoothing, warm-up); each flag
// given overrides its part.
func TestTrainRecipeDefaults(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	for _, model := range []string{"mlp", "resnet8"} {
		args := []string{"train", "--data", root, "--size", "8", "--model", model, "--epochs", "1", "--val-split", "0.25", "--json"}
		r := models.RecipeFor(model)
		for _, flags := range [][]string{nil, {"--lr", "0.05", "--wd", "0", "--batch", "3", "--label-smoothing", "0", "--warmup-epochs", "0"}} {
			out, errOut, code := stoke(t, append(args, flags...)...)
			if code != 0 {
				t.Fatalf("train --model %s %v: exit %d: %s", model, flags, code, errOut)
			}
			var res trainResult
			lastJSON(t, out, &res)
			got := [5]float64{res.LR, res.WeightDecay, float64(res.Batch), res.LabelSmoothing, res.WarmupEpochs}
			want := [5]float64{r.LR, r.WeightDecay, float64(r.Batch), r.LabelSmoothing, r.WarmupEpochs}
			if flags != nil {
				want = [5]float64{0.05, 0, 3, 0, 0}
			}
			if got != want {
				t.Errorf("train --model %s %v: lr, weight decay, batch, label smoothing, warm-up %v; want %v", model, flags, got, want)
			}
		}
	}
}

// TestTrainDeviceDecode: training with --decode device is the same run as with --decode fast, loss
// and accuracy bit for bit: the device renders the fast decode's pixels byte for byte (JPEGs of
// two classes; the trainer, the model and the order are deterministic).
func TestTrainDeviceDecode(t *testing.T) {
	root := jpegFolder(t, 2, 6)
	run := func(decode string) trainJSON {
		out, errOut, code := stoke(t, "train", "--data", root, "--size", "32", "--model", "cnn", "--batch", "4", "--workers", "2",
			"--val-split", "0.25", "--epochs", "2", "--decode", decode, "--json", "-q")
		if code != 0 {
			t.Fatalf("--decode %s: exit %d: %s", decode, code, errOut)
		}
		var r trainJSON
		lastJSON(t, out, &r)
		if r.FinalLoss == nil || r.TestAcc == nil {
			t.Fatalf("--decode %s: %q lacks final_loss or test_acc", decode, out)
		}
		return r
	}
	fast, dev := run("fast"), run("device")
	if *dev.FinalLoss != *fast.FinalLoss || *dev.TestAcc != *fast.TestAcc {
		t.Errorf("--decode device: loss %v, accuracy %v; --decode fast: %v, %v (want the same run)", *dev.FinalLoss, *dev.TestAcc, *fast.FinalLoss, *fast.TestAcc)
	}
}
