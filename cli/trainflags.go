package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/hub"
	"github.com/stoke-ml/stoke/internal/progress"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

// trainFlags are stoke train's own flags, beside the loader's (loaderFlags), the evaluation's
// (evalFlags), the loop's (loopFlags) and the augmentation's (augmentFlags).
type trainFlags struct {
	model, optimizer, precision, schedule  string
	checkpoint, resume, init, freezeUpTo   string
	logDir                                 string
	epochs, classes, checkpointEvery       int
	maxSteps                               int
	lr, momentum, wd, smoothing, warmup    float64
	backboneLR, layerDecay                 float64
	allowNonFinite, freeze, syncBN, lrFind bool
	gradCheckpointing, amsgrad             bool
	lrFromRecipe                           bool // --lr was unset: the recipe's, scaled to the global batch once it is known
	lrThenTrain                            bool // --lr find: the range test's suggestion, found first
	sampleLogDir                           string
	recipe                                 models.Recipe
}

func (f *trainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "model", "mlp", "model: "+strings.Join(models.Names(), ", ")+"; each trains by default with its recipe (models.RecipeFor), "+
		"which --optimizer, --lr, --wd, --batch, --label-smoothing, --warmup-epochs, --augment, --mixup, --cutmix, --random-erasing and --ema override "+
		"(a learning rate given per batch scales with the global batch): "+recipes())
	fs.IntVar(&f.epochs, "epochs", 3, "total epochs (a resumed run continues up to this many)")
	fs.Var(lrValue{&f.lr, &f.lrThenTrain}, "lr", "peak learning rate (0: the model's recipe's, scaled to the global batch; find: what the "+
		"range test of --lr-find suggests, found first on the same data, then trained at)")
	fs.StringVar(&f.optimizer, "optimizer", "", "sgd (momentum 0.9, Nesterov), adam (torch's: --wd added to the gradient), adamw (decoupled --wd), "+
		"or rmsprop (momentum 0.9, alpha 0.9, eps 0.0316: torchvision's MobileNetV3 recipe) (unset: the model's recipe)")
	fs.BoolVar(&f.amsgrad, "amsgrad", false, "with --optimizer adam or adamw: torch's amsgrad=True, the step's denominator from the largest "+
		"second moment so far (a third state tensor per weight); a resumed run must give it as the run it continues did")
	fs.Float64Var(&f.momentum, "momentum", 0.9, "momentum of sgd and rmsprop")
	fs.Float64Var(&f.wd, "wd", 0,
		"weight decay (decoupled for adamw; never on biases, norms, position embeddings and class tokens; unset: the model's recipe)")
	fs.Float64Var(&f.smoothing, "label-smoothing", 0, "label smoothing in [0,1) (PyTorch's CrossEntropyLoss label_smoothing; unset: the model's recipe)")
	fs.StringVar(&f.precision, "precision", "fp32",
		"arithmetic of the GEMMs and convolutions: fp32, or bf16/fp16 operands with fp32 accumulation, fp32 weights and optimizer state (fp16 with dynamic loss "+
			"scaling); on --device cuda cuBLAS's mixed-precision GEMM, on --device cpu an emulation in fp32 arithmetic (a 16-bit run's numbers, not its speed)")
	fs.StringVar(&f.schedule, "schedule", "cosine", "learning-rate schedule: constant, cosine (with --warmup-epochs), step (x0.1 every epoch), "+
		"plateau[:factor=0.1,patience=10,threshold=1e-4,cooldown=0,min_lr=0] (torch's ReduceLROnPlateau on the evaluation accuracy)")
	fs.Float64Var(&f.warmup, "warmup-epochs", 0, "linear warm-up of the cosine schedule, in epochs (unset: the model's recipe)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "write a checkpoint here after each epoch")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "end the run after this many optimizer steps in all (Lightning's max_steps), inside an epoch "+
		"if need be, the schedule over them; --resume with more continues there")
	fs.BoolVar(&f.lrFind, "lr-find", false, "run the learning-rate range test (fastai's lr_find, Lightning's Tuner.lr_find): 100 steps "+
		"from lr 1e-7 to 10, print the smoothed loss and the suggested --lr, and exit without training")
	fs.IntVar(&f.checkpointEvery, "checkpoint-every", 0, "with --checkpoint: write it also every N optimizer steps within an epoch, "+
		"so that a run that dies loses at most N steps; --resume continues inside the epoch at the next batch (0: after each epoch only)")
	fs.StringVar(&f.resume, "resume", "", "continue from this checkpoint up to --epochs in total")
	fs.StringVar(&f.sampleLogDir, "sample-log-dir", "", "write the dataset index of every sample the training loader delivers to "+
		"DIR/rankR-of-W.restartN.log, a line each: EPOCH BATCH INDEX (to check, across ranks and torchrun's restarts, that an epoch trains each sample once; "+
		"with --lr find, the range test's batches come first)")
	fs.IntVar(&f.classes, "classes", 0, fmt.Sprintf("number of classes, up to %d, when the labels' range should not decide it (labels outside are bad samples); "+
		"without it a model takes at most %d", maxDeclaredClasses, maxClasses))
	fs.StringVar(&f.init, "init", "",
		"start from these "+weightsHelp+"; a classifier head of another class count is replaced and freshly initialized")
	fs.BoolVar(&f.allowNonFinite, "allow-nonfinite", false,
		"load --init weights and a --resume checkpoint even when they hold NaN or infinite values (refused by default, naming the file and the tensor)")
	fs.BoolVar(&f.freeze, "freeze", false,
		"freeze every layer but the classifier head: no gradient, no update, BatchNorm on its running statistics")
	fs.StringVar(&f.freezeUpTo, "freeze-upto", "",
		"freeze the layers from the first up to the last one whose tensors are named NAME.* (a resnet's conv1, layer1 ... layer4)")
	fs.Float64Var(&f.backboneLR, "backbone-lr-scale", 0,
		"multiply the learning rate of every layer but the head by this factor (0: the same rate)")
	fs.Float64Var(&f.layerDecay, "layer-decay", 0, "decay the learning rate block by block down from the head by this factor "+
		"(BEiT's and timm's layer_decay; vit; 0: none; unset with --init: the model's recipe)")
	fs.BoolVar(&f.syncBN, "sync-bn", false,
		"across ranks, normalize every BatchNorm with the global batch's statistics (torch.nn.SyncBatchNorm) instead of each rank's own (DDP's default)")
	fs.BoolVar(&f.gradCheckpointing, "grad-checkpointing", false, "recompute each block's activations in the backward pass instead of keeping "+
		"them (timm's --grad-checkpointing, torch.utils.checkpoint): one more forward pass of the blocks per step for the memory of all but one "+
		"block's activations, the same gradients bit for bit (the zoo's models; not with --sync-bn)")
	fs.StringVar(&f.logDir, "log-dir", "", "write the run's scalars (per step: loss, learning rate, samples/s; "+
		"per epoch: losses, accuracy, samples/s, data-wait fraction) here as TensorBoard event files and CSV")
}

