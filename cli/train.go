package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/weights"
)

func runTrain(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC --model mlp|cnn|resnet8|resnet20|resnet18|resnet50|ZOO_MODEL [--epochs N] [--batch B] [--lr X] [--seed S] [--workers W] [--device D] "+
		"[--val-data SPEC | --val-split F] [--test-data SPEC] [--checkpoint PATH] [--resume PATH] [--init W.safetensors [--freeze | --freeze-upto NAME] "+
		"[--backbone-lr-scale X]] [--accumulate N] [--clip-grad-norm X] [--ema DECAY] [--early-stop N] [--keep-best PATH] [--sync-bn] [--json]", true)
	lf.register(fs, 0)
	fs.Lookup("batch").Usage += " (0: the model's recipe)"
	lf.registerDist(fs)
	lf.registerDecode(fs, "train")
	var tf trainFlags
	tf.register(fs)
	var ef evalFlags
	ef.register(fs)
	lf.augment = &augmentFlags{}
	lf.augment.register(fs)
	var loop loopFlags
	loop.register(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if lf.data == "" {
		lf.data = "mnist"
	}
	tf.applyRecipe(fs, &lf, &loop)
	if err := lf.check(); err != nil {
		return err
	}
	if _, err := lf.augment.transforms(nil); err != nil {
		return err
	}
	mix, err := lf.augment.mix()
	if err != nil {
		return err
	}
	if err := tf.check(); err != nil {
		return err
	}
	if err := ef.check(); err != nil {
		return err
	}
	cfg, err := tf.config(lf.seed)
	if err != nil {
		return err
	}
	if err := loop.apply(&cfg); err != nil {
		return err
	}
	if err := validateConfig(fs, cfg); err != nil {
		return err
	}

	if tf.lrThenTrain && lf.worldSize > 1 {
		return fmt.Errorf("%w: --lr find runs the range test in one process: run stoke train --lr-find there first and give its suggestion as --lr", errUsage)
	}
	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()
	group, err := lf.group(ctx)
	if err != nil {
		return err
	}
	defer group.Close()
	if group.Rank() != 0 {
		e.quiet, e.json = true, false // rank 0 reports for every rank
	}
	if cfg.Init != "" { // every rank fetches (one downloads, the others wait for it); rank 0 shows it
		if cfg.Init, err = e.fetchWeights(ctx, cfg.Init); err != nil {
			return err
		}
		// Photos are transformed as the weights were made (timm's resolve_data_config of a
		// pretrained model): the name's resize, crop, interpolation and normalization.
		if lf.pre, _, err = weightsPreprocess(ctx, e, tf.init); err != nil {
			return err
		}
	}
	if err := weights.CheckFile(cfg.Init); err != nil { // an old pickle as --init: say how to convert it
		return err
	}
	if tf.sampleLogDir != "" {
		log, err := openSampleLog(tf.sampleLogDir, group.Rank(), group.Size(), lf.env.RestartCount)
		if err != nil {
			return err
		}
		defer log.Close()
		lf.sampleLog = log.write
	}
	if resumeAfterRestart(tf.resume, tf.checkpoint, lf.env.RestartCount) {
		// torchrun restarted the group (--max-restarts): continue from the last checkpoint.
		tf.resume = tf.checkpoint
		e.printf("restart %d: resuming from %s\n", lf.env.RestartCount, tf.checkpoint)
	}
	if tf.resume != "" {
		// On another number of ranks (an elastic restart, a requeue on other nodes): the same
		// global batch, each rank's changed.
		was, _, err := readRun(tf.resume)
		if err != nil {
			return err
		}
		batch, changed, err := resumeBatch(was, group.Size())
		if err != nil {
			return err
		}
		if tf.lrThenTrain { // the run being continued found its rate: it goes on at it
			if !(was.LR > 0) {
				return fmt.Errorf("%w: --lr find resuming %s: its run found no rate with --lr find; give --lr", errUsage, tf.resume)
			}
			tf.lr, tf.lrFromRecipe, tf.lrThenTrain = was.LR, false, false
			e.printf("resuming at lr %.3g, which --lr find found for the run\n", tf.lr)
		}
		if changed {
			e.printf("resuming on %d ranks a run of %d: batch %d per rank keeps its global batch of %d\n", group.Size(), was.WorldSize, batch, was.GlobalBatch)
			lf.batch = batch
		}
	}
	logs, err := openRunLog(tf.logDir, lf.batch*loop.accumulate, e.stderr)
	if err != nil {
		return err
	}
	defer logs.Close()
	record := tf.checkpoint
	if tf.lrFind { // a range test writes no checkpoint, nor its record
		record = ""
	}
	rec := runRecord{ValSplit: ef.valSplit, GlobalBatch: lf.batch * group.Size(), WorldSize: group.Size()}
	if !tf.lrFromRecipe && !tf.lrThenTrain && tf.resume != "" {
		if was, _, _ := readRun(tf.resume); was.LR == tf.lr {
			rec.LR = was.LR // still the rate --lr find found
		}
	}
	if err := checkRun(tf.resume, record, rec); err != nil {
		return err
	}
	if tf.lrFromRecipe {
		tf.lr = tf.recipe.ScaledLR(lf.batch * group.Size() * loop.accumulate)
	}
	opt, err := tf.newOptimizer() // the name was checked with the flags
	if err != nil {
		return err
	}
	onDevice, comm, err := deviceReducer(ctx, group, dev) // NCCL on CUDA devices
	if err != nil {
		return err
	}
	if comm != nil {
		defer comm.Close()
	}

	sets, err := openEvalSets(ctx, lf.opener, lf.data, ef, lf.seed, tf.classes)
	if err != nil {
		return err
	}
	defer sets.Close()
	nclasses := loaders.Describe(sets.train).NumClasses
	if nclasses > maxClasses && tf.classes == 0 {
		return fmt.Errorf("the labels of %s go up to %d, over the %d classes a model may have without --classes (one stray label would size the output layer); "+
			"declare the count with --classes N (up to %d): %w", lf.data, nclasses-1, maxClasses, maxDeclaredClasses, loaders.ErrLabel)
	}
	if err := agreeRun(ctx, group, fs, lf.device, map[string]loaders.Dataset{"training data": sets.train, "evaluation data": sets.eval, "test data": sets.test}); err != nil {
		return err
	}

	// The loaders need the trainer's compute stream, and the model needs the loaders' output shape:
	// open a loader first to learn the shape, then build the trainer, then the loaders.
	probe, err := lf.loader(sets.train, "train", true, dev, nil)
	if err != nil {
		return err
	}
	shape := probe.Shape()
	mean, std := probe.Normalization()
	note, emaWarning := loop.emaDefault(fs, tf.epochs*((probe.BatchesPerEpoch()+loop.accumulate-1)/loop.accumulate))
	probe.Close()
	cfg.EMAWarmup = loop.emaWarmup
	if note != "" {
		e.printf("%s\n", note)
	}
	if emaWarning != "" {
		fmt.Fprintf(e.stderr, "stoke train: warning: %s\n", emaWarning)
	}
	var (
		m             *train.Model
		tr            *train.Trainer
		trainL, evalL *loaders.Loader
	)
	closeAll := func() { // what build made
		if evalL != nil {
			evalL.Close()
		}
		if trainL != nil {
			trainL.Close()
		}
		if tr != nil {
			tr.Close()
		}
		tr, trainL, evalL = nil, nil, nil
	}
	defer closeAll()

	var bar *progress.Bar
	cfg.Resume, cfg.Collective, cfg.DeviceReduce = tf.resume, group, onDevice
	cfg.Progress = func(p *train.Progress) {
		logs.progress(p, sets.evalName)
		if p.Done {
			if bar != nil {
				bar.Finish()
				bar = nil
			}
			r := p.Result
			e.printf("epoch %d/%d: train loss %.4f%s, %s accuracy %.2f%%%s, %.0f samples/s, waited for data %.1f%% of the time\n",
				r.Epoch, p.Epochs, r.TrainLoss, lossNote(r, sets.evalName), sets.evalName, 100*r.TestAcc, scoreNote(r), r.SamplesPerS, 100*r.DataWaitFraction)
			return
		}
		if bar == nil {
			bar = progress.New(e.stderr, e.progressMode(), fmt.Sprintf("epoch %d/%d", p.Epoch, p.Epochs), "step", int64(p.Steps))
		}
		bar.SetSuffix(fmt.Sprintf("loss %.4f", p.Loss))
		bar.Add(1)
	}
	// build makes the model, its trainer with opt and their loaders: once, or twice with --lr
	// find (the range test on the first, the run on the second).
	build := func() error {
		if m, err = train.NewModel(tf.model, shape, nclasses); err != nil {
			return err
		}
		cfg.Preprocess = lf.preprocess(sets.train, shape, nclasses, mean, std)
		if tr, err = train.New(ctx, m, dev, opt, cfg); err != nil {
			return err
		}
		if trainL, err = lf.loader(sets.train, "train", true, dev, tr.Stream()); err != nil {
			return err
		}
		evalL, err = lf.loader(sets.eval, "test", false, dev, tr.Stream())
		return err
	}
	if err := build(); err != nil {
		return err
	}
	if tf.lrThenTrain {
		found, err := tr.FindLR(ctx, train.FromLoader(trainL), train.LRFind{})
		if err != nil {
			return fmt.Errorf("--lr find: %w", err)
		}
		e.printf("--lr find: the range test (%d steps from lr %.3g) suggests lr %.3g; training at it\n", len(found.LRs), found.LRs[0], found.Suggested)
		// The rate is the optimizer's, which the trainer holds: build them again at the suggestion.
		closeAll()
		tf.lr = found.Suggested
		if opt, err = tf.newOptimizer(); err != nil {
			return err
		}
		if err := build(); err != nil {
			return err
		}
		rec.LR = tf.lr // a resumed run, or a restarted one, goes on at it
		if err := checkRun("", record, rec); err != nil {
			return err
		}
	}
	if rep := tr.InitReport(); rep != nil {
		e.printf("initialized from %s: %d tensors loaded", tf.init, len(rep.Loaded))
		if len(rep.NewHead) > 0 {
			e.printf("; new head (%d classes): %s", nclasses, strings.Join(rep.NewHead, ", "))
		}
		if len(rep.Resampled) > 0 {
			e.printf("; resampled: %s", strings.Join(rep.Resampled, ", "))
		}
		e.printf("\n")
	}
	if n := m.NumParams() - trainable(m); n > 0 {
		e.printf("frozen: %d of %d parameters\n", n, m.NumParams())
	}

	batch := fmt.Sprintf("batch %d", lf.batch)
	if n := group.Size(); n > 1 {
		batch = fmt.Sprintf("batch %d per rank x %d ranks = %d", lf.batch, n, n*lf.batch)
	}
	e.printf("training %s (%d parameters) on %s with %s, label smoothing %g, %d epochs, %s, %s products%s\n", m.Name(), m.NumParams(), dev.Info(), opt,
		tf.smoothing, tf.epochs, batch, cfg.Precision, mixText(mix))
	e.printf("training data: %s, %d samples of %d classes, normalized with mean %v and std %v\n",
		loaders.Describe(sets.train).Name, sets.train.Len(), nclasses, mean, std)
	if sets.evalName == "train" {
		e.printf("evaluating on the training data (--eval-on-train): the accuracy below is not a test accuracy\n")
	} else {
		e.printf("evaluating each epoch on %s%s\n", sets.describe(false), sets.then())
	}
	if tf.lrFind {
		return lrFind(ctx, e, tr, train.FromLoader(trainL))
	}
	// Counted before the run, so that a model whose forward pass cannot be traced fails now.
	flopsPerSample, err := trainFLOPs(m)
	if err != nil {
		return err
	}
	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(evalL))
	if bar != nil {
		bar.Finish()
	}
	var final *finalTest
	servesEMA := false
	if err == nil && sets.test != nil {
		// The test scores the weights the run delivers: the EMA's when there is one that scored
		// at least the model's, as stoke predict and export use them (the --keep-best checkpoint
		// is stoke predict's to score).
		if servesEMA, err = tr.UseEMA(ctx); err == nil {
			final, err = evaluateTest(ctx, &lf, sets, dev, tr)
		}
		if err == nil {
			logs.finalTest(final.Accuracy)
		}
	}
	logs.Close()
	if err != nil {
		return err
	}
	e.printf("%s accuracy %.2f%% after %d epochs, final training loss %.6f, %.0f samples/s, %.1f s\n",
		sets.evalName, 100*res.TestAcc, res.Epochs, res.FinalLoss, res.SamplesPerS, res.Seconds)
	fl := runFLOPs(flopsPerSample, res.SamplesPerS, gpu.PeakFLOPS(dev), group.Size(), dev.Info().Backend == "cpu" || cfg.Precision == kernels.FP32)
	e.printf("%s\n", fl.text(group.Size()))
	if res.StoppedEarly {
		e.printf("stopped early after epoch %d: no better %s accuracy than epoch %d's in %d epochs\n", res.StoppedEpoch, sets.evalName, res.BestEpoch, loop.earlyStop)
	}
	if loop.keepBest != "" {
		whose := ""
		if b := res.BestEpoch - 1; cfg.EMA > 0 && b >= 0 && b < len(res.History) {
			if h := res.History[b]; res.BestMetric == h.EMAAcc {
				whose = ", the EMA's"
			} else {
				whose = fmt.Sprintf(", the model's: its EMA scored %.2f%%", 100*h.EMAAcc)
			}
		}
		e.printf("best checkpoint: epoch %d (%s accuracy %.2f%%%s) in %s\n", res.BestEpoch, sets.evalName, 100*res.BestMetric, whose, loop.keepBest)
	}
	if group.Size() > 1 {
		e.printf("gradient all-reduce: %.2f s on rank 0, %.2f s of it not hidden by the backward pass\n", res.AllReduceSeconds, res.ExposedAllReduceSeconds)
	}
	if final != nil {
		whose := ""
		if servesEMA {
			whose = ", the EMA's weights"
		} else if cfg.EMA > 0 {
			whose = ", the model's weights (its EMA scored lower)"
		}
		e.printf("test accuracy %.2f%% on %s, once after training%s\n", 100*final.Accuracy, sets.describe(true), whose)
	}
	ts, es := trainL.Stats(), evalL.Stats()
	skipped := ts.Skipped + es.Skipped + final.skipped()
	lf.reportSkipped(e, skipped, errors.Join(ts.LastSkipped, es.LastSkipped, final.lastSkipped()))
	return e.emit(trainResult{Result: res, Eval: sets.evalName, EvalData: sets.evalData, EvalSplit: sets.evalSplit, FinalTest: final, Precision: tf.precision,
		Batch: lf.batch, GlobalBatch: group.Size() * lf.batch, WorldSize: group.Size(), SyncBN: tf.syncBN, Skipped: skipped,
		Optimizer: tf.optimizer, LR: tf.lr, WeightDecay: tf.wd, LabelSmoothing: tf.smoothing, WarmupEpochs: tf.warmup, Augment: lf.augment.policy,
		MixUp: mix.MixUpAlpha, CutMix: mix.CutMixAlpha, RandomErasing: lf.augment.erasing, EMA: cfg.EMA, LayerDecay: cfg.LayerDecay,
		EMAWarmup: cfg.EMAWarmup, flopsJSON: fl, Warnings: append(warnings(emaWarning), logs.Warnings()...)})
}

