package main

import (
	"errors"
	"fmt"
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
// and epoch/data_wait_fraction. After training, at the last step: final/test_accuracy, when the
// test data is evaluated apart from the validation data.
type runLog struct {
	tb     *tensorboard.Writer
	csv    *tensorboard.CSV
	batch  int
	last   time.Time
	step   int // the last global step logged
	err    error
	closed bool
}

// openRunLog creates the log files in dir; "" means no log. It fails before any training when
// dir is a file or cannot be written. batch is the samples of a step.
func openRunLog(dir string, batch int) (*runLog, error) {
	if dir == "" {
		return nil, nil
	}
	tb, err := tensorboard.Create(dir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("--log-dir %s: %w", dir, err)
	}
	csv, err := tensorboard.CreateCSV(dir, fmt.Sprintf("scalars.%d.csv", time.Now().UnixNano()))
	if err != nil {
		tb.Close()
		return nil, fmt.Errorf("--log-dir %s: %w", dir, err)
	}
	return &runLog{tb: tb, csv: csv, batch: batch}, nil
}

func (l *runLog) scalar(tag string, step int, v float64, now time.Time) {
	l.err = errors.Join(l.err, l.tb.Scalar(tag, int64(step), v, now), l.csv.Scalar(tag, int64(step), v, now))
}

// progress logs one of the trainer's reports; evalName names the accuracy's data.
func (l *runLog) progress(p *train.Progress, evalName string) {
	if l == nil || l.err != nil {
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
		l.err = errors.Join(l.err, l.tb.Flush(), l.csv.Flush())
		return
	}
	g := (p.Epoch-1)*p.Steps + p.Step
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
	if l == nil || l.err != nil {
		return
	}
	l.scalar("final/test_accuracy", l.step, acc, time.Now())
}

// Close closes the files and returns the first error of the log, if any.
func (l *runLog) Close() error {
	if l == nil || l.closed {
		return nil
	}
	l.closed = true
	err := errors.Join(l.err, l.tb.Close(), l.csv.Close())
	if err != nil {
		return fmt.Errorf("--log-dir: %w", err)
	}
	return nil
}
