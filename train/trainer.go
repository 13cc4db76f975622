package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/bytesize"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/transforms"
	"github.com/stoke-ml/stoke/weights"
)

// ErrConfig: a Config or an argument the trainer cannot use.
var ErrConfig = errors.New("bad configuration")

// ErrDiverged: a training or validation loss (or score) that is not finite ended Fit.
var ErrDiverged = errors.New("diverged")

// Batch is one batch on the device, as a Data source hands it to the trainer.
type Batch struct {
	// Images are uint8 [N][C][H][W] pixels; Labels are int32 [N] in [0, classes), or, for data
	// with float targets (Targeted), Labels is empty and Targets holds float32 [N][classes].
	Images  kernels.U8
	Labels  kernels.I32
	Targets kernels.F32
	N       int
	Shape   Shape
	// Indices, if known, are the dataset indices of the N samples (Predict reports them).
	Indices []int
	// Mix, when Mixed, says that MixUp or CutMix mixed the images (loaders.Config.Mix): the
	// trainer then trains against the soft targets Lambda x each sample's label + (1 - Lambda) x
	// the label of the sample before it (see Trainer.mixedLoss). Only class ids mix, and only in
	// training: Evaluate and Predict refuse a mixed batch.
	Mix transforms.MixParams
	// Release, if not nil, is called once the trainer has enqueued all its work that reads the
	// batch on its stream (the source then recycles the buffers after that work has run).
	Release func()
}

// Seeker is Data that can start an epoch at a batch other than the first, where a checkpoint
// written within an epoch resumes (Config.CheckpointEvery). FromLoader's Data is one.
type Seeker interface {
	// BatchesFrom is Batches from batch from on: the batches Batches would yield after its first
	// from, without reading what comes before.
	BatchesFrom(ctx context.Context, epoch, from int) iter.Seq2[Batch, error]
}

// Data is a source of device batches: a loader (see FromLoader) or an in-memory set.
type Data interface {
	// Batches yields the batches of an epoch (from 0) in order; the trainer stops at the first
	// error.
	Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error]
	// Steps is the number of batches per epoch, or 0 when it is not known before the epoch ends
	// (a stream): the trainer then learns it from the first epoch it runs.
	Steps() int
	// Normalization is the per-channel mean and std (on the [0,1] scale) the trainer applies on
	// its stream to turn pixels into inputs; nil for none.
	Normalization() (mean, std []float32)
}

