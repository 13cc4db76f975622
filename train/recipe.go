package train

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/transforms"
)

// Recipe is how a model trains by default: what `stoke train --model M` uses when no other flag
// says otherwise, and what a library user passes to the optimizer, the schedule, the loader and
// Config. The built-in models have theirs (RecipeFor); a model zoo registers its families' beside
// their builders (RegisterRecipe).
//
// Weight decay applies to the tensors Param.Decayed reports, whatever the optimizer: weights of
// linear and convolution layers, not biases, norms' scales and shifts, position embeddings or
// class tokens (timm's no-decay set: one-dimensional tensors and model.no_weight_decay();
// torchvision's norm_weight_decay, bias_weight_decay and transformer_embedding_decay of 0).
//
// Drop path (stochastic depth) is a model's own: its builder's argument (stochastic_depth_prob),
// whose default in a named configuration is torchvision's recipe's.
type Recipe struct {
	// Optimizer is "sgd" (Nesterov momentum 0.9, torchvision's recipes for convolutional
	// networks), "adamw" (betas 0.9 and 0.999, eps 1e-8: timm's and DeiT's) or "rmsprop"
	// (momentum 0.9, alpha 0.9, eps 0.0316: torchvision's train.py --opt rmsprop, its
	// MobileNetV3 recipe).
	Optimizer string
	// LR is the peak learning rate for a global batch of LRBatch samples: a run with a global
	// batch of B takes LR*B/LRBatch (the linear scaling rule of Goyal et al. 2017, DeiT's
	// 5e-4*B/512). LRBatch 0 keeps LR whatever the batch.
	LR      float64
	LRBatch int
	// WeightDecay is the optimizer's (decoupled for AdamW, added to the gradient for SGD and
	// RMSprop).
	WeightDecay float64
	// WarmupEpochs is the linear warm-up of the cosine schedule (Schedule).
	WarmupEpochs float64
	// Batch is the batch size (of each rank, in a data-parallel run).
	Batch int
	// LabelSmoothing is Config.LabelSmoothing.
	LabelSmoothing float64
	// The regularizing augmentation of the paper's runs, which stoke train applies only when
	// asked (--augment recipe), as timm's and torchvision's training scripts do: made for
	// hundreds of epochs, it slows a run of a few down (a ViT on MNIST in one epoch: 86.3%
	// with it, 92.3% without).
	//
	// AutoAugment is the automatic augmentation policy after the training crop and flip, in the
	// words of stoke train --augment (transforms.ParseAugment makes its transform):
	// "randaugment:N:M" (RandAugment of N operations at magnitude M of 31: torchvision's num_ops
	// and magnitude, timm's rand-mM-nN), "trivialaugment" (TrivialAugmentWide, torchvision's
	// --auto-augment ta_wide), "autoaugment" (AutoAugment's ImageNet policy, --auto-augment
	// imagenet); "" for none.
	AutoAugment string
	// MixUp and CutMix are the Beta distributions' alphas of the batch mixes (0: none; both: one
	// of the two per batch), RandomErasing the probability of erasing a box of an image.
	MixUp, CutMix, RandomErasing float64
	// EMA is Config.EMA, the decay of the weights' moving average (0: none).
	EMA float64
	// LayerDecay is Config.LayerDecay when fine-tuning (a run from Config.Init weights); 0 for
	// none.
	LayerDecay float64
}

// Schedule is the recipe's learning-rate schedule: Cosine(WarmupEpochs).
func (r Recipe) Schedule() Schedule { return Cosine(r.WarmupEpochs) }

// ScaledLR is the peak learning rate for a global batch of batch samples: LR*batch/LRBatch, or
// LR when LRBatch is 0.
func (r Recipe) ScaledLR(batch int) float64 {
	if r.LRBatch == 0 {
		return r.LR
	}
	return r.LR * float64(batch) / float64(r.LRBatch)
}

// NewOptimizer returns the recipe's optimizer for a global batch of batch samples (ScaledLR).
func (r Recipe) NewOptimizer(batch int) Optimizer {
	opt, err := NewOptimizer(r.Optimizer, r.ScaledLR(batch), 0.9, r.WeightDecay)
	if err != nil { // an unregistered recipe's unknown name (RegisterRecipe refuses one): sgd
		opt, _ = NewOptimizer("sgd", r.ScaledLR(batch), 0.9, r.WeightDecay)
	}
	return opt
}

