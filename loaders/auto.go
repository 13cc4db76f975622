package loaders

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/stoke-ml/stoke/pipeline"
)

// AutoWorkers as Config.Workers sizes the transform workers when the Loader opens, like tf.data's
// AUTOTUNE: a probe Loader with one worker per core runs a few batches (at most AutoProbeBatches,
// for at most AutoProbeTime), consuming them at once, and pipeline.SuggestWorkers turns the busy
// shares it measured into the count that keeps up with the Loader's serial stages, within the
// cores. It measures the loader alone, not your training step: profile a run with the step to see
// whether fewer workers would do (stoke profile --train, or the profile package).
const AutoWorkers = -1

// Bounds of the AutoWorkers probe: long enough for a few batches, short enough not to matter
// before a run.
const (
	AutoProbeBatches = 4
	AutoProbeTime    = 3 * time.Second
)

// Workers returns the number of transform workers, as Config.Workers set it or AutoWorkers chose.
func (l *Loader) Workers() int { return l.cfg.Workers }

// autoWorkers runs the AutoWorkers probe for a Loader configured as cfg, which open opens (over
// the same dataset or stream).
func autoWorkers(cfg Config, open func(Config) (*Loader, error)) (int, error) {
	cores := runtime.GOMAXPROCS(0)
	cfg.Workers, cfg.Stream, cfg.Tracer = cores, nil, nil
	ld, err := open(cfg)
	if err != nil {
		return 0, err
	}
	defer ld.Close()
	// The probe is bounded by AutoProbeTime, which is why it needs no caller context.
	ctx, cancel := context.WithTimeout(context.Background(), AutoProbeTime)
	defer cancel()
	n := 0
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return 0, fmt.Errorf("loaders: auto workers: %w", err)
		}
		b.Release()
		if n++; n == AutoProbeBatches {
			break
		}
	}
	st := ld.Stats()
	var busy float64
	other := 1 - st.StallFraction() // the probe's consumer is busy whenever it is not waiting
	if st.Elapsed <= 0 {
		other = 0
	}
	for _, s := range st.Stages {
		if s.Name == TransformStage {
			busy = s.BusyFraction()
		} else {
			other = max(other, s.BusyFraction())
		}
	}
	w, ok := pipeline.SuggestWorkers(cores, busy, other, cores)
	if !ok {
		return cores, nil
	}
	return w, nil
}