// Config is the trainer's configuration. Zero values are the defaults.
type Config struct {
	// Epochs is the total number of epochs Fit runs (counting those a resumed checkpoint already
	// holds); 0 means 1.
	Epochs int
	// Schedule scales the optimizer's rate per step; nil means Constant.
	Schedule optim.Schedule
	// Seed fixes the initial weights and the dropout masks.
	Seed uint64
	// Checkpoint, if set, is the path a checkpoint is written to after each epoch (atomically:
	// a temporary file renamed over it).
	Checkpoint string
	// CheckpointEvery, if positive, also writes Checkpoint every that many optimizer steps within
	// an epoch, so that a run that dies loses at most that many steps: Resume continues inside
	// the epoch at the next batch, with the data's order, dropout masks and augmentations of an
	// uninterrupted run, from data that can start an epoch at a batch (Seeker: FromLoader's).
	// The resumed epoch's training loss counts the batches after the checkpoint only.
	CheckpointEvery int
	// Resume, if set, is a checkpoint to start from: New loads its weights, optimizer state and
	// progress, and Fit continues with the epoch after the last one it holds (or inside the epoch
	// a CheckpointEvery checkpoint was written in).
	Resume string
	// LabelSmoothing, in [0,1), trains against the targets (1-LabelSmoothing)*onehot +
	// LabelSmoothing/classes instead of one-hot labels (PyTorch's CrossEntropyLoss
	// label_smoothing); the reported loss is against the smoothed targets.
	LabelSmoothing float64
	// Init, if set, is a safetensors file (Export's, or torchvision's state_dict saved with
	// safetensors) to start from: New loads it over the fresh weights with LoadWeights, strictly
	// but for the classifier head, which stays freshly initialized when the file's has another
	// shape (another number of classes: weights.Options.NewHead); InitReport says what it did. With
	// Resume, Init is not read: the checkpoint holds the weights trained from it.
	Init string
	// AllowNonFinite loads Init and Resume even when their weights hold NaN or infinite values,
	// which New otherwise refuses with an error wrapping ErrNonFinite that names the file and the
	// tensor (weights.Options.AllowNonFinite).
	AllowNonFinite bool
	// FreezeBackbone freezes every tensor but the head's (the model's last linear layer:
	// heads.head, fc, classifier.2); FreezeUpTo, if set, freezes the tensors in state_dict order
	// from the first up to the last of the module FreezeUpTo names: a prefix of tensor names that
	// ends before a dot ("layer3" in a resnet freezes conv1, bn1 and layer1 to layer3), or one
	// tensor, whose module's other tensors freeze with it ("layer1.0.bn1.weight" freezes its bias
	// too). A frozen tensor gets no gradient, no optimizer state and no update (the backward pass
	// does no work only frozen tensors need), and a BatchNorm frozen runs on its running
	// statistics, which it keeps (torchvision's FrozenBatchNorm2d). At most one of the two may be
	// set.
	FreezeBackbone bool
	FreezeUpTo     string
	// BackboneLRScale, if not 0, multiplies the learning rate of every layer but the head (a
	// parameter group of its own, as torch.optim's): 0.1 fine-tunes a pretrained backbone ten
	// times slower than the new head. It must be positive; freeze the backbone for none.
	BackboneLRScale float64
	// LayerDecay, if in (0,1), decays the learning rate layer by layer down from the head, as
	// BEiT's and timm's layer_decay for fine-tuning transformers: a tensor at depth d of a model of
	// n blocks trains at LayerDecay^(n+1-d) times the rate, where d is 0 for the embeddings before
	// the first block, i+1 for block i's tensors (through every stage of a Swin or ConvNeXt) and
	// n+1 for the head (the model's optim.Layered module says which, as timm's param_groups_layer_decay:
	// a ViT's final norm at n+1, a Swin's at n). It multiplies BackboneLRScale.
	LayerDecay float64
	// Loss is the training loss; the zero value picks it from the data's targets (Targeted):
	// softmax cross-entropy for class ids, BCEWithLogits for multi-hot, MSE for vectors.
	Loss Loss
	// Precision is the arithmetic of the model's products (kernels.ForPrecision), in training,
	// evaluation and prediction alike; "" means FP32. BF16 and FP16 round the operands of every
	// GEMM and convolution to 16 bits and accumulate in fp32; the weights, their gradients, the
	// optimizer state and every other op stay fp32. FP16 also scales the loss dynamically, as
	// PyTorch's GradScaler with its defaults (see lossScale).
	// On the CUDA backend the products run on cuBLAS's mixed-precision GEMM; the CPU backend
	// emulates the rounding in fp32 arithmetic (the numbers of a bf16/fp16 run, not its speed).
	// With Collective, BF16 also all-reduces the gradients as bf16 (DDP's bf16_compress_hook: rounded,
	// averaged, widened back into the fp32 gradients), half the bytes of fp32's; FP16 as fp16
	// (like DDP's fp16_compress_hook, but multiplied by 1/world in fp32 before the rounding, then
	// summed and widened back), and
	// a sum that overflows fp16 is a non-finite gradient, which loss scaling skips.
	Precision Precision
	// Progress, if set, is called on Fit's goroutine after every training step and after every
	// epoch's evaluation. It must not keep the *Progress.
	Progress func(*Progress)
	// Collective, if set, trains data-parallel over its ranks as PyTorch's DistributedDataParallel
	// does: each rank (one process, one device) runs a Trainer with the same configuration over
	// its own part of every epoch (a Loader with the group's Rank and WorldSize) in batches of the
	// same size, so the global batch is Size() times the rank's. Fit checks that the ranks agree
	// on everything that changes the weights (the model, the optimizer and its rates, every
	// Config field but Checkpoint, KeepBest, Resume, Progress and Collective, the schedule's
	// factor at every step, the Init file's SHA-256, steps per epoch, the data), refusing on every
	// rank with an error that names the setting and both values; then it broadcasts rank 0's
	// weights, averages the gradients of every step over the ranks in buckets that overlap the
	// backward pass, reports the loss and the accuracy over all ranks' samples (an evaluation is
	// split between the ranks, each sample counted once), and writes Checkpoint from rank 0 only.
	// BatchNorm normalizes with each rank's own batch statistics (DDP's default; SyncBatchNorm
	// for the global batch's); rank 0's running statistics are the ones evaluated and saved. Every
	// rank ends each step with the same weights, bit for bit.
	Collective Collective
	// SyncBatchNorm, with Collective, makes every BatchNorm in training normalize with the statistics
	// of the global batch, as torch.nn.SyncBatchNorm: the mean and biased variance over all ranks'
	// samples of the step (the counts summed too, so unequal batches weigh right), the running
	// variance from the unbiased variance over the global count, and a backward pass whose input
	// gradient is the global batch's (the per-channel sums of dy and dy*xhat summed over the
	// ranks). It costs two small all-reduces per BatchNorm and step, which the forward and
	// backward passes wait for. The running statistics are then the same on every rank.
	// Evaluation, and a run without Collective, are plain BatchNorm.
	SyncBatchNorm bool
	// GradCheckpointing runs every block of a zoo model (models.SetGradCheckpointing) under
	// nn.Checkpoint, as timm's set_grad_checkpointing: the backward pass computes each block's
	// activations again, one more forward pass of the blocks per step for the memory of all but
	// one block's activations, with the same gradients bit for bit. A model without blocks is
	// refused, and so is SyncBatchNorm across ranks, whose collective calls cannot be repeated in
	// the backward pass.
	GradCheckpointing bool
	// BucketBytes is the size of the gradient buckets a data-parallel step all-reduces as the
	// backward pass produces them (a bucket closes at the first layer boundary past it); 0 means
	// 25 MiB, DDP's bucket_cap_mb.
	BucketBytes int
	// DeviceReduce, if set with Collective, all-reduces the gradients in device memory on the compute
	// stream (NCCL on the CUDA backend) instead of through the host and Collective; Collective still
	// broadcasts the weights, checks the ranks agree and sums the evaluation.
	DeviceReduce DeviceReducer

	// Accumulate, if above 1, accumulates the gradients of that many consecutive batches before
	// each optimizer step (a PyTorch loop that calls optimizer.step() every Accumulate backward
	// passes): the step's gradient is the mean over all its samples, each batch weighted by its
	// size, so Accumulate batches of B train as one batch of Accumulate*B within float32 rounding,
	// BatchNorm aside: it normalizes each batch with that batch's statistics and moves its running
	// statistics once per batch, as in PyTorch. An epoch's last step takes the batches left over.
	// Steps, schedules, Progress and checkpoints count optimizer steps. Under Collective the gradients
	// are all-reduced once per step, during the last batch's backward pass (DDP's no_sync for the
	// others).
	Accumulate int
	// ClipGradNorm, if positive, scales every step's gradients so that their global L2 norm (over
	// all trainable parameters) is at most ClipGradNorm, as torch.nn.utils.clip_grad_norm_: by
	// min(1, ClipGradNorm/(norm+1e-6)). It runs on the all-reduced gradients under Collective (every
	// rank clips by the same factor) and after fp16's unscaling, as GradScaler's users do.
	ClipGradNorm float64
	// EMA, if in (0,1), keeps an exponential moving average of the weights and BatchNorm running
	// statistics as timm's ModelEmaV2 does: it starts as a copy of the initial weights (Init's, if
	// set) and after every optimizer step (one that fp16 loss scaling skipped included, as timm's
	// loop does) becomes EMA*ema + (1-EMA)*w. Every evaluation of Fit scores the model and its EMA
	// (EpochResult.TestAcc and EMAAcc); the EMA's score is the validation metric (Plateau,
	// EarlyStop, KeepBest, as timm selects by it) when it is at least the model's, else the
	// model's is; checkpoints hold the EMA, and UseEMA puts it in the model's place for Export
	// and Predict unless it scored worse than the model at the last evaluation (an EMA whose
	// decay needs more steps, ~1/(1-EMA), than the run has taken serves an average of barely
	// trained weights). EMAWarmup uses timm's ModelEmaV3 warm-up instead
	// of the constant decay (use_warmup with warmup_gamma 1, warmup_power 2/3): the decay after
	// step s is min(EMA, 1-s^(-2/3)), 0 after the first step (a copy of the weights).
	EMA       float64
	EMAWarmup bool
	// Plateau, if set, reduces the learning rate when the validation metric stops improving, as
	// torch's ReduceLROnPlateau stepped after each epoch's evaluation (see Plateau); Schedule
	// still scales each step's rate (Constant, for torch's plain use).
	Plateau *Plateau
	// EarlyStop, if positive, ends Fit after that many consecutive epochs without a better
	// validation metric than the best epoch's (the patience of Lightning's and Keras's
	// EarlyStopping, min_delta 0): Fit returns normally, with Result.StoppedEarly and StoppedEpoch.
	EarlyStop int
	// MaxSteps, if positive, ends Fit once the model has taken that many optimizer steps in all
	// (resumed ones included; Lightning's max_steps), inside an epoch if need be, and the schedule
	// runs over min(MaxSteps, Epochs' steps). A stop inside an epoch evaluates the model and
	// records that part as an epoch of its own (Result.Epochs does not count it), and its
	// checkpoint records the place: a run resumed with more steps continues the epoch at its next
	// batch.
	MaxSteps int
	// KeepBest, if set, is the path the checkpoint of the best epoch by the validation metric is
	// written to (atomically, from rank 0 under Collective), as timm's CheckpointSaver keeps its best.
	// It must be another file than Checkpoint (Validate).
	KeepBest string
	// Preprocess, if set, is what the checkpoints record of the data (Preprocess): the evaluation
	// transform that makes an image the model's input, and the class names. New checks that it
	// fits the model, and Resume that its class names are the checkpoint's (ErrMismatch). A
	// trainer without one has that of the checkpoint it last loaded (none, for one written
	// before checkpoints recorded it).
	Preprocess *models.Preprocess
}

// Precision names the arithmetic of GEMMs and convolutions: kernels.Precision.
type Precision = kernels.Precision

// The precisions: fp32 throughout; or bf16 or fp16 inputs to the products with fp32 accumulation,
// fp32 master weights and optimizer state (fp16 with dynamic loss scaling).
const (
	FP32 = kernels.FP32
	BF16 = kernels.BF16
	FP16 = kernels.FP16
)

// lossScale is fp16 training's dynamic loss scale, PyTorch's GradScaler with its defaults: the
// gradient of the loss is multiplied by scale (initially 2^16) before the backward pass, so that
// small gradients survive fp16's range (below 6e-8 they round to 0), and the parameter gradients
// are divided by it before the update. A step whose gradients hold an Inf or NaN (a product
// operand past fp16's 65504) is skipped, its update not made, and the scale halved; after
// interval (2000) consecutive finite steps the scale doubles. It restarts at 2^16 when training
// resumes from a checkpoint.
type lossScale struct {
	scale float64
	// good counts the finite steps since the scale last changed; skipped all skipped steps.
	good, skipped int
	interval      int
}

