package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stoke-ml/stoke/tensorboard"
	"github.com/stoke-ml/stoke/train"
)

// runLog writes stoke train's scalars into --log-dir: a TensorBoard event file and scalars.csv
// with the same rows. A nil runLog (no --log-dir) does nothing.
//
// Per step, at the global step (epoch-1)*steps + step: train/loss, train/learning_rate (the
// rate the trainer applied: base x schedule x plateau) and train/samples_per_s (the step's samples over the time
// since the previous step; from an epoch's second step). Per epoch, at the epoch's last global
// step: epoch/train_loss, epoch/<eval>_accuracy (test, validation or train), epoch/samples_per_s
// and epoch/data_wait_fraction; for class ids also epoch/<eval>_loss (the mean cross-entropy, the
// validation loss), epoch/<eval>_top5 and epoch/<eval>_class_accuracy/<class id>; with --ema
// epoch/ema_<eval>_accuracy, epoch/ema_<eval>_top5 and epoch/ema_<eval>_loss. After training, at the last step: final/test_accuracy, when the
// test data is evaluated apart from the validation data.
//
// Logging is not the result: the first write that fails (a full disk) stops the log and becomes
// one warning, on stderr at once and in Warnings (stoke train --json's warnings); training goes
// on and its result is kept.
type runLog struct {
	dir    string
	sinks  []scalarSink
	warn   io.Writer // where the warning is written when it happens
	batch  int
	last   time.Time
	step   int // the global step being logged (the last one, after an epoch)
	failed bool
	closed bool
	// warnings says what went wrong with the log (at most one failure, and one at close).
	warnings []string
}

// scalarSink is one of --log-dir's files: *tensorboard.Writer and *tensorboard.CSV.
type scalarSink interface {
	Scalar(tag string, step int64, value float64, now time.Time) error
	Flush() error
	Close() error
}

var (
	_ scalarSink = (*tensorboard.Writer)(nil)
	_ scalarSink = (*tensorboard.CSV)(nil)
)

// createLogSinks creates the files of a --log-dir; the tests replace it with files that fail.
var createLogSinks = func(dir string, now time.Time) ([]scalarSink, error) {
	tb, err := tensorboard.Create(dir, now)
	if err != nil {
		return nil, err
	}
	csv, err := tensorboard.CreateCSV(dir, fmt.Sprintf("scalars.%d.csv", now.UnixNano()))
	if err != nil {
		tb.Close()
		return nil, err
	}
	return []scalarSink{tb, csv}, nil
}

// openRunLog creates the log files in dir; "" means no log. It fails before any training when
// dir is a file or cannot be written. batch is the samples of a step; warn takes the warning of
// a log that fails later.
func openRunLog(dir string, batch int, warn io.Writer) (*runLog, error) {
	if dir == "" {
		return nil, nil
	}
	sinks, err := createLogSinks(dir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("--log-dir %s: %w", dir, err)
	}
	return &runLog{dir: dir, sinks: sinks, batch: batch, warn: warn}, nil
}

// fail stops the log at its first error, with a warning.
func (l *runLog) fail(err error) {
	if err == nil || l.failed {
		return
	}
	l.failed = true
	l.warning(fmt.Sprintf("--log-dir %s: %v: logging stopped at global step %d; the run goes on", l.dir, err, l.step))
}

func (l *runLog) warning(w string) {
	l.warnings = append(l.warnings, w)
	fmt.Fprintf(l.warn, "stoke train: warning: %s\n", w)
}

func (l *runLog) scalar(tag string, step int, v float64, now time.Time) {
	for _, s := range l.sinks {
		if l.failed {
			return
		}
		l.fail(s.Scalar(tag, int64(step), v, now))
	}
}

// progress logs one of the trainer's reports; evalName names the accuracy's data.
func (l *runLog) progress(p *train.Progress, evalName string) {
	if l == nil || l.failed {
		return
	}
	now := time.Now()
	if p.Done {
		g, r := p.Epoch*p.Steps, p.Result
		l.step = g
		l.scalar("epoch/train_loss", g, r.TrainLoss, now)
		l.scalar("epoch/"+evalName+"_accuracy", g, r.TestAcc, now)
		l.scalar("epoch/samples_per_s", g, r.SamplesPerS, now)
		l.scalar("epoch/data_wait_fraction", g, r.DataWaitFraction, now)
		if r.TestLoss > 0 { // class ids: the loss, top-5 and per-class accuracy are measured
			l.scalar("epoch/"+evalName+"_loss", g, r.TestLoss, now)
			l.scalar("epoch/"+evalName+"_top5", g, r.TestTop5, now)
			for c, a := range r.ClassAcc {
				l.scalar(fmt.Sprintf("epoch/%s_class_accuracy/%d", evalName, c), g, a, now)
			}
		}
		if r.EMALoss > 0 { // an EMA is evaluated
			l.scalar("epoch/ema_"+evalName+"_accuracy", g, r.EMAAcc, now)
			l.scalar("epoch/ema_"+evalName+"_top5", g, r.EMATop5, now)
			l.scalar("epoch/ema_"+evalName+"_loss", g, r.EMALoss, now)
		}
		for _, s := range l.sinks {
			if !l.failed {
				l.fail(s.Flush())
			}
		}
		return
	}
	g := (p.Epoch-1)*p.Steps + p.Step
	l.step = g
	l.scalar("train/loss", g, p.Loss, now)
	l.scalar("train/learning_rate", g, p.LR, now)
	if p.Step > 1 {
		if dt := now.Sub(l.last).Seconds(); dt > 0 {
			l.scalar("train/samples_per_s", g, float64(l.batch)/dt, now)
		}
	}
	l.last = now
}

// finalTest logs the test data's accuracy after training.
func (l *runLog) finalTest(acc float64) {
	if l == nil || l.failed {
		return
	}
	l.scalar("final/test_accuracy", l.step, acc, time.Now())
}

// Close closes the files; a failure is a warning (unless the log had already failed).
func (l *runLog) Close() {
	if l == nil || l.closed {
		return
	}
	l.closed = true
	var errs []error
	for _, s := range l.sinks {
		errs = append(errs, s.Close())
	}
	if err := errors.Join(errs...); err != nil && !l.failed {
		l.failed = true
		l.warning(fmt.Sprintf("--log-dir %s: %v", l.dir, err))
	}
}

// Warnings are the log's warnings (none for no log).
func (l *runLog) Warnings() []string {
	if l == nil {
		return nil
	}
	return l.warnings
}
