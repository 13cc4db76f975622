package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/train"
)

// loopFlags are stoke train's flags for the training loop around the step: gradient accumulation
// and clipping, the EMA of the weights, early stopping and the best checkpoint (the plateau
// schedule is a --schedule: see plateauSchedule).
type loopFlags struct {
	accumulate int
	clip       float64
	ema        float64
	emaWarmup  bool
	earlyStop  int
	keepBest   string
}

func (l *loopFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&l.accumulate, "accumulate", 1, "accumulate the gradients of N batches per optimizer step (a step of N x --batch samples per rank; "+
		"steps and schedules count optimizer steps)")
	fs.Float64Var(&l.clip, "clip-grad-norm", 0, "clip the gradients' global L2 norm to X every step (torch.nn.utils.clip_grad_norm_; 0: none)")
	fs.Float64Var(&l.ema, "ema", 0, "keep an EMA of the weights with this decay (timm's ModelEmaV2, e.g. 0.9998; 0: none): evaluated beside the model, "+
		"its accuracy decides --schedule plateau, --early-stop and --keep-best, and predict and export use it, unless it scored below the model's at the last evaluation (unset: the model's recipe)")
	fs.BoolVar(&l.emaWarmup, "ema-warmup", false, "warm the EMA's decay up as timm's ModelEmaV3 use_warmup: min(DECAY, 1-s^(-2/3)) after optimizer step s "+
		"(unset: on when the run has fewer optimizer steps than the ~1/(1-DECAY) the EMA needs)")
	fs.IntVar(&l.earlyStop, "early-stop", 0, "stop after N epochs without a better evaluation accuracy than the best epoch's (0: never)")
	fs.StringVar(&l.keepBest, "keep-best", "", "write the checkpoint of the epoch with the best evaluation accuracy here")
}

// apply sets the flags in cfg; train.Config.Validate checks them (see usageError), but for
// --accumulate 0, which the flag refuses while Config reads it as 1.
func (l *loopFlags) apply(cfg *train.Config) error {
	if l.accumulate == 0 {
		return fmt.Errorf("%w: --accumulate 0; want >= 1", errUsage)
	}
	cfg.Accumulate, cfg.ClipGradNorm, cfg.EMA, cfg.EMAWarmup, cfg.EarlyStop, cfg.KeepBest = l.accumulate, l.clip, l.ema, l.emaWarmup, l.earlyStop, l.keepBest
	return nil
}

// emaDefault settles --ema-warmup for a run of steps optimizer steps in all. An EMA of decay D
// averages over ~1/(1-D) steps (timm's rule of thumb): on a shorter run it stays close to the
// initial weights. Unless --ema-warmup was given, such a run warms the decay up, and note says so;
// with --ema-warmup=false, warning says what the run will give. steps 0 is a run of unknown length
// (a stream whose length the loader learns at the end of each epoch): nothing is said.
func (l *loopFlags) emaDefault(fs *flag.FlagSet, steps int) (note, warning string) {
	need := 1 / (1 - l.ema)
	if l.ema == 0 || l.emaWarmup || steps == 0 || float64(steps) >= need {
		return "", ""
	}
	what := fmt.Sprintf("--ema %g averages over ~%.0f optimizer steps and the run takes %d", l.ema, need, steps)
	if flagSet(fs, "ema-warmup") {
		return "", what + ": with --ema-warmup=false the EMA stays close to the initial weights (predict and export serve the model's weights while the EMA scores below them)"
	}
	l.emaWarmup = true
	return what + ": warming its decay up (--ema-warmup; --ema-warmup=false keeps it constant)", ""
}

// configFlags names stoke train's flag of each train.Config field a flag sets (--schedule for
// the plateau's settings).
var configFlags = map[string]string{
	"Epochs": "epochs", "LabelSmoothing": "label-smoothing", "FreezeBackbone": "freeze", "FreezeUpTo": "freeze-upto",
	"BackboneLRScale": "backbone-lr-scale", "LayerDecay": "layer-decay", "Accumulate": "accumulate", "ClipGradNorm": "clip-grad-norm", "EMA": "ema",
	"EMAWarmup": "ema-warmup", "EarlyStop": "early-stop", "Plateau": "schedule", "KeepBest": "keep-best", "Checkpoint": "checkpoint",
	"CheckpointEvery": "checkpoint-every",
}

// validateConfig checks cfg with train.Config.Validate, the one owner of its rules, and words a
// refusal of a setting that a flag of fs made as a usage error naming the flag and its value.
func validateConfig(fs *flag.FlagSet, cfg train.Config) error {
	err := cfg.Validate()
	var fe *train.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	name, ok := configFlags[fe.Field]
	f := fs.Lookup(name)
	if !ok || f == nil {
		return err
	}
	if fe.With != "" {
		return fmt.Errorf("%w: --%s and --%s: %s", errUsage, name, configFlags[fe.With], fe.Want)
	}
	return fmt.Errorf("%w: --%s %s; want %s", errUsage, name, f.Value, fe.Want)
}

// plateauSchedule parses --schedule plateau[:KEY=VALUE,...], torch's ReduceLROnPlateau on the
// evaluation accuracy (mode max) with its defaults for the keys not given: factor 0.1, patience
// 10, threshold 1e-4 (relative), cooldown 0, min_lr 0.
func plateauSchedule(spec string) (*train.Plateau, error) {
	name, args, _ := strings.Cut(spec, ":")
	if name != "plateau" {
		return nil, fmt.Errorf("%w: --schedule %q; want constant, cosine, step or plateau[:factor=F,patience=N,threshold=T,cooldown=N,min_lr=X]", errUsage, spec)
	}
	p := train.ReduceLROnPlateau()
	for kv := range strings.SplitSeq(args, ",") {
		if kv == "" && args == "" {
			break
		}
		k, v, _ := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		n, nerr := strconv.Atoi(v)
		switch {
		case k == "factor" && err == nil:
			p.Factor = f
		case k == "threshold" && err == nil:
			p.Threshold = f
		case k == "min_lr" && err == nil:
			p.MinLR = f
		case k == "patience" && nerr == nil:
			p.Patience = n
		case k == "cooldown" && nerr == nil:
			p.Cooldown = n
		default:
			return nil, fmt.Errorf("%w: --schedule %q: %q; want factor=F, patience=N, threshold=T, cooldown=N or min_lr=X", errUsage, spec, kv)
		}
	}
	return &p, nil // validateConfig checks it
}

// lossNote is what an epoch's line adds to its training loss: the loss on the evaluated data
// (class ids only).
func lossNote(r train.EpochResult, evalName string) string {
	if r.TestLoss <= 0 {
		return ""
	}
	return fmt.Sprintf(", %s loss %.4f", evalName, r.TestLoss)
}

// scoreNote is what an epoch's line adds to its accuracy: the top-5 accuracy and the EMA's.
func scoreNote(r train.EpochResult) string {
	var b strings.Builder
	if r.TestTop5 > 0 {
		fmt.Fprintf(&b, " (top-5 %.2f%%)", 100*r.TestTop5)
	}
	if r.EMAAcc > 0 {
		fmt.Fprintf(&b, ", EMA %.2f%% (top-5 %.2f%%, loss %.4f)", 100*r.EMAAcc, 100*r.EMATop5, r.EMALoss)
	}
	return b.String()
}
