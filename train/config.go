package train

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// FieldError is a Config setting that Validate refuses (it wraps ErrConfig): the Config field,
// its value and what the rule wants; a rule between two fields names the other in With.
type FieldError struct {
	Field string // the Config field: "Accumulate", "EMA", "Plateau", ...
	Value any
	With  string // the other field of a rule between two ("" for none)
	Want  string
}

func (e *FieldError) Error() string {
	if e.With != "" {
		return fmt.Sprintf("train: %v: %s %v with %s: %s", ErrConfig, e.Field, e.Value, e.With, e.Want)
	}
	return fmt.Sprintf("train: %v: %s %v; want %s", ErrConfig, e.Field, e.Value, e.Want)
}

func (e *FieldError) Unwrap() error { return ErrConfig }

// Validate checks the settings of c that need neither a model nor a device, as New does before
// it applies the defaults of the zero values (Epochs 0 means 1, Accumulate 0 means 1, ...): the
// epochs, the label smoothing, the gradient buckets, the fine-tuning's choice and learning-rate
// scale, the loop's settings (Accumulate, ClipGradNorm, EMA, EMAWarmup, EarlyStop, Plateau), and
// that KeepBest is not the Checkpoint file (the same path once absolute and clean, the same
// folder through symbolic links, or os.SameFile where both exist: every epoch's checkpoint would
// replace the best one).
// It refuses with a *FieldError and does not change c. What needs the model (FreezeUpTo's layer)
// or the device (Precision) New checks.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error { return &FieldError{Field: field, Value: v, Want: want} }
	switch {
	case c.Epochs < 0:
		return bad("Epochs", c.Epochs, ">= 1 (0 means 1)")
	case !(c.LabelSmoothing >= 0 && c.LabelSmoothing < 1):
		return bad("LabelSmoothing", c.LabelSmoothing, "[0,1)")
	case c.BucketBytes < 0:
		return bad("BucketBytes", c.BucketBytes, ">= 0 (0 means 25 MiB)")
	case c.FreezeBackbone && c.FreezeUpTo != "":
		return &FieldError{Field: "FreezeBackbone", Value: true, With: "FreezeUpTo", Want: "choose one"}
	case c.BackboneLRScale != 0 && !(c.BackboneLRScale > 0 && !math.IsInf(c.BackboneLRScale, 0)):
		return bad("BackboneLRScale", c.BackboneLRScale, "a finite factor > 0 (freeze the backbone for none)")
	case !(c.LayerDecay >= 0 && c.LayerDecay < 1):
		return bad("LayerDecay", c.LayerDecay, "a factor 0 < decay < 1 (0: none)")
	case c.Accumulate < 0:
		return bad("Accumulate", c.Accumulate, ">= 1")
	case !(c.ClipGradNorm >= 0) || math.IsInf(c.ClipGradNorm, 0):
		return bad("ClipGradNorm", c.ClipGradNorm, "a finite norm > 0 (0: none)")
	case !(c.EMA >= 0 && c.EMA < 1):
		return bad("EMA", c.EMA, "a decay 0 < decay < 1 (0: none)")
	case c.EMAWarmup && c.EMA == 0:
		return &FieldError{Field: "EMAWarmup", Value: true, With: "EMA", Want: "the warm-up needs an EMA decay"}
	case c.EarlyStop < 0:
		return bad("EarlyStop", c.EarlyStop, "a patience >= 1 (0: never)")
	case c.MaxSteps < 0:
		return bad("MaxSteps", c.MaxSteps, "a number of steps >= 1 (0: the epochs')")
	case c.CheckpointEvery < 0:
		return bad("CheckpointEvery", c.CheckpointEvery, "a number of steps >= 1 (0: after each epoch only)")
	case c.CheckpointEvery > 0 && c.Checkpoint == "":
		return &FieldError{Field: "CheckpointEvery", Value: c.CheckpointEvery, With: "Checkpoint", Want: "a checkpoint path to write to"}
	case c.KeepBest != "" && c.Checkpoint != "" && sameFile(c.KeepBest, c.Checkpoint):
		return &FieldError{Field: "KeepBest", Value: c.KeepBest, With: "Checkpoint",
			Want: "two files: the checkpoint written after every epoch would replace the best epoch's"}
	}
	if c.Plateau != nil {
		return c.Plateau.Validate()
	}
	return nil
}

// sameFile reports whether paths a and b name one file: os.SameFile when both exist (a hard or
// symbolic link to the other), otherwise the same absolute path with their folders' symbolic
// links resolved.
func sameFile(a, b string) bool {
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	return canonicalPath(a) == canonicalPath(b)
}

func canonicalPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}