// Loss scaling's constants, PyTorch's GradScaler defaults.
const (
	lossScaleInit     = 1 << 16
	lossScaleGrowth   = 2
	lossScaleBackoff  = 0.5
	lossScaleInterval = 2000
)

func newLossScale() *lossScale { return &lossScale{scale: lossScaleInit, interval: lossScaleInterval} }

// update records whether a step's gradients were all finite and reports whether to apply it.
func (l *lossScale) update(finite bool) bool {
	if !finite {
		l.scale *= lossScaleBackoff
		l.good = 0
		l.skipped++
		return false
	}
	if l.good++; l.good >= l.interval {
		l.scale *= lossScaleGrowth
		l.good = 0
	}
	return true
}

// Progress reports where Fit is.
type Progress struct {
	// Epoch counts from 1 to Epochs; Step from 1 to Steps within the epoch (0 in an epoch report).
	Epoch, Epochs int
	Step, Steps   int
	// Loss is the mean training loss of the step (of the epoch so far, in an epoch report).
	Loss float64
	// LR is the learning rate of the step (base rate, Schedule and Plateau applied; the last
	// step's in an epoch report).
	LR float64
	// Done is set on the epoch report, with Result filled in.
	Done   bool
	Result EpochResult
}

// EpochResult is the record of one epoch.
type EpochResult struct {
	Epoch            int     `json:"epoch"`
	TrainLoss        float64 `json:"train_loss"`
	TestAcc          float64 `json:"test_acc"`
	Seconds          float64 `json:"seconds"`
	SamplesPerS      float64 `json:"samples_per_s"`
	DataWaitFraction float64 `json:"data_wait_fraction"`
	// TestTop5 is the fraction of the test samples whose label is among the model's 5 largest
	// logits (timm's top-min(5, classes)), ClassAcc the accuracy per class (EvaluateClasses);
	// class ids only.
	TestTop5 float64   `json:"test_top5,omitempty"`
	ClassAcc []float64 `json:"class_acc,omitempty"`
	// EMAAcc and EMATop5 are the scores of the EMA of the weights (Config.EMA), evaluated as
	// the model is.
	EMAAcc  float64 `json:"ema_acc,omitempty"`
	EMATop5 float64 `json:"ema_top5,omitempty"`
	// TestLoss and EMALoss are the mean cross-entropy of the model's and the EMA's logits on the
	// test data (Evaluation.Loss: the validation loss, without label smoothing); class ids only.
	TestLoss float64 `json:"test_loss,omitempty"`
	EMALoss  float64 `json:"ema_loss,omitempty"`
	// LR is the learning rate of the epoch's last step.
	LR float64 `json:"lr"`
	// Partial says that the epoch stopped at Config.MaxSteps before its last batch: it is
	// evaluated, but steps neither ReduceLROnPlateau nor early stopping's patience, which count
	// whole epochs; a run resumed with more steps finishes it.
	Partial bool `json:"partial,omitempty"`
}

// Result is what Fit returns.
type Result struct {
	// TestAcc is the accuracy on the test data after the last epoch.
	TestAcc float64 `json:"test_acc"`
	// FinalLoss is the mean per-sample training loss of the last epoch.
	FinalLoss float64 `json:"final_loss"`
	// SamplesPerS is training samples over training time (evaluation excluded) of the epochs this
	// Fit ran.
	SamplesPerS float64 `json:"samples_per_s"`
	// Seconds is the wall time of this Fit, evaluation included.
	Seconds float64 `json:"seconds"`
	// Epochs is the number of epochs the model has been trained for (resumed ones included), and
	// Steps the optimizer steps.
	Epochs int `json:"epochs"`
	Steps  int `json:"steps"`
	// DataWaitFraction is the fraction of training time spent waiting for the next batch.
	DataWaitFraction float64 `json:"data_wait_fraction"`
	// History has one record per epoch, resumed ones included.
	History []EpochResult `json:"history"`
	// AllReduceSeconds is, in a data-parallel run, the time this rank's gradient all-reduces have
	// taken since New; ExposedAllReduceSeconds the part that the backward pass did not hide (the
	// steps waited for it after their backward pass had run).
	AllReduceSeconds        float64 `json:"allreduce_seconds,omitempty"`
	ExposedAllReduceSeconds float64 `json:"allreduce_exposed_seconds,omitempty"`
	// TestTop5, ClassAcc, EMAAcc and EMATop5 are the last epoch's (see EpochResult).
	TestTop5 float64   `json:"test_top5,omitempty"`
	ClassAcc []float64 `json:"class_acc,omitempty"`
	EMAAcc   float64   `json:"ema_acc,omitempty"`
	EMATop5  float64   `json:"ema_top5,omitempty"`
	// TestLoss and EMALoss are the last epoch's validation losses (see EpochResult).
	TestLoss float64 `json:"test_loss,omitempty"`
	EMALoss  float64 `json:"ema_loss,omitempty"`
	// BestEpoch is the epoch with the best validation metric (with Config.EMA, the EMA's score
	// when it is at least the model's),
	// BestMetric its value: what Config.KeepBest holds. 0 without evaluation data.
	BestEpoch  int     `json:"best_epoch,omitempty"`
	BestMetric float64 `json:"best_metric,omitempty"`
	// StoppedEarly says that Config.EarlyStop ended the run, after epoch StoppedEpoch.
	StoppedEarly bool `json:"stopped_early"`
	StoppedEpoch int  `json:"stopped_epoch,omitempty"`
}

// Trainer trains one model on one device. It is not safe for concurrent use.
//
// Its compute stream (Stream) runs every kernel; give it to the loader so that the loader's copies
// are ordered before the kernels that read them.
type Trainer struct {
	m    *Model
	dev  gpu.Device
	ops  kernels.Ops
	s    gpu.Stream
	opt  optim.Optimizer
	cfg  Config
	seed uint64

	// fp16 only: the loss scale and the device count of non-finite gradient elements.
	scaler    *lossScale
	nonFinite kernels.I32

	epochs     int // completed epochs
	step       int // completed steps over all epochs
	learned    int // batches of an epoch of unknown length, counted by the first such epoch (0 before)
	history    []EpochResult
	initReport *weights.Report
	pre        *models.Preprocess // Config.Preprocess, or the loaded checkpoint's
	// The loss Fit resolved from Config.Loss and the data's targets, and its pos_weight.
	loss      Loss
	targets   TargetKind
	posWeight kernels.F32

	dist *ddp // data-parallel state; nil in a single process

	// The optimizer's state of each trained parameter, and a parameter's index in Model.params,
	// which indexes optim and acc.
	optState *optim.State // nil without an optimizer
	index    map[*Param]int

	// The loop's state (checkpointed) and buffers: each trained parameter's gradients of the
	// step's earlier batches and the step's loss sum over its batches (Accumulate), each tensor's
	// EMA (indexed as Model.tensors), the squares' scratch and the per-tensor sums of squares
	// (ClipGradNorm), and whether every tensor has an EMA (Config.EMA, or a checkpoint's).
	state     loopState
	acc       []kernels.F32
	ema       []kernels.F32
	lossSum   kernels.F32
	sq, norms kernels.F32
	gradNorm  float64 // the last step's gradient norm, before clipping
	hasEMA    bool
	// emaMissing says why a checkpoint's EMA was not loaded: its training state was not beside it.
	emaMissing error
	lr         float64 // the last step's learning rate
	higher     bool    // the validation metric is better higher (an accuracy, not an MSE)

	host [4]byte // loss and count read-back
}

