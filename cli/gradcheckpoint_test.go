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