// trainFLOPs is the FLOPs of training m on one sample: the multiply-adds of its forward pass
// (nn.Summarize's, stoke summary's macs) at 2 FLOPs each, 3 times over (the backward pass computes
// two products per forward one), as package models' benchmarks count them. It is the model's count,
// not the run's: it leaves out the forward passes --grad-checkpointing recomputes, and counts the
// weight gradients of frozen layers, which are not computed.
func trainFLOPs(m *train.Model) (int64, error) {
	in := m.Input()
	s, err := nn.Summarize(m.Module(), 1, in.C, in.H, in.W)
	if err != nil {
		return 0, fmt.Errorf("%s: counting its FLOPs: %w", m.Name(), err)
	}
	return 6 * s.MACs, nil
}

// flopsJSON is the model FLOPs utilization of a run in stoke train's --json line. FLOPsPerS is
// train_flops_per_sample x samples_per_s: over every rank, as samples_per_s is. PeakFLOPsPerS is
// the float32 peak of the run's devices (gpu.PeakFLOPS of rank 0's, times world_size) and MFU
// flops_per_s over it; both are omitted when the peak is unknown, and when the products run in 16
// bits on a device other than the CPU (whose emulation computes in float32): their peak there, a
// tensor core's, is not the float32 one.
type flopsJSON struct {
	TrainFLOPsPerSample int64    `json:"train_flops_per_sample"`
	FLOPsPerS           float64  `json:"flops_per_s"`
	PeakFLOPsPerS       float64  `json:"peak_flops_per_s,omitempty"`
	MFU                 *float64 `json:"mfu,omitempty"`
}