// New prepares m on dev for training with opt: it opens a compute stream, allocates and
// initializes the parameters from cfg.Seed, and loads cfg.Init or cfg.Resume if set, waiting for
// the device under ctx. Close releases it all.
//
// A nil opt makes a trainer that only evaluates, predicts and exports: cfg.Resume then loads a
// checkpoint's weights and running statistics whatever its optimizer, and Fit and Save refuse.
func New(ctx context.Context, m *Model, dev gpu.Device, opt optim.Optimizer, cfg Config) (*Trainer, error) {
	if m == nil || dev == nil {
		return nil, fmt.Errorf("train: %w: nil model or device", ErrConfig)
	}
	if opt != nil && !(opt.BaseLR() > 0) {
		return nil, fmt.Errorf("train: %w: optimizer %v; want a learning rate > 0", ErrConfig, opt)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Preprocess != nil {
		if err := cfg.Preprocess.Check(m.in, m.classes); err != nil {
			return nil, fmt.Errorf("train: %w: %w", ErrConfig, err)
		}
	}
	if cfg.GradCheckpointing {
		if cfg.SyncBatchNorm && cfg.Collective != nil {
			return nil, fmt.Errorf("train: %w: gradient checkpointing with synchronized batch norms: their all-reduces cannot be repeated in the backward pass", ErrConfig)
		}
		if _, err := models.SetGradCheckpointing(m.module, true); err != nil {
			return nil, fmt.Errorf("train: %w: %s: %w", ErrConfig, m.name, err)
		}
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 1
	}
	if cfg.Schedule == nil {
		cfg.Schedule = optim.Constant()
	}
	if cfg.Precision == "" {
		cfg.Precision = FP32
	}
	ops, err := kernels.ForPrecision(dev, cfg.Precision)
	if errors.Is(err, kernels.ErrArgument) { // an unknown precision
		return nil, fmt.Errorf("train: %w: %w", ErrConfig, err)
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	s, err := dev.NewStream()
	if err != nil {
		return nil, fmt.Errorf("train: compute stream: %w", err)
	}
	t := &Trainer{m: m, dev: dev, ops: ops, s: s, opt: opt, cfg: cfg, seed: cfg.Seed, pre: cfg.Preprocess.Clone()}
	if cfg.Plateau != nil && opt != nil {
		t.state.Plateau = &plateauState{LR: opt.BaseLR()}
	}
	if cfg.Precision == FP16 && opt != nil {
		t.scaler = newLossScale()
	}
	if err := t.setup(ctx); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if cfg.Collective != nil && cfg.Collective.Size() > 1 {
		t.dist = newDDP(cfg.Collective, m, cfg.BucketBytes)
		t.dist.dev = cfg.DeviceReduce
		if cfg.Precision == BF16 || cfg.Precision == FP16 {
			if err := t.dist.halfPrecision(m, cfg.Precision); err != nil {
				return nil, errors.Join(err, t.Close())
			}
		}
		if cfg.SyncBatchNorm {
			m.syncBatchNorms(cfg.Collective.Size())
		}
	}
	return t, nil
}

func (t *Trainer) setup(ctx context.Context) error {
	var lrScale map[*Param]float64
	if t.m.ops == nil { // a model another trainer holds is refused by bind
		var err error
		if lrScale, err = t.m.freeze(t.cfg); err != nil {
			return err
		}
	}
	if err := t.checkMemory(); err != nil {
		return err
	}
	if err := t.m.bind(t.dev, t.ops, t.s, t.cfg.Seed); err != nil {
		return err
	}
	t.index = make(map[*Param]int, len(t.m.params))
	for i, p := range t.m.params {
		t.index[p] = i
	}
	t.state.Tracked = t.m.batchNormCounts(0)
	if t.scaler != nil {
		var err error
		if t.nonFinite, err = t.m.weights.i32(1); err != nil {
			return err
		}
	}
	if err := t.setupOptim(lrScale); err != nil {
		return err
	}
	if err := t.setupLoop(); err != nil {
		return err
	}
	if t.cfg.Init != "" && t.cfg.Resume == "" {
		var err error
		if t.initReport, err = t.LoadWeights(ctx, t.cfg.Init, weights.Options{NewHead: true, AllowNonFinite: t.cfg.AllowNonFinite}); err != nil {
			return err
		}
	}
	if t.cfg.Resume != "" {
		if err := t.Load(ctx, t.cfg.Resume); err != nil {
			return err
		}
	}
	if t.cfg.EMA > 0 && !t.hasEMA && t.opt != nil { // the EMA starts from the weights (Init's, or a checkpoint's without one)
		if err := t.allocEMA(); err != nil {
			return err
		}
		if err := t.resetEMA(); err != nil {
			return err
		}
	}
	for _, path := range []string{t.cfg.Checkpoint, t.cfg.KeepBest} {
		// A checkpoint that cannot be written fails now, not after the first epoch. Only the rank
		// that writes it looks: a rank starting late would remove rank 0's temporary file while
		// rank 0 saves into it.
		if path == "" || (t.cfg.Collective != nil && t.cfg.Collective.Rank() != 0) {
			continue
		}
		if err := prepareCheckpoint(path); err != nil {
			return err
		}
	}
	return t.wait(ctx)
}

// checkMemory refuses, before anything is allocated, a model whose tensors and what training keeps
// beside them cannot fit in the device's memory whatever the batch: the weights and buffers, a
// gradient, the optimizer's slots and an accumulator per trained value, and the EMA. The sizes
// of a model are checked argument by argument when it is built; only their product says whether
// it fits (a ViT of width 32768, a head of ten million classes). Activations, which grow with
// the batch, are the device's to refuse as they are allocated (gpu.ErrOutOfMemory).
func (t *Trainer) checkMemory() error {
	mem := t.dev.Info().Memory
	if mem <= 0 {
		return nil
	}
	var values, trained int64
	for _, p := range t.m.tensors() {
		n := int64(prod(p.Shape))
		values += n
		if !p.buffer() && !p.frozen {
			trained += n
		}
	}
	perTrained, beside := int64(1), "a gradient"
	if t.opt != nil {
		perTrained += int64(t.opt.Slots())
		beside += fmt.Sprintf(", %d optimizer slot(s)", t.opt.Slots())
		if t.cfg.Accumulate > 1 {
			perTrained++
			beside += ", an accumulator"
		}
	}
	total := values + trained*perTrained
	if t.cfg.EMA > 0 && t.opt != nil {
		total += values
		beside += " and the EMA"
	}
	if need := 4 * total; need > mem {
		return fmt.Errorf("train: model %s: %d values (%s) with %s per trained value need %s, over the %s of %s: "+
			"choose a smaller model (its width, depth or classes): %w", t.m.name, values, bytesize.Format(4*values), beside,
			bytesize.Format(need), bytesize.Format(mem), t.dev.Info().Name, gpu.ErrOutOfMemory)
	}
	return nil
}

// setupOptim makes the optimizer's state over the trained parameters (Model.params), its slots
// in the model's weights arena, each parameter with its learning-rate factor (lrScale's; 1 for
// the others).
func (t *Trainer) setupOptim(lrScale map[*Param]float64) error {
	if t.opt == nil {
		return nil
	}
	params, scale := make([]optim.Param, len(t.m.params)), make([]float64, len(t.m.params))
	for i, p := range t.m.params {
		params[i] = optim.Param{Name: p.Name, W: p.W, G: p.G, Decay: p.Decayed()}
		scale[i] = cmp.Or(lrScale[p], 1)
	}
	var err error
	t.optState, err = optim.NewState(t.opt, t.ops, t.s, params, scale, t.m.weights.f32)
	return err
}

// OptimizerState returns the optimizer's state tensors of p (Optimizer.Slots of them: SGD's
// momentum, Adam's and AdamW's moments (and AMSGrad's maximum), RMSprop's mean square and buffers),
// as torch's optimizer.state[p]: none for a tensor that does not train (a frozen one, running
// statistics), one of another model, or without an optimizer. They live on the trainer's device
// until Close; read them after the stream's work (Stream).
func (t *Trainer) OptimizerState(p *Param) []kernels.F32 {
	if i, ok := t.index[p]; ok && t.optState != nil {
		return t.optState.Slots(i)
	}
	return nil
}

// wait waits for the trainer's stream, or until ctx ends. A ctx already done fails it even when the
// stream has nothing left to run, so that a cancelled call fails whatever the device's timing.
func (t *Trainer) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.s.Synchronize(ctx)
}

// Stream is the trainer's compute stream.
func (t *Trainer) Stream() gpu.Stream { return t.s }

// Device is the device the trainer runs on.
func (t *Trainer) Device() gpu.Device { return t.dev }

// Model is the model being trained.
func (t *Trainer) Model() *Model { return t.m }

// Preprocess is what the trainer's checkpoints record of the data (Config.Preprocess, or the
// loaded checkpoint's), or nil when nothing said it (a checkpoint written before stoke recorded
// it). The value is a copy.
func (t *Trainer) Preprocess() *models.Preprocess { return t.pre.Clone() }

// Epochs is the number of completed epochs (resumed ones included).
func (t *Trainer) Epochs() int { return t.epochs }

// Close waits for the stream, frees the model's device memory and closes the stream. It takes no
// context (it is an io.Closer): its wait for the device has no deadline, as it must not free memory
// that queued work still uses.
func (t *Trainer) Close() error {
	err := t.s.Synchronize(context.Background())
	t.optState, t.index, t.acc, t.ema, t.hasEMA = nil, nil, nil, nil, false
	return errors.Join(err, t.m.free(), t.s.Close())
}

// Fit trains from the epoch after the last completed one up to Config.Epochs, evaluating on test
// after each epoch (test may be nil, unless Plateau, EarlyStop or KeepBest need its metric) and
// writing Config.Checkpoint after each. It returns the results so far with the first error;
// cancelling ctx stops it at its next wait for the device, the data or the other ranks (a ctx
// already done, before it starts; see the package's Cancellation). Early stopping
// (Config.EarlyStop) returns normally, the Result saying so; a resumed run that had stopped early
// returns at once.
func (t *Trainer) Fit(ctx context.Context, trainData, test Data) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if t.opt == nil {
		return Result{}, fmt.Errorf("train: %w: Fit needs an optimizer", ErrConfig)
	}
	if test == nil && t.cfg.needsMetric() {
		return Result{}, fmt.Errorf("train: %w: Plateau, EarlyStop and KeepBest decide on the validation metric: Fit needs data to evaluate", ErrConfig)
	}
	if err := t.prepareLoss(trainData); err != nil {
		return Result{}, err
	}
	t.higher = test == nil || targetKind(test) != Vector || t.loss.Kind == SoftCrossEntropy // Evaluate's MSE is better lower
	start := time.Now()
	var res Result
	var trainTime, waitTime time.Duration
	var samples int
	if within := t.state.EpochBatches; (t.epochs > 0 || within > 0) && t.step != t.epochs*t.optSteps(trainData.Steps())+within/t.accumulate() {
		return t.result(res, start, 0, 0, 0), fmt.Errorf("train: resume: %w: the checkpoint took %d steps in %d epochs and %d batches; this data takes %d per epoch "+
			"(another batch size, accumulation, dataset or world size)", ErrMismatch, t.step, t.epochs, within, t.optSteps(trainData.Steps()))
	}
	if m := t.cfg.MaxSteps; m > 0 && t.step >= m {
		return t.result(res, start, 0, 0, 0), fmt.Errorf("train: %w: %d steps are done and MaxSteps is %d: nothing to train "+
			"(set MaxSteps, --max-steps, above %d to continue)", ErrConfig, t.step, m, t.step)
	}
	if t.epochs > 0 && t.epochs >= t.cfg.Epochs {
		// A run with nothing left to train (a resumed checkpoint's, or a second Fit) would report
		// the epochs done before as its own (0 samples/s) and end as if it had trained.
		return t.result(res, start, 0, 0, 0), fmt.Errorf("train: %w: %d epochs are done and Epochs is %d: nothing to train "+
			"(set Epochs, --epochs, above %d to continue)", ErrConfig, t.epochs, t.cfg.Epochs, t.epochs)
	}
	if w := dataWorld(trainData); w > 1 && t.dist == nil {
		return Result{}, fmt.Errorf("train: %w: the training data is rank %d's part of a world of %d, but the trainer has no Config.Collective: "+
			"without the gradients all-reduced every rank would train a model of its own", ErrConfig, dataRank(trainData), w)
	}
	if t.dist != nil {
		if w := dataWorld(trainData); w != t.dist.g.Size() {
			return Result{}, fmt.Errorf("train: %w: the training data is split for a world of %d; the group has %d ranks", ErrConfig, w, t.dist.g.Size())
		}
		if err := t.distStart(ctx, trainData); err != nil {
			return Result{}, err
		}
	}
	for t.epochs < t.cfg.Epochs && (t.state.Stopped == 0 || t.cfg.EarlyStop == 0) && (t.cfg.MaxSteps == 0 || t.step < t.cfg.MaxSteps) {
		er, n, busy, wait, err := t.trainEpoch(ctx, trainData)
		samples += n
		trainTime += busy
		waitTime += wait
		if err != nil {
			return t.result(res, start, samples, trainTime, waitTime), err
		}
		er.Partial = t.state.EpochBatches > 0
		// Every rank evaluates rank 0's running statistics.
		if err := t.syncBuffers(ctx); err != nil {
			return t.result(res, start, samples, trainTime, waitTime), err
		}
		improved := false
		if test != nil {
			if err := t.evaluateEpoch(ctx, test, &er); err != nil {
				return t.result(res, start, samples, trainTime, waitTime), err
			}
			if err := diverged(er); err != nil {
				// As a training loss that is not finite: the epoch is not kept, and the last
				// checkpoint (of the epoch before) stays as it was.
				return t.result(res, start, samples, trainTime, waitTime), err
			}
			improved = t.decide(er)
		}
		t.history = append(t.history, er)
		if t.state.EpochBatches == 0 { // MaxSteps within the epoch leaves its place there
			t.epochs++
		}
		if t.dist == nil || t.dist.g.Rank() == 0 {
			paths := []string{t.cfg.Checkpoint}
			if improved {
				paths = append(paths, t.cfg.KeepBest)
			}
			for _, path := range paths {
				if path == "" {
					continue
				}
				if err := t.Save(ctx, path); err != nil {
					return t.result(res, start, samples, trainTime, waitTime), err
				}
			}
		}
		if t.cfg.Progress != nil {
			t.cfg.Progress(&Progress{Epoch: er.Epoch, Epochs: t.cfg.Epochs, Steps: t.optSteps(trainData.Steps()), Loss: er.TrainLoss, LR: er.LR,
				Done: true, Result: er})
		}
	}
	return t.result(res, start, samples, trainTime, waitTime), nil
}

