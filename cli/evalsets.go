package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/train"
)

// evalFlags are stoke train's flags that choose what it evaluates on.
type evalFlags struct {
	valData, testData    string  // --val-data, --test-data
	valSplit             float64 // --val-split
	evalOnTrain          bool    // --eval-on-train
	limitTrain, limitVal float64 // --limit-train, --limit-val: samples (>= 1) or a fraction (< 1); 0: all
}

func (f *evalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.valData, "val-data", "",
		"evaluate each epoch on this dataset (any --data spec; its val split, or all of it when it has one split) instead of --data's val split")
	fs.StringVar(&f.testData, "test-data", "",
		"the test data (any --data spec; its test split, or all of it when it has one split) instead of --data's test split: evaluated once after training "+
			"when there is validation data, else each epoch")
	fs.Float64Var(&f.valSplit, "val-split", 0,
		"hold out this seeded fraction of the training split (0 < F < 1, disjoint) and evaluate on it each epoch; not with --val-data or a val split in --data")
	fs.BoolVar(&f.evalOnTrain, "eval-on-train", false, "with no validation or test data, evaluate on the training data (the output says so)")
	fs.Float64Var(&f.limitTrain, "limit-train", 0, "train on N samples of the training data, or this fraction of it (0 < F < 1), "+
		"drawn once with --seed: the same every epoch and on --resume (0: all)")
	fs.Float64Var(&f.limitVal, "limit-val", 0, "evaluate each epoch on N samples of the evaluation data, or this fraction of it, "+
		"drawn with --seed (0: all); the test after training takes all of the test data")
}

// limit is ds limited by --limit-train or --limit-val's v (loaders.RandomSubset), or ds itself when
// v is 0 or asks for all of it.
func limit(ds loaders.Dataset, v float64, seed uint64) (loaders.Dataset, error) {
	if v == 0 || v >= float64(ds.Len()) {
		return ds, nil
	}
	n := int(v)
	if v < 1 {
		n = max(int(v*float64(ds.Len())+0.5), 1)
	}
	return loaders.RandomSubset(ds, min(n, ds.Len()), seed)
}

// check refuses a --val-split that is no fraction, or that comes with --eval-on-train.
func (f *evalFlags) check() error {
	switch {
	case f.valSplit != 0 && !(f.valSplit > 0 && f.valSplit < 1):
		return fmt.Errorf("%w: --val-split %v; want a fraction between 0 and 1", errUsage, f.valSplit)
	case f.valSplit != 0 && f.evalOnTrain:
		return fmt.Errorf("%w: --val-split and --eval-on-train: choose one", errUsage)
	}
	for name, v := range map[string]float64{"limit-train": f.limitTrain, "limit-val": f.limitVal} {
		if !(v >= 0) || math.IsInf(v, 0) || (v >= 1 && v != math.Trunc(v)) {
			return fmt.Errorf("%w: --%s %v; want a number of samples or a fraction between 0 and 1", errUsage, name, v)
		}
	}
	return nil
}

// evalSets are the datasets of a training run: what it trains on, what it evaluates on after each
// epoch, and the test data it evaluates once after training (nil: none).
type evalSets struct {
	train, eval, test loaders.Dataset
	// evalName says what eval is: "validation" (a val split, --val-data or --val-split), "test" or
	// "train" (--eval-on-train); the JSON's eval and the logs' tags.
	evalName string
	// evalData and evalSplit name the spec and the split eval reads (the training split for
	// --val-split's held-out part); testData and testSplit test's.
	evalData, evalSplit, testData, testSplit string
	closers                                  []loaders.Dataset
}

func (s *evalSets) Close() error {
	var errs []error
	for _, ds := range s.closers {
		errs = append(errs, closeDataset(ds))
	}
	return errors.Join(errs...)
}

// describe says in words what eval (or test) is.
func (s *evalSets) describe(test bool) string {
	if test {
		return fmt.Sprintf("%s's %s split", s.testData, s.testSplit)
	}
	if s.evalName == "validation" && s.evalSplit == "train" {
		return fmt.Sprintf("a held-out part of %s's train split (--val-split)", s.evalData)
	}
	return fmt.Sprintf("%s's %s split", s.evalData, s.evalSplit)
}

// then says what is evaluated after training, if anything.
func (s *evalSets) then() string {
	if s.test == nil {
		return ""
	}
	return ", then once after training on " + s.describe(true)
}