// runFLOPs is the flopsJSON of a run of perSample FLOPs a sample at samplesPerS over world ranks
// whose devices peak at peak each; atPeak says that the products run at that peak (in float32).
func runFLOPs(perSample int64, samplesPerS, peak float64, world int, atPeak bool) flopsJSON {
	f := flopsJSON{TrainFLOPsPerSample: perSample, FLOPsPerS: float64(perSample) * samplesPerS}
	if peak > 0 && atPeak {
		f.PeakFLOPsPerS = peak * float64(world)
		mfu := f.FLOPsPerS / f.PeakFLOPsPerS
		f.MFU = &mfu
	}
	return f
}

// text is the summary's line of f, for a run over world ranks.
func (f flopsJSON) text(world int) string {
	s := fmt.Sprintf("model FLOPs: %.3g GFLOP/s (%.3g MFLOP a training sample)", f.FLOPsPerS/1e9, float64(f.TrainFLOPsPerSample)/1e6)
	devices := "device's"
	if world > 1 {
		s += fmt.Sprintf(" over %d ranks", world)
		devices = "devices'"
	}
	if f.MFU == nil {
		return s + ", the " + devices + " peak unknown"
	}
	return s + fmt.Sprintf(", %.1f%% of the %s float32 peak of %.4g GFLOP/s (MFU)", 100**f.MFU, devices, f.PeakFLOPsPerS/1e9)
}