// diverged is the divergence error of an epoch whose validation figures are not finite (a loss,
// or the accuracy or mean squared error of the model or its EMA), as a training loss that is
// not finite is its step's: one NaN policy, with or without a checkpoint.
func diverged(er EpochResult) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"validation loss", er.TestLoss}, {"EMA's validation loss", er.EMALoss}, {"validation score", er.TestAcc}, {"EMA's validation score", er.EMAAcc}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("train: epoch %d: the %s is %v (%w; lower the learning rate)", er.Epoch, f.name, f.v, ErrDiverged)
		}
	}
	return nil
}

// evaluateEpoch scores the model on test, and its EMA if it has one, into er.
func (t *Trainer) evaluateEpoch(ctx context.Context, test Data, er *EpochResult) error {
	score := func(acc, top5, loss *float64, class *[]float64) error {
		if targetKind(test) != ClassIDs {
			var err error
			*acc, err = t.Evaluate(ctx, test)
			return err
		}
		ev, err := t.EvaluateClasses(ctx, test)
		if err == nil {
			*acc, *top5, *loss = ev.Acc, ev.Top5, ev.Loss
			if class != nil {
				*class = ev.ClassAcc
			}
		}
		return err
	}
	if err := score(&er.TestAcc, &er.TestTop5, &er.TestLoss, &er.ClassAcc); err != nil || !t.hasEMA {
		return err
	}
	t.swapEMA()
	err := score(&er.EMAAcc, &er.EMATop5, &er.EMALoss, nil)
	t.swapEMA()
	if err != nil {
		return fmt.Errorf("train: the EMA's %w", err)
	}
	return nil
}