// openEvalSets opens the training split of spec and the data evaluated on: after each epoch the
// validation data (--val-data, else spec's val split, else a seeded part of the training split held
// out with --val-split), and once after training the test data (--test-data, else spec's test
// split); without validation data, the test data after each epoch instead, as PyTorch's
// references evaluate on their test split. Without either, evaluating on the training data needs
// --eval-on-train: a run never reports its training accuracy as a test accuracy. classes > 0
// declares the number of classes.
func openEvalSets(ctx context.Context, o datasets.Opener, spec string, f evalFlags, seed uint64, classes int) (*evalSets, error) {
	have, err := datasetSplits(ctx, o, spec)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(have, "train") {
		return nil, fmt.Errorf("%w: %s has no train split (its splits: %v); give the training data as --data", errUsage, spec, have)
	}
	s := &evalSets{}
	err = s.open(ctx, o, spec, have, f, seed)
	if err == nil && s.eval == nil {
		err = fmt.Errorf("%w: %s has no test split and no val split; give --val-data or --test-data, hold some training data out with --val-split 0.1, "+
			"or pass --eval-on-train to evaluate on the training data", errUsage, spec)
	}
	if err == nil {
		if s.train, err = limit(s.train, f.limitTrain, seed); err == nil {
			s.eval, err = limit(s.eval, f.limitVal, seed)
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if classes > 0 {
		s.train, s.eval = loaders.WithClasses(s.train, classes), loaders.WithClasses(s.eval, classes)
		if s.test != nil {
			s.test = loaders.WithClasses(s.test, classes)
		}
	}
	return s, nil
}

func (s *evalSets) open(ctx context.Context, o datasets.Opener, spec string, have []string, f evalFlags, seed uint64) error {
	opened := func(ds loaders.Dataset, err error) (loaders.Dataset, error) {
		if err == nil {
			s.closers = append(s.closers, ds)
		}
		return ds, err
	}
	var err error
	if s.train, err = opened(openDataset(ctx, o, spec, "train")); err != nil {
		return err
	}
	// The data of a role (val, test): the flag's spec when given, else spec's split of that name
	// when it has one (nil when neither).
	role := func(flag, data, want string) (loaders.Dataset, string, string, error) {
		switch {
		case data != "":
			ds, split, err := openSplitFor(ctx, o, flag, data, want)
			ds, err = opened(ds, err)
			return ds, data, split, err
		case slices.Contains(have, want):
			ds, err := opened(openDataset(ctx, o, spec, want))
			return ds, spec, want, err
		}
		return nil, "", "", nil
	}
	var val, test loaders.Dataset
	switch {
	case f.valSplit > 0 && (f.valData != "" || slices.Contains(have, "val")):
		what := "--val-data " + f.valData
		if f.valData == "" {
			what = spec + " has a val split"
		}
		return fmt.Errorf("%w: --val-split holds out part of the training data for validation, and %s: choose one (to hold out part of %s's train split "+
			"anyway, give that split's folder or shards as --data)", errUsage, what, spec)
	case f.valSplit > 0:
		tr, held, err := loaders.SplitValidation(s.train, f.valSplit, seed)
		if err != nil {
			return fmt.Errorf("%w: --val-split: %v", errUsage, err)
		}
		s.train, val, s.evalData, s.evalSplit = tr, held, spec, "train"
	default:
		if val, s.evalData, s.evalSplit, err = role("--val-data", f.valData, "val"); err != nil {
			return err
		}
	}
	if test, s.testData, s.testSplit, err = role("--test-data", f.testData, "test"); err != nil {
		return err
	}
	switch {
	case f.evalOnTrain && (val != nil || test != nil):
		found := s.testData + "'s " + s.testSplit + " split"
		if val != nil {
			found = s.evalData + "'s " + s.evalSplit + " split"
		}
		return fmt.Errorf("%w: --eval-on-train is for data without validation or test data, and there is %s to evaluate on: drop it", errUsage, found)
	case val != nil:
		s.eval, s.evalName, s.test = val, "validation", test
	case test != nil:
		s.eval, s.evalName, s.evalData, s.evalSplit = test, "test", s.testData, s.testSplit
	case f.evalOnTrain:
		s.eval, s.evalName, s.evalData, s.evalSplit = s.train, "train", spec, "train"
	}
	return nil
}

// finalTest is the evaluation of the test data once after training: final_test in the JSON.
type finalTest struct {
	Data     string  `json:"data"`
	Split    string  `json:"split"`
	Samples  int     `json:"samples"`
	Accuracy float64 `json:"accuracy"`
	stats    loaders.Stats
}

func (f *finalTest) skipped() int64 {
	if f == nil {
		return 0
	}
	return f.stats.Skipped
}

func (f *finalTest) lastSkipped() error {
	if f == nil {
		return nil
	}
	return f.stats.LastSkipped
}

// evaluateTest evaluates tr's model once on the test data of sets.
func evaluateTest(ctx context.Context, lf *loaderFlags, sets *evalSets, dev gpu.Device, tr *train.Trainer) (*finalTest, error) {
	ld, err := lf.loader(sets.test, "test", false, dev, tr.Stream())
	if err != nil {
		return nil, err
	}
	defer ld.Close()
	acc, err := tr.Evaluate(ctx, train.FromLoader(ld))
	if err != nil {
		return nil, fmt.Errorf("test data %s: %w", sets.describe(true), err)
	}
	return &finalTest{Data: sets.testData, Split: sets.testSplit, Samples: sets.test.Len(), Accuracy: acc, stats: ld.Stats()}, nil
}