// resumeAfterRestart reports whether a run restarted by its launcher should continue from its
// checkpoint: torchrun counts restarts in TORCHELASTIC_RESTART_COUNT, and a restarted group that
// began again from scratch would redo every epoch the checkpoint holds.
func resumeAfterRestart(resume, checkpoint string, restarts int) bool {
	if resume != "" || checkpoint == "" || restarts == 0 {
		return false
	}
	_, err := os.Stat(checkpoint)
	return err == nil
}

// runRecord is what a run writes beside its checkpoint (PATH.split.json): the fraction of the
// training split it held out for validation (--val-split), so that a resumed run that holds out
// another part is refused (its validation samples would have been trained on); and its global
// batch and world size, so that a run resumed on another number of ranks keeps the global batch
// (see resumeBatch). A checkpoint without it, from an older stoke, is taken as it is.
type runRecord struct {
	ValSplit    float64 `json:"val_split"`
	GlobalBatch int     `json:"global_batch,omitempty"`
	WorldSize   int     `json:"world_size,omitempty"`
	// LR is the rate --lr find found, at which a resumed (or restarted) --lr find run goes on.
	LR float64 `json:"lr,omitempty"`
}

func splitPath(checkpoint string) string { return checkpoint + ".split.json" }

// readRun reads the record beside the checkpoint resume; ok is false when there is none.
func readRun(resume string) (rec runRecord, ok bool, err error) {
	b, err := os.ReadFile(splitPath(resume))
	if errors.Is(err, fs.ErrNotExist) {
		return runRecord{}, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return runRecord{}, false, fmt.Errorf("resume %s: %s: %w", resume, splitPath(resume), err)
	}
	return rec, true, nil
}