// decide runs the loop's decisions on the epoch's validation metric (the score of the weights
// the epoch's checkpoint serves: the EMA's when there is one and it scores at least the model's,
// else the model's): ReduceLROnPlateau's step, the best epoch and early stopping. It reports
// whether the epoch is the best so far. Every rank decides the same: the metric is over all
// ranks' samples.
func (t *Trainer) decide(er EpochResult) (improved bool) {
	metric := er.TestAcc
	t.state.EMABehind = t.hasEMA && emaBehind(er, t.higher)
	if t.hasEMA && !t.state.EMABehind {
		metric = er.EMAAcc
	}
	if t.cfg.Plateau != nil && !er.Partial {
		t.state.Plateau.step(*t.cfg.Plateau, metric, t.higher)
	}
	if improved = t.state.improves(metric, t.higher); improved {
		t.state.BestEpoch, t.state.Best = er.Epoch, metric
	}
	if t.cfg.EarlyStop > 0 && !er.Partial && er.Epoch-t.state.BestEpoch >= t.cfg.EarlyStop {
		t.state.Stopped = er.Epoch
	}
	return improved
}

func (t *Trainer) result(r Result, start time.Time, samples int, busy, wait time.Duration) Result {
	r.Seconds = time.Since(start).Seconds()
	if busy > 0 {
		r.SamplesPerS = float64(samples) / busy.Seconds()
		r.DataWaitFraction = wait.Seconds() / busy.Seconds()
	}
	r.Epochs, r.Steps = t.epochs, t.step
	r.History = append([]EpochResult(nil), t.history...)
	if t.dist != nil {
		r.AllReduceSeconds, r.ExposedAllReduceSeconds = t.dist.comm.Seconds(), t.dist.exposed.Seconds()
	}
	if len(t.history) > 0 {
		last := t.history[len(t.history)-1]
		r.TestAcc, r.FinalLoss = last.TestAcc, last.TrainLoss
		r.TestTop5, r.ClassAcc, r.EMAAcc, r.EMATop5 = last.TestTop5, last.ClassAcc, last.EMAAcc, last.EMATop5
		r.TestLoss, r.EMALoss = last.TestLoss, last.EMALoss
	}
	r.BestEpoch, r.BestMetric = t.state.BestEpoch, t.state.Best
	if t.cfg.EarlyStop > 0 && t.state.Stopped > 0 {
		r.StoppedEarly, r.StoppedEpoch = true, t.state.Stopped
	}
	return r
}

// checkBatch validates b against the model and makes room for b.N samples.
func (t *Trainer) checkBatch(ctx context.Context, b Batch) error {
	if err := t.validBatch(b); err != nil {
		return err
	}
	return t.reserve(ctx, b.N)
}

// reserve makes room for n samples in the model's activations.
func (t *Trainer) reserve(ctx context.Context, n int) error {
	if n > t.m.capN {
		if err := t.checkActivations(n); err != nil {
			return err
		}
		// The activations are about to be reallocated: no queued work may still use them.
		if err := t.wait(ctx); err != nil {
			return err
		}
		return t.m.reserve(n)
	}
	return nil
}

// checkActivations refuses a batch of n samples whose activations, estimated from the model's
// training pass (nn.Activations: what it keeps for the backward pass, and as much again for the
// gradients when training), would not fit in the device's memory beside the model's tensors: an
// error naming the figures and the largest activation, before anything is allocated, where the
// allocation would fail inside the step.
func (t *Trainer) checkActivations(n int) error {
	mem := t.dev.Info().Memory
	if mem <= 0 {
		return nil
	}
	if t.m.acts1 == 0 {
		values, largest, err := nn.Activations(t.m.module, 1, t.m.in.C, t.m.in.H, t.m.in.W)
		if err != nil {
			return fmt.Errorf("train: %s: %w", t.m.name, err)
		}
		t.m.acts1, t.m.largest.values, t.m.largest.op = values, int64(largest.Out.Len()), string(largest.Op)
	}
	perValue := int64(4)
	if t.opt != nil {
		perValue = 8 // and its gradient
	}
	acts := perValue * int64(n) * t.m.acts1
	weights := int64(0)
	for _, b := range t.m.weights.bufs {
		weights += int64(b.Len())
	}
	if acts+weights > mem {
		return fmt.Errorf("train: a batch of %d %v images: its activations need about %s (%d values an image; the largest, a %s's output, %d), "+
			"beside the model's %s, over the %s of %s: lower the batch size or the image size: %w", n, t.m.in, bytesize.Format(acts),
			t.m.acts1, t.m.largest.op, t.m.largest.values, bytesize.Format(weights), bytesize.Format(mem), t.dev.Info().Name, gpu.ErrOutOfMemory)
	}
	return nil
}

func (t *Trainer) validBatch(b Batch) error { return t.validInputs(b, false) }

// validInputs validates b's images against the model and its labels or float targets; with
// unlabelled, b may also carry neither (prediction needs only the images).
func (t *Trainer) validInputs(b Batch, unlabelled bool) error {
	targets := b.Labels.Len == b.N && b.Targets.Len == 0 || b.Labels.Len == 0 && b.Targets.Len == b.N*t.m.classes ||
		unlabelled && b.Labels.Len == 0 && b.Targets.Len == 0
	if b.Shape != t.m.in || b.N <= 0 || b.Images.Len != b.N*b.Shape.Len() || !targets {
		return fmt.Errorf("train: %w: batch of %d images %v (%d bytes, %d labels, %d float targets); model %s takes %v and %d classes", ErrConfig,
			b.N, b.Shape, b.Images.Len, b.Labels.Len, b.Targets.Len, t.m.name, t.m.in, t.m.classes)
	}
	return nil
}

