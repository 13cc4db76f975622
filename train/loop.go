package train

import (
	"context"
	"fmt"
	"maps"
	"math"
	"unsafe"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
)

// This file holds what a training loop does around the step: gradient accumulation, gradient
// clipping, the EMA of the weights, ReduceLROnPlateau, early stopping and the best checkpoint.

// Plateau is PyTorch's torch.optim.lr_scheduler.ReduceLROnPlateau with threshold_mode "rel", run
// on the validation metric after every epoch: an epoch is better when its metric beats the best
// so far by more than Threshold (relatively: metric > best*(1+Threshold) for a score that is
// better higher, metric < best*(1-Threshold) for an error); after more than Patience epochs that
// are not, the learning rate becomes max(lr*Factor, MinLR) (kept when that changes it by 1e-8 or
// less, torch's eps) and Cooldown epochs follow in which bad epochs are not counted. The mode is
// the metric's: "max" for accuracies and F1, "min" for a mean squared error. The rate it reduces
// is the optimizer's base rate, which Config.Schedule then scales per step; parameter groups
// (Config.BackboneLRScale) keep their ratio to it.
type Plateau struct {
	Factor    float64
	Patience  int
	Threshold float64
	Cooldown  int
	MinLR     float64
}

// ReduceLROnPlateau returns PyTorch's defaults: factor 0.1, patience 10, threshold 1e-4, cooldown
// 0, min_lr 0.
func ReduceLROnPlateau() Plateau { return Plateau{Factor: 0.1, Patience: 10, Threshold: 1e-4} }

// Validate checks the settings (torch refuses a factor of 1 or more; so does it here); it refuses
// with a *FieldError of Field "Plateau".
func (p Plateau) Validate() error {
	if !(p.Factor > 0 && p.Factor < 1) || p.Patience < 0 || !(p.Threshold >= 0) || math.IsInf(p.Threshold, 0) || p.Cooldown < 0 ||
		!(p.MinLR >= 0) || math.IsInf(p.MinLR, 0) {
		return &FieldError{Field: "Plateau", Value: fmt.Sprintf("%+v", p), Want: "0 < factor < 1, patience, cooldown, threshold and min_lr >= 0"}
	}
	return nil
}

// plateauState is ReduceLROnPlateau's state, checkpointed: the current base rate, the best metric
// (nil before the first epoch, torch's ±inf), the bad epochs and the cooldown left.
type plateauState struct {
	LR       float64  `json:"lr"`
	Best     *float64 `json:"best,omitempty"`
	Bad      int      `json:"bad"`
	Cooldown int      `json:"cooldown"`
}

// plateauEps is torch's eps: a reduction smaller than this is not made.
const plateauEps = 1e-8

// step is ReduceLROnPlateau.step(metric); higher says the metric is better higher (mode "max").
func (s *plateauState) step(p Plateau, metric float64, higher bool) {
	var better bool
	switch {
	case s.Best == nil:
		better = !math.IsNaN(metric) // metric < inf (or > -inf)
	case higher:
		better = metric > *s.Best*(1+p.Threshold)
	default:
		better = metric < *s.Best*(1-p.Threshold)
	}
	if better {
		s.Best, s.Bad = &metric, 0
	} else {
		s.Bad++
	}
	if s.Cooldown > 0 {
		s.Cooldown--
		s.Bad = 0
	}
	if s.Bad > p.Patience {
		if lr := max(s.LR*p.Factor, p.MinLR); s.LR-lr > plateauEps {
			s.LR = lr
		}
		s.Cooldown, s.Bad = p.Cooldown, 0
	}
}

// loopState is the state of the loop that a checkpoint holds beside the weights (as JSON, so that
// it can grow): the batches trained (BatchNorm's num_batches_tracked, which counts forward passes,
// not optimizer steps), whether the checkpoint holds an EMA of every tensor, ReduceLROnPlateau's
// state, the best epoch by the validation metric and its value, and the epoch early stopping
// stopped after.
type loopState struct {
	Batches int `json:"batches"`
	// Tracked is each BatchNorm's num_batches_tracked, by its tensors' prefix: the count its
	// weights came with (LoadWeights), plus the batches it trained in training mode; a frozen
	// BatchNorm, whose statistics stay, keeps its count. Checkpoints before it: Batches, each.
	Tracked   map[string]int64 `json:"num_batches_tracked,omitempty"`
	EMA       bool             `json:"ema,omitempty"`
	Plateau   *plateauState    `json:"plateau,omitempty"`
	BestEpoch int              `json:"best_epoch,omitempty"`
	Best      float64          `json:"best,omitempty"`
	Stopped   int              `json:"stopped_epoch,omitempty"`
	// EMABehind says that the EMA scored worse than the model at the last evaluation: the
	// weights to serve are the model's (UseEMA declines).
	EMABehind bool `json:"ema_behind,omitempty"`
	// Preprocess is the trainer's Preprocess in a checkpoint of version 3; since version 4 it is
	// the checkpoint's "pretrained_cfg" metadata, beside the weights (the trainer keeps its own).
	Preprocess *models.PretrainedCfg `json:"pretrained_cfg,omitempty"`
	// EpochBatches, in a checkpoint written within an epoch (Config.CheckpointEvery), is the
	// batches of the next epoch already trained (per rank), where a resumed run starts it.
	EpochBatches int `json:"epoch_batches,omitempty"`
}