// resumeBatch is the per-rank batch of a run resumed on world ranks from a run recorded as was:
// the same global batch, so that each step takes the same samples as the run being continued
// (the ranks take strided parts of one order, DistributedSampler's), and a checkpoint written
// within an epoch continues with that epoch's next global batch. ok is false when the run is on
// as many ranks as was (or was is unknown): the flags decide.
func resumeBatch(was runRecord, world int) (batch int, ok bool, err error) {
	if was.WorldSize < 0 || was.GlobalBatch < 0 {
		return 0, false, fmt.Errorf("the checkpoint's run record says %d ranks and a global batch of %d: it is damaged", was.WorldSize, was.GlobalBatch)
	}
	if was.WorldSize == 0 || was.GlobalBatch == 0 || was.WorldSize == world {
		return 0, false, nil
	}
	if was.GlobalBatch%world != 0 {
		return 0, false, fmt.Errorf("%w: the checkpoint's run trained a global batch of %d on %d ranks, which does not divide over %d: "+
			"resume on a number of ranks that divides it", errUsage, was.GlobalBatch, was.WorldSize, world)
	}
	return was.GlobalBatch / world, true, nil
}

// checkRun refuses to resume a checkpoint whose run held out another --val-split, and records this
// run's beside its checkpoint.
func checkRun(resume, checkpoint string, run runRecord) error {
	if resume != "" {
		was, ok, err := readRun(resume)
		if err != nil {
			return err
		}
		if ok && was.ValSplit != run.ValSplit {
			return fmt.Errorf("%w: resume %s: the run held out --val-split %v; this one %v: "+
				"its validation samples would include trained ones (%w)", errUsage, resume, was.ValSplit, run.ValSplit, train.ErrMismatch)
		}
	}
	if checkpoint != "" {
		b, _ := json.Marshal(run)
		if err := atomicfile.WriteFile(splitPath(checkpoint), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("checkpoint %s: %w", checkpoint, err)
		}
	}
	return nil
}