// applyRecipe fills what the command line left unset from the model's recipe (models.RecipeFor):
// the optimizer, the batch, the weight decay, the label smoothing, the warm-up, the EMA, the layer
// decay of a fine-tune, and the augmentation of --augment recipe.
func (f *trainFlags) applyRecipe(fs *flag.FlagSet, lf *loaderFlags, loop *loopFlags) {
	f.recipe = models.RecipeFor(f.model)
	lf.model = f.model // its evaluation transform and normalization
	f.lrFromRecipe = f.lr == 0
	if f.optimizer == "" {
		f.optimizer = f.recipe.Optimizer
	}
	if lf.batch == 0 {
		lf.batch = f.recipe.Batch
	}
	for _, d := range []struct {
		flag   string
		v      *float64
		recipe float64
	}{{"wd", &f.wd, f.recipe.WeightDecay}, {"label-smoothing", &f.smoothing, f.recipe.LabelSmoothing}, {"warmup-epochs", &f.warmup, f.recipe.WarmupEpochs},
		{"ema", &loop.ema, f.recipe.EMA}} {
		if !flagSet(fs, d.flag) {
			*d.v = d.recipe
		}
	}
	if f.init != "" && !flagSet(fs, "layer-decay") {
		f.layerDecay = f.recipe.LayerDecay
	}
	if lf.augment.policy == "recipe" {
		lf.augment.useRecipe(fs, f.recipe)
	}
}

// check refuses values no run takes (usage errors); train.Config.Validate checks the rest.
func (f *trainFlags) check() error {
	switch {
	case f.epochs < 1:
		return fmt.Errorf("%w: --epochs %d; want >= 1", errUsage, f.epochs)
	case !(f.lr >= 0) || math.IsInf(f.lr, 0) || !(f.momentum >= 0 && f.momentum < 1) || !(f.wd >= 0) || math.IsInf(f.wd, 0):
		return fmt.Errorf("%w: --lr %v --momentum %v --wd %v; want finite, >= 0, momentum below 1", errUsage, f.lr, f.momentum, f.wd)
	case !(f.warmup >= 0) || f.warmup > float64(f.epochs):
		return fmt.Errorf("%w: --warmup-epochs %v; want 0 to --epochs", errUsage, f.warmup)
	case f.classes < 0 || f.classes > maxDeclaredClasses:
		return fmt.Errorf("%w: --classes %d; want 1 to %d", errUsage, f.classes, maxDeclaredClasses)
	case f.amsgrad && f.optimizer != "adam" && f.optimizer != "adamw":
		return fmt.Errorf("%w: --amsgrad is Adam's and AdamW's; the optimizer is %s (--optimizer adam or adamw)", errUsage, f.optimizer)
	case f.gradCheckpointing && f.syncBN:
		return fmt.Errorf("%w: --grad-checkpointing with --sync-bn: synchronized batch norms' all-reduces cannot be repeated in the backward pass", errUsage)
	case !slices.Contains(optim.Names, f.optimizer):
		return fmt.Errorf("%w: --optimizer %q; want %s", errUsage, f.optimizer, strings.Join(optim.Names, ", "))
	}
	return nil
}