// trainEpoch runs one epoch; it returns the epoch's record (without test accuracy), the number of
// samples, the training time and the time spent waiting for batches.
func (t *Trainer) trainEpoch(ctx context.Context, data Data) (er EpochResult, samples int, busy, wait time.Duration, err error) {
	// A checkpoint written within the epoch (Config.CheckpointEvery) continues at its next batch.
	seen := t.state.EpochBatches         // batches
	stepInEpoch := seen / t.accumulate() // optimizer steps
	t.state.EpochBatches = 0
	epoch := t.epochs
	er.Epoch = epoch + 1
	batchSeq := data.Batches
	if seen > 0 {
		sk, ok := data.(Seeker)
		if !ok {
			return er, 0, 0, 0, fmt.Errorf("train: resume within epoch %d at batch %d: %w: the data cannot start an epoch at a batch "+
				"(Seeker; FromLoader's can)", epoch+1, seen+1, ErrConfig)
		}
		batchSeq = func(ctx context.Context, epoch int) iter.Seq2[Batch, error] { return sk.BatchesFrom(ctx, epoch, seen) }
	}
	mean, std := data.Normalization()
	batches := data.Steps()
	if batches == 0 {
		batches = t.learned
		defer func() {
			if err == nil && t.learned == 0 && t.state.EpochBatches == 0 { // a whole epoch, not one MaxSteps cut
				t.learned = seen
			}
		}()
	}
	steps := t.optSteps(batches)
	total := t.totalSteps(steps)
	var lossSum float64
	start := time.Now()
	prev := start
	defer func() {
		busy = time.Since(start)
		er.Seconds = busy.Seconds()
		if busy > 0 {
			er.SamplesPerS = float64(samples) / busy.Seconds()
			er.DataWaitFraction = wait.Seconds() / busy.Seconds()
		}
		if samples > 0 {
			er.TrainLoss = lossSum / float64(samples)
		}
		er.LR = t.lr
	}()
	var g stepGroup
	// finish ends the step of the batches in g; its error (ctx's included) ends the epoch.
	finish := func() error {
		loss, err := t.finishStep(ctx, g, steps, total)
		if err != nil {
			return fmt.Errorf("train: epoch %d step %d: %w", epoch+1, stepInEpoch+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			hint := "lower the learning rate"
			if t.scaler != nil {
				// Loss scaling guards the backward pass only: a forward value past fp16's 65504
				// reaches the loss as Inf or NaN whatever the scale.
				hint += ", or train in bf16 or fp32: an activation may have overflowed fp16's range (65504) in the forward pass"
			}
			return fmt.Errorf("train: epoch %d step %d: loss is %v (%w; %s)", epoch+1, stepInEpoch+1, loss, ErrDiverged, hint)
		}
		lossSum += loss * float64(g.samples)
		stepInEpoch++
		g = stepGroup{}
		if t.cfg.Progress != nil {
			t.cfg.Progress(&Progress{Epoch: epoch + 1, Epochs: t.cfg.Epochs, Step: stepInEpoch, Steps: steps, Loss: loss, LR: t.lr})
		}
		if m := t.cfg.MaxSteps; m > 0 && t.step >= m {
			return errMaxSteps
		}
		if every := t.cfg.CheckpointEvery; every > 0 && t.step%every == 0 && stepInEpoch < steps && (t.dist == nil || t.dist.g.Rank() == 0) {
			t.state.EpochBatches = seen
			err := t.Save(ctx, t.cfg.Checkpoint)
			t.state.EpochBatches = 0
			if err != nil {
				return err
			}
		}
		return ctx.Err()
	}
	for b, berr := range batchSeq(ctx, epoch) {
		wait += time.Since(prev)
		if berr != nil {
			return er, samples, busy, wait, fmt.Errorf("train: epoch %d: %w", epoch+1, berr)
		}
		last := g.batches+1 == t.accumulate() || seen+1 == batches
		err := t.enqueueBatch(ctx, b, mean, std, &g, last)
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, gpu.ErrOutOfMemory) { // the batch's activations: the model's tensors were checked
			return er, samples, busy, wait, fmt.Errorf("train: epoch %d step %d: %w (a batch of %d %v images: lower the batch size or the image size)",
				epoch+1, stepInEpoch+1, err, b.N, b.Shape)
		}
		if err != nil {
			return er, samples, busy, wait, fmt.Errorf("train: epoch %d step %d: %w", epoch+1, stepInEpoch+1, err)
		}
		seen++
		samples += b.N
		if last {
			err := finish()
			if errors.Is(err, errMaxSteps) {
				if seen < batches || batches == 0 {
					t.state.EpochBatches = seen // the epoch continues here
				}
				break
			}
			if err != nil {
				return er, samples, busy, wait, err
			}
		}
		prev = time.Now()
	}
	if g.batches > 0 { // an epoch of unknown length (a stream's first) ended inside a step
		if err := t.foldAll(ctx, g); err != nil {
			return er, samples, busy, wait, fmt.Errorf("train: epoch %d step %d: %w", epoch+1, stepInEpoch+1, err)
		}
		if err := finish(); err != nil {
			return er, samples, busy, wait, err
		}
	}
	if samples == 0 {
		return er, samples, busy, wait, fmt.Errorf("train: epoch %d: no sample to train on: %w", epoch+1, ErrNoData)
	}
	if t.dist != nil {
		// The epoch's loss and sample count are over every rank's batches.
		all := float64(samples)
		if err := t.sumOverRanks(ctx, &lossSum, &all); err != nil {
			return er, samples, busy, wait, fmt.Errorf("train: epoch %d: %w", epoch+1, err)
		}
		samples = int(all)
	}
	return er, samples, busy, wait, nil
}

// errMaxSteps ends an epoch at Config.MaxSteps.
var errMaxSteps = errors.New("MaxSteps reached")

// totalSteps is the schedule's length: the epochs' steps, or MaxSteps when fewer.
func (t *Trainer) totalSteps(perEpoch int) int {
	total := perEpoch * t.cfg.Epochs
	if m := t.cfg.MaxSteps; m > 0 && (m < total || total == 0) {
		total = m
	}
	return total
}

// stepGroup is the batches of one optimizer step enqueued so far: their number and samples.
type stepGroup struct{ batches, samples int }

// enqueueBatch enqueues the forward and backward passes of one batch of the step g, which last
// ends: an earlier batch's gradients go into the accumulators (Config.Accumulate), the last one's
// are folded with them and, under Collective, all-reduced as backward produces them. A synchronized
// BatchNorm sums its statistics over the ranks in every batch, the last or not.
func (t *Trainer) enqueueBatch(ctx context.Context, b Batch, mean, std []float32, g *stepGroup, last bool) error {
	if err := t.checkBatch(ctx, b); err != nil {
		return err
	}
	r := &run{ops: t.ops, s: t.s, train: true}
	switch {
	case t.dist == nil:
	case t.dist.dev != nil:
		t.dist.deviceRun(t.s, r, t.cfg.SyncBatchNorm)
	case last || t.cfg.SyncBatchNorm:
		sr := t.dist.startStep(ctx, t, r, t.cfg.SyncBatchNorm)
		return sr.finish(ctx, t.enqueuePass(r, b, mean, std, g, last))
	}
	return t.enqueuePass(r, b, mean, std, g, last)
}