// trainResult is the --json line of stoke train: train.Result, whose test_acc is measured after
// each epoch on the data eval names: "validation" (a val split, --val-data or --val-split), "test"
// (the test split, when there is no validation data) or "train" (--eval-on-train), which is
// eval_split (the training split for --val-split's held-out part) of eval_data; final_test is the
// test data's evaluation after training, when there is validation data and test data; and the
// precision of the products.
type trainResult struct {
	train.Result
	Eval      string     `json:"eval"`
	EvalData  string     `json:"eval_data"`
	EvalSplit string     `json:"eval_split"`
	FinalTest *finalTest `json:"final_test,omitempty"`
	Precision string     `json:"precision"`
	// Batch is the batch of each rank; GlobalBatch, of a step over all WorldSize ranks.
	Batch       int `json:"batch"`
	GlobalBatch int `json:"global_batch"`
	WorldSize   int `json:"world_size"`
	// SyncBN is --sync-bn: the BatchNorms normalized with the global batch's statistics (on one
	// rank, its own batch is the global one).
	SyncBN bool `json:"sync_bn"`
	// Skipped counts the bad samples left out under --on-error skip, training and evaluation.
	Skipped int64 `json:"skipped"`
	// The run's recipe: the model's (models.RecipeFor) where the flags left it; lr is the peak
	// rate, scaled to the global batch where the recipe's is given per batch.
	Optimizer      string  `json:"optimizer"`
	LR             float64 `json:"lr"`
	WeightDecay    float64 `json:"weight_decay"`
	LabelSmoothing float64 `json:"label_smoothing"`
	WarmupEpochs   float64 `json:"warmup_epochs"`
	Augment        string  `json:"augment"`
	MixUp          float64 `json:"mixup"`
	CutMix         float64 `json:"cutmix"`
	RandomErasing  float64 `json:"random_erasing"`
	EMA            float64 `json:"ema"`
	LayerDecay     float64 `json:"layer_decay"`
	flopsJSON
	// EMAWarmup says that the EMA's decay warmed up: --ema-warmup, or a run shorter than its
	// decay needs (see loopFlags.emaDefault).
	EMAWarmup bool `json:"ema_warmup,omitempty"`
	// Warnings are what went wrong without stopping the run (a --log-dir that failed, an EMA
	// too slow for the run); [] for none.
	Warnings []string `json:"warnings"`
}

