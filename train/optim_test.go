package train

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/optim"
)

// TestAMSGradResume: Adam and AdamW with AMSGrad keep max_exp_avg_sq as a third slot, which the
// checkpoint carries: a run of one epoch resumed for two more equals the uninterrupted run of
// three bit for bit, and its max_exp_avg_sq is above exp_avg_sq somewhere, so the slot steered
// the later steps. A checkpoint with AMSGrad does not resume without it, nor one without AMSGrad
// with it.
func TestAMSGradResume(t *testing.T) {
	for _, opt := range []optim.Optimizer{
		optim.Adam{LR: 3e-3, WeightDecay: 1e-4, AMSGrad: true},
		optim.AdamW{LR: 3e-3, WeightDecay: 1e-2, AMSGrad: true},
	} {
		t.Run(strings.Fields(opt.String())[0], func(t *testing.T) {
			if opt.Slots() != 3 || !strings.HasSuffix(opt.String(), " amsgrad=true") {
				t.Fatalf("%s: %d slots; want 3, and amsgrad=true in its description", opt, opt.Slots())
			}
			cfg := Config{Epochs: 3, Seed: 5}
			full, trFull := fit(t, newFixture(t, 200), smallMLP(t), opt, cfg)
			steered := false
			for _, p := range trFull.m.tensors() {
				st := readBack(t, trFull, trFull.OptimizerState(p))
				for i := range st[1] {
					steered = steered || st[2][i] > st[1][i]
				}
			}
			if !steered {
				t.Fatal("max_exp_avg_sq equals exp_avg_sq everywhere: the run does not exercise AMSGrad")
			}

			first := Config{Epochs: 1, Seed: 5, Checkpoint: filepath.Join(t.TempDir(), "ckpt")}
			fit(t, newFixture(t, 200), smallMLP(t), opt, first)
			resumed := cfg
			resumed.Resume = first.Checkpoint
			res, tr := fit(t, newFixture(t, 200), smallMLP(t), opt, resumed)
			if res.FinalLoss != full.FinalLoss || res.Epochs != 3 {
				t.Fatalf("resumed: final loss %v after %d epochs; want %v after 3", res.FinalLoss, res.Epochs, full.FinalLoss)
			}
			want := modelWeights(t, trFull)
			for i, w := range modelWeights(t, tr) {
				for j := range w {
					if math.Float32bits(w[j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("param %d[%d] = %v resumed; want %v", i, j, w[j], want[i][j])
					}
				}
			}

			var plain optim.Optimizer
			switch o := opt.(type) {
			case optim.Adam:
				o.AMSGrad = false
				plain = o
			case optim.AdamW:
				o.AMSGrad = false
				plain = o
			}
			if _, err := New(context.Background(), smallMLP(t), openCPU(t), plain, Config{Seed: 5, Resume: first.Checkpoint}); !errors.Is(err, ErrMismatch) ||
				!strings.Contains(err.Error(), "amsgrad=true") {
				t.Errorf("resuming the AMSGrad checkpoint without AMSGrad: error %v; want ErrMismatch naming amsgrad=true", err)
			}
			plainCk := filepath.Join(t.TempDir(), "plain")
			fit(t, newFixture(t, 64), smallMLP(t), plain, Config{Seed: 5, Checkpoint: plainCk})
			if _, err := New(context.Background(), smallMLP(t), openCPU(t), opt, Config{Seed: 5, Resume: plainCk}); !errors.Is(err, ErrMismatch) {
				t.Errorf("resuming a checkpoint without AMSGrad with it: error %v; want ErrMismatch", err)
			}
		})
	}
}
