package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/train"
)

func runTrain(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC --model mlp|cnn|resnet8|resnet20|resnet18|resnet50 [--epochs N] [--batch B] [--lr X] [--seed S] [--workers W] [--device D] [--checkpoint PATH] [--resume PATH] [--json]", true)
	lf.register(fs, 128)
	lf.registerRanks(fs)
	model := fs.String("model", "mlp", "model: "+strings.Join(train.Models(), ", "))
	epochs := fs.Int("epochs", 3, "total epochs (a resumed run continues up to this many)")
	lr := fs.Float64("lr", 0, "peak learning rate (0: the model's recipe, 0.08 for mlp, 0.03 for cnn, 0.1 for resnets; see train.Recipe)")
	optName := fs.String("optimizer", "sgd", "sgd (momentum 0.9, Nesterov) or adamw")
	momentum := fs.Float64("momentum", 0.9, "SGD momentum")
	wd := fs.Float64("wd", 0, "weight decay (decoupled for adamw; never on biases and BatchNorm parameters); unset: the model's recipe, 0 for mlp and cnn, 5e-4 for resnets")
	smoothing := fs.Float64("label-smoothing", 0, "label smoothing in [0,1) (PyTorch's CrossEntropyLoss label_smoothing)")
	precision := fs.String("precision", "fp32", "arithmetic of the products: fp32, or bf16/fp16 (not on the CPU backend, which refuses them)")
	schedule := fs.String("schedule", "cosine", "learning-rate schedule: constant, cosine (with --warmup-epochs), step (x0.1 every epoch)")
	warmupEpochs := fs.Float64("warmup-epochs", 0.2, "linear warm-up of the cosine schedule, in epochs")
	checkpoint := fs.String("checkpoint", "", "write a checkpoint here after each epoch")
	resume := fs.String("resume", "", "continue from this checkpoint up to --epochs in total")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if lf.data == "" {
		lf.data = "mnist"
	}
	if err := lf.check(); err != nil {
		return err
	}
	if lf.worldSize > 1 {
		return fmt.Errorf("%w: world size %d: training across ranks needs the gradients all-reduced between them, which Stoke does not do yet; train in one process (world size 1), or measure each rank's loader with stoke bench or stoke profile", errUsage, lf.worldSize)
	}
	recipe, _ := train.Recipe(*model)
	if *lr == 0 {
		*lr = recipe.LR
	}
	if !flagSet(fs, "wd") {
		*wd = recipe.WeightDecay
	}
	var opt train.Optimizer
	switch *optName {
	case "sgd":
		opt = train.SGD{LR: *lr, Momentum: *momentum, Nesterov: *momentum > 0, WeightDecay: *wd}
	case "adamw":
		opt = train.AdamW{LR: *lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: *wd}
	default:
		return fmt.Errorf("%w: --optimizer %q; want sgd or adamw", errUsage, *optName)
	}
	var sched train.Schedule
	switch *schedule {
	case "constant":
		sched = train.Constant()
	case "cosine":
		sched = train.Cosine(*warmupEpochs)
	case "step":
		sched = train.StepDecay(1, 0.1)
	default:
		return fmt.Errorf("%w: --schedule %q; want constant, cosine or step", errUsage, *schedule)
	}

	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()

	// The loaders need the trainer's compute stream, and the model needs the loaders' output shape:
	// open the training split first to learn the shape, then build the trainer, then the loaders.
	probe, probeCloser, err := lf.open("train", true, dev, nil)
	if err != nil {
		return err
	}
	shape, classes := probe.Shape(), probe.Info().NumClasses
	probeCloser.Close()
	m, err := train.NewModel(*model, train.Shape{C: shape.C, H: shape.H, W: shape.W}, classes)
	if err != nil {
		return err
	}

	var bar *progress.Bar
	cfg := train.Config{
		Epochs: *epochs, Schedule: sched, Seed: lf.seed, Checkpoint: *checkpoint, Resume: *resume,
		LabelSmoothing: *smoothing, Precision: train.Precision(*precision),
		Progress: func(p *train.Progress) {
			if p.Done {
				if bar != nil {
					bar.Finish()
					bar = nil
				}
				r := p.Result
				e.printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s, waited for data %.1f%% of the time\n",
					r.Epoch, p.Epochs, r.TrainLoss, 100*r.TestAcc, r.SamplesPerS, 100*r.DataWaitFraction)
				return
			}
			if bar == nil {
				bar = progress.New(e.stderr, e.progressMode(), fmt.Sprintf("epoch %d/%d", p.Epoch, p.Epochs), "step", int64(p.Steps))
			}
			bar.SetSuffix(fmt.Sprintf("loss %.4f", p.Loss))
			bar.Add(1)
		},
	}
	tr, err := train.New(m, dev, opt, cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	trainL, trainCloser, err := lf.open("train", true, dev, tr.Stream())
	if err != nil {
		return err
	}
	defer trainCloser.Close()
	testL, testCloser, err := lf.open("test", false, dev, tr.Stream())
	if err != nil {
		return err
	}
	defer testCloser.Close()

	e.printf("training %s (%d parameters) on %s with %s, %d epochs, batch %d\n", m.Name(), m.NumParams(), dev.Info(), opt, *epochs, lf.batch)
	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	e.printf("test accuracy %.2f%% after %d epochs, final training loss %.6f, %.0f samples/s, %.1f s\n",
		100*res.TestAcc, res.Epochs, res.FinalLoss, res.SamplesPerS, res.Seconds)
	return e.emit(res)
}

// flagSet reports whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