// clone is a copy of st that shares nothing the loop changes in place.
func (st loopState) clone() loopState {
	st.Tracked = maps.Clone(st.Tracked)
	if st.Plateau != nil {
		p := *st.Plateau
		if p.Best != nil {
			b := *p.Best
			p.Best = &b
		}
		st.Plateau = &p
	}
	return st
}

// improves reports whether metric beats the best epoch's (any epoch beats none; NaN never does).
func (st *loopState) improves(metric float64, higher bool) bool {
	switch {
	case math.IsNaN(metric):
		return false
	case st.BestEpoch == 0:
		return true
	case higher:
		return metric > st.Best
	}
	return metric < st.Best
}

// needsMetric reports whether the loop decides on the validation metric, so that Fit needs data to
// evaluate.
func (cfg Config) needsMetric() bool {
	return cfg.Plateau != nil || cfg.EarlyStop > 0 || cfg.KeepBest != ""
}

// setupLoop allocates what the loop's settings need: the gradient accumulators and the step's
// loss sum (Accumulate), the norms' scratch (ClipGradNorm). The EMA's tensors come once the
// weights are loaded (see setup and Load).
func (t *Trainer) setupLoop() error {
	if t.opt == nil {
		return nil
	}
	w := &t.m.weights
	var err error
	if t.accumulate() > 1 {
		t.acc = make([]kernels.F32, len(t.m.params))
		for i, p := range t.m.params {
			if t.acc[i], err = w.f32(p.Len()); err != nil {
				return err
			}
		}
		if t.lossSum, err = w.f32(1); err != nil {
			return err
		}
	}
	if t.cfg.ClipGradNorm > 0 {
		longest, sums := 0, 0
		for _, p := range t.m.params {
			longest, sums = max(longest, p.Len()), sums+normParts(p.Len())
		}
		if t.sq, err = w.f32(longest); err != nil {
			return err
		}
		if t.norms, err = w.f32(sums); err != nil {
			return err
		}
	}
	return nil
}

// allocEMA allocates every tensor's EMA.
func (t *Trainer) allocEMA() error {
	all := t.m.tensors()
	t.ema = make([]kernels.F32, len(all))
	for i, p := range all {
		var err error
		if t.ema[i], err = t.m.weights.f32(p.Len()); err != nil {
			return err
		}
	}
	t.hasEMA = true
	return nil
}

// resetEMA sets the EMA to the current weights (timm's ModelEmaV2 starts as a copy of the model).
func (t *Trainer) resetEMA() error {
	for i, p := range t.m.tensors() {
		if err := t.ops.Copy(t.s, t.ema[i], p.W); err != nil {
			return err
		}
	}
	return nil
}

// accumulate is the number of batches per optimizer step.
func (t *Trainer) accumulate() int { return max(t.cfg.Accumulate, 1) }

// optSteps is the number of optimizer steps an epoch of batches takes (0 when unknown).
func (t *Trainer) optSteps(batches int) int { return (batches + t.accumulate() - 1) / t.accumulate() }

// foldGrad makes p's gradient the mean over the step's samples: on the device, G holds this
// batch's mean over its n samples and the accumulator the sum over the step's earlier batches, so
// G = (n*G + acc)/total.
func (t *Trainer) foldGrad(p *Param, n, total int) error {
	if p.buffer() || p.frozen {
		return nil
	}
	if err := t.ops.Scale(t.s, p.G, float32(n)/float32(total)); err != nil {
		return err
	}
	return t.ops.Axpy(t.s, p.G, 1/float32(total), t.acc[t.index[p]])
}

