package cli

import (
	"strings"
	"testing"
)

// TestGradCheckpointing: --grad-checkpointing trains a ResNet to the same loss and accuracy,
// bit for bit, as without; a model without blocks and --sync-bn are refused.
func TestGradCheckpointing(t *testing.T) {
	root := photoFolder(t, 2, 8, nil)
	common := []string{"train", "--data", root, "--size", "8", "--model", "resnet8", "--batch", "4", "--epochs", "1", "--eval-on-train", "--json", "-q"}
	run := func(args ...string) (finalLoss, testAcc float64) {
		t.Helper()
		out, errOut, code := stoke(t, append(common, args...)...)
		if code != 0 {
			t.Fatalf("train %v: exit %d: %s", args, code, errOut)
		}
		var r struct {
			FinalLoss float64 `json:"final_loss"`
			TestAcc   float64 `json:"test_acc"`
		}
		lastJSON(t, out, &r)
		return r.FinalLoss, r.TestAcc
	}
	loss, acc := run()
	ckLoss, ckAcc := run("--grad-checkpointing")
	if loss != ckLoss || acc != ckAcc {
		t.Errorf("--grad-checkpointing: loss %v, accuracy %v; without %v, %v", ckLoss, ckAcc, loss, acc)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "mlp", "--grad-checkpointing"}, "no blocks"},
		{[]string{"--grad-checkpointing", "--sync-bn"}, "synchronized batch norms"},
	} {
		if _, errOut, code := stoke(t, append(common, c.args...)...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("train %v: exit %d, %q; want an error saying %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSummaryOptimizerSlots: stoke summary counts the optimizer's slots per weight: AMSGrad's
// third with --amsgrad, which sgd refuses as train does.
func TestSummaryOptimizerSlots(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--optimizer", "adam"}, "2 optimizer slot(s)"},
		{[]string{"--optimizer", "adamw", "--amsgrad"}, "3 optimizer slot(s)"},
		{[]string{"--grad-checkpointing"}, "1 optimizer slot(s)"},
	} {
		out, errOut, code := stoke(t, append([]string{"summary", "--model", "resnet8", "--size", "32"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("summary %v: exit %d, %s%s; want %q", c.args, code, out, errOut, c.want)
		}
	}
	if _, errOut, code := stoke(t, "summary", "--model", "resnet8", "--optimizer", "sgd", "--amsgrad"); code != 2 || !strings.Contains(errOut, "Adam's and AdamW's") {
		t.Errorf("summary --optimizer sgd --amsgrad: exit %d, %s; want a usage error", code, errOut)
	}
}