func (r Recipe) String() string {
	lr := fmt.Sprintf("lr %g", r.LR)
	if r.LRBatch != 0 {
		lr += fmt.Sprintf(" x batch/%d", r.LRBatch)
	}
	s := fmt.Sprintf("%s %s, weight decay %g, batch %d, label smoothing %g, cosine with %g epochs' warm-up", r.Optimizer, lr, r.WeightDecay, r.Batch,
		r.LabelSmoothing, r.WarmupEpochs)
	for _, f := range []struct {
		name string
		v    float64
	}{{"ema", r.EMA}, {"layer decay when fine-tuning", r.LayerDecay}} {
		if f.v != 0 {
			s += fmt.Sprintf(", %s %g", f.name, f.v)
		}
	}
	var aug []string
	if r.AutoAugment != "" {
		aug = append(aug, r.AutoAugment)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"mixup", r.MixUp}, {"cutmix", r.CutMix}, {"random erasing", r.RandomErasing}} {
		if f.v != 0 {
			aug = append(aug, fmt.Sprintf("%s %g", f.name, f.v))
		}
	}
	if aug != nil {
		s += ", and when asked (stoke train --augment recipe) " + strings.Join(aug, ", ")
	}
	return s
}

var recipes nameRegistry[Recipe]

// RegisterRecipe makes r the recipe of the registered models names (RecipeFor), as a model zoo
// does beside RegisterModel for each family. The optimizer must be "sgd", "adamw" or "rmsprop",
// the batch and the learning rate positive, the AutoAugment policy one transforms.ParseAugment
// knows. Register in an init function; it is safe for concurrent use.
func RegisterRecipe(r Recipe, names ...string) error {
	if !slices.Contains(Optimizers, r.Optimizer) || r.Batch < 1 || !(r.LR > 0) || r.LRBatch < 0 || !(r.LayerDecay >= 0 && r.LayerDecay < 1) {
		return fmt.Errorf("train: RegisterRecipe %v: want the optimizer one of %s, a batch >= 1, a learning rate > 0, a layer decay in [0,1)", r, strings.Join(Optimizers, ", "))
	}
	if _, err := transforms.ParseAugment(r.AutoAugment); err != nil {
		return fmt.Errorf("train: RegisterRecipe %v: AutoAugment: %w", r, err)
	}
	if r.AutoAugment == "none" {
		return fmt.Errorf("train: RegisterRecipe %v: AutoAugment \"none\": leave it empty for none", r)
	}
	return recipes.register("recipe", r, names)
}

// RecipeFor returns the recipe of a model NewModel knows, by name ("vit_b_16", or with arguments:
// "vit(image_size=28,...)"): a registered one (RegisterRecipe), else the built-in models' below,
// and the CNN's for any other name. The built-in models' are the best of the runs in
// train/README.md ("Recipes"), which gives every candidate's figures and commands. MNIST test
// accuracy after 3 epochs of `stoke train --data mnist --model M`, seed 1:
//
//   - "mlp": lr 0.08, batch 64, label smoothing 0.1: 98.45% (98.15% with the batch of 128 and no
//     smoothing it had before).
//   - "cnn": lr 0.06, batch 64, label smoothing 0.1: 99.36% (seed 2: 99.40%; 99.28% and 99.30%
//     with lr 0.03, batch 128 and no smoothing).
//   - "resnet8", "resnet20" (BatchNorm): lr 0.2, weight decay 5e-4, batch 64, label smoothing 0.1:
//     resnet8 99.58% (seed 2: 99.51%; 99.23-99.27% with lr 0.1, batch 128 and no smoothing).
//   - "resnet18", "resnet50": lr 0.1, weight decay 5e-4, batch 128 (not measured on MNIST).
//
// All take SGD with Nesterov momentum 0.9 and a cosine schedule after a warm-up of a fifth of an
// epoch, and no augmentation beyond the loader's (none for MNIST; the crop and flip for photos):
// in 3 epochs, a mild RandAugment(1, 5) was no better at lr 0.2, and MixUp with CutMix worse.
func RecipeFor(model string) Recipe {
	if r, ok := recipes.lookup(model); ok {
		return r
	}
	name, _, _ := strings.Cut(model, "(")
	r := Recipe{Optimizer: "sgd", LR: 0.06, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1}
	switch {
	case name == "mlp":
		r.LR = 0.08
	case name == "resnet8" || name == "resnet20":
		r.LR, r.WeightDecay = 0.2, 5e-4
	case strings.HasPrefix(name, "resnet"):
		r.LR, r.WeightDecay, r.Batch, r.LabelSmoothing = 0.1, 5e-4, 128, 0
	}
	return r
}