// normParts is the number of parts a tensor of n elements is summed in for its norm: equal runs,
// as many as divide n up to 256 (BiasGrad's channels, each a block of its own on CUDA).
func normParts(n int) int {
	a, b := n, 256
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// clipGrads scales the gradients so that their global L2 norm is at most Config.ClipGradNorm,
// as torch.nn.utils.clip_grad_norm_ (norm_type 2): the sums of squares of each tensor's parts on
// the device (Mul, then BiasGrad's sums), the total on the host in float64, and the same factor
// for all, min(1, max/(norm+1e-6)). Under Collective every rank holds the same gradients here, so every
// rank clips by the same factor.
func (t *Trainer) clipGrads(ctx context.Context) error {
	off := 0
	for _, p := range t.m.params {
		sq, parts := t.sq.Slice(0, p.Len()), normParts(p.Len())
		if err := t.ops.Mul(t.s, sq, p.G, p.G); err != nil {
			return err
		}
		if err := t.ops.BiasGrad(t.s, t.norms.Slice(off, off+parts), sq, 1, p.Len()/parts); err != nil {
			return err
		}
		off += parts
	}
	host := make([]float32, t.norms.Len)
	if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), t.norms.Buf, 4*t.norms.Off); err != nil {
		return err
	}
	if err := t.wait(ctx); err != nil {
		return err
	}
	var sum float64
	for _, v := range host {
		sum += float64(v)
	}
	t.gradNorm = math.Sqrt(sum)
	coef := t.cfg.ClipGradNorm / (t.gradNorm + 1e-6)
	if coef >= 1 { // torch clamps the factor at 1 (a NaN norm makes NaN gradients, there as here)
		return nil
	}
	for _, p := range t.m.params {
		if err := t.ops.Scale(t.s, p.G, float32(coef)); err != nil {
			return fmt.Errorf("train: clip %s: %w", p.Name, err)
		}
	}
	return nil
}

// emaDecay is the EMA's decay for the update after optimizer step `step` (from 1): Config.EMA,
// or with EMAWarmup timm's ModelEmaV3 warm-up (warmup_gamma 1, warmup_power 2/3, min_decay 0):
// min(EMA, 1 - (1+s)^(-2/3)) with s = step-1, so that the first update copies the weights.
func emaDecay(cfg Config, step int) float64 {
	if !cfg.EMAWarmup {
		return cfg.EMA
	}
	s := float64(step - 1)
	if s <= 0 {
		return 0
	}
	return max(min(1-math.Pow(1+s, -2.0/3), cfg.EMA), 0)
}

// updateEMA enqueues ema = decay*ema + (1-decay)*w for every tensor (parameters and BatchNorm's
// running statistics, as timm's ModelEmaV2 averages the whole state_dict; frozen parameters do
// not change and are left as they are).
func (t *Trainer) updateEMA(step int) error {
	d := emaDecay(t.cfg, step)
	for i, p := range t.m.tensors() {
		if p.frozen {
			continue
		}
		if err := t.ops.Scale(t.s, t.ema[i], float32(d)); err != nil {
			return err
		}
		if err := t.ops.Axpy(t.s, t.ema[i], float32(1-d), p.W); err != nil {
			return err
		}
	}
	return nil
}

// LastEpoch returns the record of the last epoch trained (by Fit, or before the checkpoint that
// Config.Resume loaded); false before any.
func (t *Trainer) LastEpoch() (EpochResult, bool) {
	if len(t.history) == 0 {
		return EpochResult{}, false
	}
	return t.history[len(t.history)-1], true
}

// emaBehind reports whether the EMA's score is worse than the model's (a NaN one is; a NaN model
// score never beats the EMA's).
func emaBehind(er EpochResult, higher bool) bool {
	if math.IsNaN(er.TestAcc) {
		return false
	}
	if higher {
		return !(er.EMAAcc >= er.TestAcc)
	}
	return !(er.EMAAcc <= er.TestAcc)
}

// swapEMA exchanges every tensor's weights and EMA views, so that the model runs with the EMA
// (a second call swaps back).
func (t *Trainer) swapEMA() {
	for i, p := range t.m.tensors() {
		p.W, t.ema[i] = t.ema[i], p.W
	}
	t.m.thaw()
}

// UseEMA replaces the model's weights and running statistics by their exponential moving average
// (Config.EMA's, or the one a checkpoint holds that Config.Resume loaded, with or without an
// optimizer), for Export and Predict to serve it, as timm's users deploy the EMA weights. It
// reports false, changing nothing, when the trainer has no EMA, or when the EMA scored worse than
// the model at the last evaluation (Fit's, or the checkpoint's: LastEpoch has both scores), as
// an EMA that has not caught up with the training does on a run too short for its decay. A ctx
// already done fails it, changing nothing; one that ends during its wait for the device gives
// true with ctx's error (the copy completes on the stream). A checkpoint keeps its EMA in its
// training state (PATH.train-ID): loaded without it, by a trainer without an optimizer, its EMA
// cannot be served, and UseEMA fails with an error wrapping ErrCheckpoint that says so.
func (t *Trainer) UseEMA(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("train: use EMA: %w", err)
	}
	if t.emaMissing != nil {
		return false, fmt.Errorf("train: use EMA: %w (or serve the trained weights)", t.emaMissing)
	}
	if !t.hasEMA || t.state.EMABehind {
		return false, nil
	}
	t.m.thaw()
	for i, p := range t.m.tensors() {
		if err := t.ops.Copy(t.s, p.W, t.ema[i]); err != nil {
			return false, fmt.Errorf("train: use EMA: %w", err)
		}
	}
	if err := t.wait(ctx); err != nil {
		return true, fmt.Errorf("train: use EMA: %w", err)
	}
	return true, nil
}
