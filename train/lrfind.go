package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/kernels"
)

// LRFind is the learning-rate range test of Smith (2017), as fastai's lr_find and Lightning's
// Tuner.lr_find run it: Steps optimizer steps, the rate growing exponentially from Min to Max,
// the loss of each step smoothed by an exponential moving average (β 0.98, debiased), stopped
// early once the smoothed loss exceeds 4 times its lowest or is not finite. Zero fields take
// those defaults: Min 1e-7, Max 10, Steps 100.
type LRFind struct {
	Min, Max float64
	Steps    int
}

// LRFinding is what FindLR found: each step's rate and smoothed loss, and the suggestion.
type LRFinding struct {
	LRs, Losses []float64
	// Suggested is the rate at the steepest descent of the smoothed loss (Lightning's suggestion:
	// the first 10 steps and the last left out), but at most a tenth of the rate at its lowest
	// (fastai's lr_min): the smoothing lags the loss by tens of steps, and on a short range its
	// steepest descent comes late, near the rate where training breaks down.
	Suggested float64
	// Diverged says the test ended before Steps, its loss gone past 4 times its lowest or not
	// finite.
	Diverged bool
}

// FindLR runs the range test on the trainer's model with its optimizer and configuration as Fit
// would train them on data (the accumulation, the precision, the loss, the freezing), but at the
// range's rates, without evaluation, checkpoint or Progress; then it puts the trainer back as it
// was: the weights, running statistics and EMA it started from, no optimizer state, no step
// taken, so that Fit trains as if FindLR had not run. It runs on a trainer that has not trained
// (before Fit, not resumed), and needs the memory of a second copy of the weights for the while.
// Fewer than 15 steps, or a range that is not 0 < Min < Max, is an error wrapping ErrConfig.
func (t *Trainer) FindLR(ctx context.Context, data Data, lf LRFind) (*LRFinding, error) {
	if lf.Min == 0 && lf.Max == 0 {
		lf.Min, lf.Max = 1e-7, 10
	}
	if lf.Steps == 0 {
		lf.Steps = 100
	}
	switch {
	case !(lf.Min > 0 && lf.Max > lf.Min) || math.IsInf(lf.Max, 0) || lf.Steps < 15 || lf.Steps > 1<<20:
		return nil, fmt.Errorf("train: %w: LRFind %+v: want 0 < Min < Max and 15 to 1048576 steps", ErrConfig, lf)
	case t.opt == nil || !(t.opt.BaseLR() > 0):
		return nil, fmt.Errorf("train: %w: FindLR needs an optimizer with a positive rate", ErrConfig)
	case t.step != 0 || t.epochs != 0:
		return nil, fmt.Errorf("train: %w: FindLR runs before Fit, on a trainer that has not trained (this one is at step %d)", ErrConfig, t.step)
	case t.dist != nil:
		return nil, fmt.Errorf("train: %w: FindLR runs in one process (run it before launching the data-parallel job)", ErrConfig)
	}
	// The starting point: the weights and buffers, in memory of the test's own.
	snap := arena{dev: t.dev}
	defer snap.free()
	all := t.m.tensors()
	start := make([]kernels.F32, len(all))
	for i, p := range all {
		var err error
		if start[i], err = snap.f32(p.Len()); err != nil {
			return nil, fmt.Errorf("train: FindLR: %w", err)
		}
		if err := t.ops.Copy(t.s, start[i], p.W); err != nil {
			return nil, err
		}
	}
	f := &LRFinding{}
	parent := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var avg, best float64
	cfg, state, learned := t.cfg, t.state.clone(), t.learned
	base := t.opt.BaseLR()
	t.cfg.Epochs = max(t.cfg.Epochs, lf.Steps) // enough: the test stops after Steps steps
	t.cfg.Schedule = func(step, _, _ int) float64 {
		return lf.Min / base * math.Pow(lf.Max/lf.Min, float64(min(step, lf.Steps-1))/float64(lf.Steps-1))
	}
	// Nothing of the loop's own moves the rate or ends the test: no plateau, no early stop.
	t.cfg.Checkpoint, t.cfg.KeepBest, t.cfg.CheckpointEvery, t.cfg.EarlyStop, t.cfg.MaxSteps, t.cfg.Plateau = "", "", 0, 0, 0, nil
	t.state.Plateau = nil
	t.cfg.Progress = func(p *Progress) {
		if p.Done || len(f.LRs) >= lf.Steps {
			return
		}
		avg = 0.98*avg + 0.02*p.Loss
		smoothed := avg / (1 - math.Pow(0.98, float64(len(f.LRs)+1)))
		f.LRs, f.Losses = append(f.LRs, p.LR), append(f.Losses, smoothed)
		if len(f.LRs) == 1 || smoothed < best {
			best = smoothed
		}
		if math.IsNaN(smoothed) || smoothed > 4*best {
			f.Diverged = true
			stop()
		}
		if len(f.LRs) == lf.Steps {
			stop()
		}
	}
	_, err := t.Fit(ctx, data, nil)
	t.cfg = cfg
	// Whatever ended the test, the trainer is put back as it was.
	if rerr := t.restart(start, state, learned); rerr != nil {
		return nil, fmt.Errorf("train: FindLR: %w", rerr)
	}
	if werr := t.wait(parent); werr != nil && err == nil {
		err = werr
	}
	switch {
	case errors.Is(err, ErrDiverged): // a loss that is not finite: the end of the range
		f.Diverged = true
	case errors.Is(err, context.Canceled) && parent.Err() == nil && (f.Diverged || len(f.LRs) == lf.Steps):
		// stopped by the test itself
	case err != nil:
		return nil, err
	}
	if len(f.LRs) < 13 {
		return nil, fmt.Errorf("train: the range test diverged after %d steps, too few to suggest a rate: lower LRFind.Max", len(f.LRs))
	}
	lowest := 0
	for i, l := range f.Losses {
		if l < f.Losses[lowest] {
			lowest = i
		}
	}
	f.Suggested = min(f.LRs[steepest(f.Losses)], f.LRs[lowest]/10)
	return f, nil
}

// restart puts the trainer back at its start: the weights and buffers start held, the optimizer's
// state zero, the EMA the weights, no step, epoch or history, the loop's state and the learned
// epoch length those given.
func (t *Trainer) restart(start []kernels.F32, state loopState, learned int) error {
	t.m.thaw()
	for i, p := range t.m.tensors() {
		if err := t.ops.Copy(t.s, p.W, start[i]); err != nil {
			return err
		}
		for _, v := range t.OptimizerState(p) {
			if err := t.ops.Fill(t.s, v, 0); err != nil {
				return err
			}
		}
	}
	if t.hasEMA {
		if err := t.resetEMA(); err != nil {
			return err
		}
	}
	t.step, t.epochs, t.history, t.state, t.learned = 0, 0, nil, state, learned
	if t.scaler != nil {
		t.scaler = newLossScale()
	}
	return nil
}

// steepest is the index of the steepest descent of losses, the first 10 and the last left out:
// the least of their central differences (numpy.gradient's).
func steepest(losses []float64) int {
	lo, hi := 10, len(losses)-1 // [lo, hi)
	at, best := lo, math.Inf(1)
	for i := lo; i < hi; i++ {
		var g float64
		switch {
		case i == lo:
			g = losses[i+1] - losses[i]
		case i == hi-1:
			g = losses[i] - losses[i-1]
		default:
			g = (losses[i+1] - losses[i-1]) / 2
		}
		if g < best {
			at, best = i, g
		}
	}
	return at
}