// recipes describes every model's recipe, for --help: the models that share one, then it.
func recipes() string {
	var order []models.Recipe
	byRecipe := map[models.Recipe][]string{}
	for _, m := range models.Names() {
		r := models.RecipeFor(m)
		if byRecipe[r] == nil {
			order = append(order, r)
		}
		byRecipe[r] = append(byRecipe[r], m)
	}
	var out []string
	for _, r := range order {
		out = append(out, strings.Join(byRecipe[r], ", ")+": "+r.String())
	}
	return strings.Join(out, "; ")
}

// maxClasses bounds the classes a model gets from the labels' range without --classes, and
// maxDeclaredClasses the count --classes declares (Amazon-3M's 2.8 million labels fit).
const (
	maxClasses         = 100000
	maxDeclaredClasses = 10000000
)

// trainable counts the parameters the trainer updates.
func trainable(m *train.Model) int {
	n := 0
	for _, p := range m.Params() {
		n += p.Len()
	}
	return n
}

// warnings is a list of the non-empty ws, [] for none.
func warnings(ws ...string) []string {
	out := []string{}
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// flagSet reports whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type lrFindJSON struct {
	LRs         []float64 `json:"lrs"`
	Losses      []float64 `json:"losses"`
	SuggestedLR float64   `json:"suggested_lr"`
	Diverged    bool      `json:"diverged"`
}

// lrFind runs the range test (--lr-find) and prints its curve and suggestion instead of training.
func lrFind(ctx context.Context, e *env, tr *train.Trainer, data train.Data) error {
	f, err := tr.FindLR(ctx, data, train.LRFind{})
	if err != nil {
		return err
	}
	e.printf("learning-rate range test: %d steps from lr %.3g, smoothed loss every 10:\n", len(f.LRs), f.LRs[0])
	for i := 0; i < len(f.LRs); i += 10 {
		e.printf("  lr %-10.3g loss %.4f\n", f.LRs[i], f.Losses[i])
	}
	if f.Diverged {
		e.printf("the loss diverged at lr %.3g\n", f.LRs[len(f.LRs)-1])
	}
	e.printf("suggested lr: %.3g (the steepest descent of the smoothed loss, at most a tenth of the rate at its lowest): train with --lr %.3g\n",
		f.Suggested, f.Suggested)
	return e.emit(lrFindJSON{f.LRs, f.Losses, f.Suggested, f.Diverged})
}

// sampleLog is --sample-log-dir's file of this rank and attempt.
type sampleLog struct{ f *os.File }

func openSampleLog(dir string, rank, world, restart int) (*sampleLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--sample-log-dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("rank%d-of-%d.restart%d.log", rank, world, restart)))
	if err != nil {
		return nil, fmt.Errorf("--sample-log-dir: %w", err)
	}
	return &sampleLog{f}, nil
}

// write logs a batch's samples in one write, so that a process killed after it keeps them.
func (l *sampleLog) write(b *loaders.HostBatch) error {
	var line []byte
	for _, i := range b.Indices {
		line = fmt.Appendf(line, "%d %d %d\n", b.Epoch, b.Seq, i)
	}
	if _, err := l.f.Write(line); err != nil {
		return fmt.Errorf("--sample-log-dir: %w", err)
	}
	return nil
}

func (l *sampleLog) Close() error { return l.f.Close() }