// enqueuePass enqueues the forward and backward passes of one batch of the step g, through r's
// hooks.
func (t *Trainer) enqueuePass(r *run, b Batch, mean, std []float32, g *stepGroup, last bool) error {
	m, n := t.m, b.N
	x := m.input.Slice(0, n*m.in.Len())
	if err := t.ops.NormalizeU8(t.s, x, b.Images, m.in.C, m.in.H*m.in.W, mean, std); err != nil {
		return err
	}
	seed := rng.Mix(t.seed, uint64(t.step), 7)
	if g.batches > 0 {
		seed = rng.Mix(seed, uint64(g.batches)) // each batch of a step draws its own dropout masks
	}
	if t.dist != nil {
		// Each rank draws its own dropout masks (the same seed would give sample j of every rank's
		// batch the same mask).
		seed = rng.Mix(seed, uint64(t.dist.g.Rank()))
	}
	logits, err := m.forward(r, n, seed)
	if err != nil {
		return err
	}
	dl := m.dlogits.Slice(0, n*m.classes)
	if err := t.lossStep(b, logits, dl); err != nil {
		return err
	}
	if t.scaler != nil {
		if err := t.ops.Scale(t.s, dl, float32(t.scaler.scale)); err != nil {
			return err
		}
	}
	if t.accumulate() > 1 {
		if g.batches == 0 {
			if err := t.ops.Fill(t.s, t.lossSum, 0); err != nil {
				return err
			}
		}
		if err := t.ops.Axpy(t.s, t.lossSum, float32(n), m.loss); err != nil {
			return err
		}
	}
	first := g.batches == 0
	g.batches++
	g.samples += n
	t.state.Batches++
	t.m.countBatchNorms(t.state.Tracked)
	if !last { // DDP's no_sync: this rank's gradients wait for the step's last batch
		r.gradDone = nil
		if err := m.backward(r, n); err != nil {
			return err
		}
		for i, p := range m.params {
			if first {
				if err := t.ops.Fill(t.s, t.acc[i], 0); err != nil {
					return err
				}
			}
			if err := t.ops.Axpy(t.s, t.acc[i], float32(n), p.G); err != nil {
				return err
			}
		}
		return nil
	}
	if !first {
		// Each tensor's gradient is folded with the accumulated one before the all-reduce of
		// the bucket it completes.
		reduce := r.gradDone
		r.gradDone = func(p *Param) error {
			if err := t.foldGrad(p, n, g.samples); err != nil {
				return err
			}
			if reduce == nil {
				return nil
			}
			return reduce(p)
		}
	}
	return m.backward(r, n)
}

// foldAll ends a step whose last batch was not known to be its last (an epoch of unknown length
// ended): every batch's gradients are in the accumulators, so g = acc/samples; under Collective the
// buckets are then all-reduced, layer after layer, with no backward pass to overlap.
func (t *Trainer) foldAll(ctx context.Context, g stepGroup) error {
	for i, p := range t.m.params {
		if err := t.ops.Copy(t.s, p.G, t.acc[i]); err != nil {
			return err
		}
		if err := t.ops.Scale(t.s, p.G, 1/float32(g.samples)); err != nil {
			return err
		}
	}
	if t.dist == nil {
		return nil
	}
	r := &run{ops: t.ops, s: t.s}
	each := func() error { return t.dist.reduceAll(r.gradDone) }
	if t.dist.dev != nil {
		t.dist.deviceRun(t.s, r, false)
		return each()
	}
	sr := t.dist.startStep(ctx, t, r, false)
	return sr.finish(ctx, each())
}

// finishStep applies the step whose gradients the batches of g left (perEpoch and total are the
// schedule's optimizer steps), updates the EMA, waits for the stream and returns the step's mean
// loss.
func (t *Trainer) finishStep(ctx context.Context, g stepGroup, perEpoch, total int) (float64, error) {
	apply := true
	if t.scaler != nil {
		var err error
		if apply, err = t.unscale(ctx); err != nil {
			return 0, err
		}
	}
	t.lr = t.opt.BaseLR()
	if t.state.Plateau != nil {
		t.lr = t.state.Plateau.LR
	}
	t.lr *= t.cfg.Schedule(t.step, perEpoch, total)
	if apply {
		if t.cfg.ClipGradNorm > 0 {
			if err := t.clipGrads(ctx); err != nil {
				return 0, err
			}
		}
		// The optimizer counts the steps it made (AdamW's bias correction): a step that loss
		// scaling skipped is none, as GradScaler skips optimizer.step(). (The scaler, and so this
		// count of skipped steps, restarts with a resumed run.)
		applied := t.step
		if t.scaler != nil {
			applied -= t.scaler.skipped
		}
		if err := t.optState.Step(t.ops, t.s, t.lr, applied+1); err != nil {
			return 0, fmt.Errorf("train: %w", err)
		}
	}
	if t.cfg.EMA > 0 {
		if err := t.updateEMA(t.step + 1); err != nil {
			return 0, err
		}
	}
	loss := t.m.loss
	if t.accumulate() > 1 {
		loss = t.lossSum
	}
	if err := t.s.CopyD2H(t.host[:], loss.Buf, 4*loss.Off); err != nil {
		return 0, err
	}
	if err := t.wait(ctx); err != nil {
		return 0, err
	}
	t.step++
	v := float64(*(*float32)(unsafe.Pointer(&t.host[0])))
	if t.accumulate() > 1 {
		v /= float64(g.samples)
	}
	return v, nil
}

// unscale counts the non-finite elements of the scaled gradients on the device, reads the one
// count back (a wait for the backward pass, as GradScaler's), updates the loss scale and, when the
// step is to be applied, divides the gradients by the scale they were computed with.
func (t *Trainer) unscale(ctx context.Context) (apply bool, err error) {
	if err := t.ops.Fill(t.s, kernels.F32(t.nonFinite), 0); err != nil { // 0.0's bits are int32 0
		return false, err
	}
	for _, p := range t.m.params {
		if err := t.ops.CountNonFinite(t.s, t.nonFinite, p.G); err != nil {
			return false, fmt.Errorf("train: check %s: %w", p.Name, err)
		}
	}
	if err := t.s.CopyD2H(t.host[:], t.nonFinite.Buf, 4*t.nonFinite.Off); err != nil {
		return false, err
	}
	if err := t.wait(ctx); err != nil {
		return false, err
	}
	scale := t.scaler.scale
	if !t.scaler.update(*(*int32)(unsafe.Pointer(&t.host[0])) == 0) {
		return false, nil
	}
	for _, p := range t.m.params {
		if err := t.ops.Scale(t.s, p.G, float32(1/scale)); err != nil {
			return false, fmt.Errorf("train: unscale %s: %w", p.Name, err)
		}
	}
	return true, nil
}

// forwardChunks enqueues the evaluation-mode forward pass over b in chunks no larger than the
// batches the model trained on, so that a large test batch does not grow the activations (a CNN's
// convolution workspace is hundreds of bytes per pixel), and calls use with each chunk's logits,
// the chunk and its first sample's index in b.
func (t *Trainer) forwardChunks(ctx context.Context, r *run, b Batch, mean, std []float32, use func(logits kernels.F32, part Batch, lo int) error) error {
	if err := t.validInputs(b, true); err != nil {
		return err
	}
	if b.Mix.Mixed {
		return fmt.Errorf("train: %w: a batch mixed by MixUp or CutMix: evaluate on a loader without Mix", ErrConfig)
	}
	m := t.m
	chunk := m.capN
	if chunk == 0 {
		chunk = min(b.N, evalChunk)
	}
	per := b.Shape.Len()
	for lo := 0; lo < b.N; lo += chunk {
		n := min(chunk, b.N-lo)
		part := Batch{Images: b.Images.Slice(lo*per, (lo+n)*per), N: n, Shape: b.Shape}
		if b.Labels.Len > 0 {
			part.Labels = b.Labels.Slice(lo, lo+n)
		} else if b.Targets.Len > 0 {
			part.Targets = b.Targets.Slice(lo*m.classes, (lo+n)*m.classes)
		}
		if err := t.reserve(ctx, n); err != nil {
			return err
		}
		if err := t.ops.NormalizeU8(t.s, m.input.Slice(0, n*m.in.Len()), part.Images, m.in.C, m.in.H*m.in.W, mean, std); err != nil {
			return err
		}
		logits, err := m.forward(r, n, 0)
		if err != nil {
			return err
		}
		if err := use(logits, part, lo); err != nil {
			return err
		}
	}
	return nil
}

// evalChunk is the evaluation chunk of a model that has not trained yet.
const evalChunk = 256