// newOptimizer is the optimizer of the flags: optim.New's, with AMSGrad for --amsgrad
// (which check allows for adam and adamw alone).
func (f *trainFlags) newOptimizer() (optim.Optimizer, error) {
	opt, err := optim.New(f.optimizer, f.lr, f.momentum, f.wd)
	if err != nil || !f.amsgrad {
		return opt, err
	}
	switch o := opt.(type) {
	case optim.Adam:
		o.AMSGrad = true
		return o, nil
	case optim.AdamW:
		o.AMSGrad = true
		return o, nil
	}
	return nil, fmt.Errorf("%w: --amsgrad is Adam's and AdamW's; the optimizer is %s", errUsage, opt)
}

// config is the trainer's configuration the flags describe (the loop's flags applied by the
// caller), with the seed of the loader's flags.
func (f *trainFlags) config(seed uint64) (train.Config, error) {
	cfg := train.Config{
		Epochs: f.epochs, Schedule: optim.Constant(), Seed: seed, Checkpoint: f.checkpoint, CheckpointEvery: f.checkpointEvery, MaxSteps: f.maxSteps,
		LabelSmoothing: f.smoothing, Precision: train.Precision(f.precision),
		Init: f.init, AllowNonFinite: f.allowNonFinite, FreezeBackbone: f.freeze, FreezeUpTo: f.freezeUpTo, BackboneLRScale: f.backboneLR,
		LayerDecay: f.layerDecay, SyncBatchNorm: f.syncBN, GradCheckpointing: f.gradCheckpointing,
	}
	switch f.schedule {
	case "constant":
	case "cosine":
		cfg.Schedule = optim.Cosine(f.warmup)
	case "step":
		cfg.Schedule = optim.StepDecay(1, 0.1)
	default:
		var err error
		if cfg.Plateau, err = plateauSchedule(f.schedule); err != nil {
			return train.Config{}, err
		}
	}
	return cfg, nil
}

// fetchWeights is hub.Fetch with a bar on stderr, in MB, while a download of a megabyte or more
// runs.
func (e *env) fetchWeights(ctx context.Context, name string) (string, error) {
	var bar *progress.Bar
	var shown int64 // the MB the bar has
	p, err := hub.Fetch(ctx, name, func(done, total int64) {
		if bar == nil && total >= 1e6 { // a file of a known size from a megabyte up
			bar = progress.New(e.stderr, e.progressMode(), "downloading "+name, "MB", total/1e6)
		}
		if mb := done / 1e6; bar != nil && mb > shown {
			bar.Add(int(mb - shown))
			shown = mb
		}
	})
	if bar != nil {
		bar.Finish()
	}
	return p, err
}

// lrValue is --lr: a rate, or find.
type lrValue struct {
	lr   *float64
	find *bool
}

func (v lrValue) String() string {
	switch {
	case v.lr == nil:
		return "0"
	case *v.find:
		return "find"
	}
	return strconv.FormatFloat(*v.lr, 'g', -1, 64)
}

func (v lrValue) Set(s string) error {
	if *v.find = s == "find"; *v.find {
		*v.lr = 0
		return nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("want a rate or find")
	}
	*v.lr = x
	return nil
}

// checkWeightsName refuses a --weights or --init name that names no weights (hub.Check: a missing
// file, an unknown torchvision member, which it lists the model's of) before the flags that
// depend on it are checked; "" is none.
func checkWeightsName(name string) error {
	if name == "" {
		return nil
	}
	if err := hub.Check(name); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// weightsModel is the zoo model a weights name names (resnet50.IMAGENET1K_V2,
// convnext_atto.d2_in1k, hf-hub:timm/NAME.TAG: hub.Model), "" for none.
func weightsModel(name string) string {
	if m, ok := hub.Model(name); ok && slices.Contains(models.Names(), m) {
		return m
	}
	return ""
}

// weightsHelp says what --init and --weights take (package hub's names).
const weightsHelp = "weights: a safetensors or torch.save .pth file (stoke export's, torchvision's, timm's state_dict), an http(s):// URL, hf-hub:ORG/NAME[@REV] or timm's NAME.TAG (the Hugging Face hub, $HF_ENDPOINT) or torchvision's MODEL.WEIGHTS (resnet50.IMAGENET1K_V2, vit_b_16.IMAGENET1K_SWAG_E2E_V1, efficientnet_b1.DEFAULT: its ResNets, ResNeXts, Wide ResNets, ConvNeXts, EfficientNets, MobileNets, RegNets, Swins and ViTs), downloaded once into huggingface_hub's and torch.hub's caches"
