package models

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/transforms"
)

// Recipe is how a model trains by default: what `stoke train --model M` uses when no other flag
// says otherwise, and what a library user passes to the optimizer (optim.ForRecipe), the
// schedule (optim.Cosine(WarmupEpochs)), the loader and train.Config. Each family registers its
// own beside its builders (RegisterRecipe); RecipeFor returns it.
//
// Weight decay applies to the tensors train.Param.Decayed reports, whatever the optimizer: weights of
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
	// WarmupEpochs is the linear warm-up of the cosine schedule (optim.Cosine).
	WarmupEpochs float64
	// Batch is the batch size (of each rank, in a data-parallel run).
	Batch int
	// LabelSmoothing is train.Config.LabelSmoothing.
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
	// EMA is train.Config.EMA, the decay of the weights' moving average (0: none).
	EMA float64
	// LayerDecay is train.Config.LayerDecay when fine-tuning (a run from train.Config.Init weights); 0 for
	// none.
	LayerDecay float64
}

// ScaledLR is the peak learning rate for a global batch of batch samples: LR*batch/LRBatch, or
// LR when LRBatch is 0.
func (r Recipe) ScaledLR(batch int) float64 {
	if r.LRBatch == 0 {
		return r.LR
	}
	return r.LR * float64(batch) / float64(r.LRBatch)
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

// RegisterRecipe makes r the recipe of the registered models names (RecipeFor), as each family
// does beside Register. The optimizer must be named (one of optim.Names: a test of package
// train holds every registered recipe to them), the batch and the learning rate positive, the AutoAugment policy one transforms.ParseAugment knows. Register in an init
// function; it is safe for concurrent use.
func RegisterRecipe(r Recipe, names ...string) error {
	if r.Optimizer == "" || r.Batch < 1 || !(r.LR > 0) || r.LRBatch < 0 || !(r.LayerDecay >= 0 && r.LayerDecay < 1) {
		return fmt.Errorf("models: RegisterRecipe %v: want an optimizer, a batch >= 1, a learning rate > 0, a layer decay in [0,1)", r)
	}
	if _, err := transforms.ParseAugment(r.AutoAugment); err != nil {
		return fmt.Errorf("models: RegisterRecipe %v: AutoAugment: %w", r, err)
	}
	if r.AutoAugment == "none" {
		return fmt.Errorf("models: RegisterRecipe %v: AutoAugment \"none\": leave it empty for none", r)
	}
	return recipes.register("recipe", r, names)
}

// RecipeFor returns the recipe of a model, by name ("vit_b_16", or with arguments:
// "vit(image_size=28,...)"): its family's (RegisterRecipe), else the CNN's below. The recipes of
// mlp, cnn and the ResNets of builtin.go are the best of the runs in train/README.md ("Recipes"),
// which gives every candidate's figures and commands. MNIST test accuracy after 3 epochs of
// `stoke train --data mnist --model M`, seed 1:
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
	return cnnRecipe
}

// cnnRecipe is the cnn's, and any model's without one: SGD (Nesterov momentum 0.9) at lr 0.06,
// batch 64, label smoothing 0.1, a fifth of an epoch's warm-up.
var cnnRecipe = Recipe{Optimizer: "sgd", LR: 0.06, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1}

// The zoo's training recipes (RecipeFor), one per family, from its paper and the recipes of
// timm and torchvision (references/classification). Two adaptations to the short runs on small
// data that stoke train's defaults make (3 epochs, where the papers run 300 to 600 on ImageNet):
//
//   - The learning rate is the paper's rule per batch, eight times higher: resnet8's measured
//     best on MNIST in 3 epochs (0.2 at batch 64, RecipeFor) is eight times torchvision's
//     0.1 per 256. The transformers' rules are one: DeiT's 5e-4 per 512, Swin's 1e-3 per 1024 and
//     ConvNeXt's 4e-3 per 4096.
//   - The warm-up is a fifth of an epoch, as the built-in models', where the papers warm up for
//     5 to 20 of their epochs; and no EMA: the papers' decays (DeiT's 0.99996, ConvNeXt's 0.9999)
//     average over more steps than such a run takes.
//
// Drop path is each builder's stochastic_depth_prob, whose defaults are torchvision's. The
// transformers' figures are not yet measured in Stoke; the convolutional networks' rates follow
// resnet8's measurement.
var zooRecipes = []struct {
	r     Recipe
	names []string
}{
	// The built-in models (builtin.go): see RecipeFor.
	{cnnRecipe, []string{"cnn"}},
	{Recipe{Optimizer: "sgd", LR: 0.08, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1}, []string{"mlp"}},
	{Recipe{Optimizer: "sgd", LR: 0.2, WeightDecay: 5e-4, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1}, []string{"resnet8", "resnet20"}},
	{Recipe{Optimizer: "sgd", LR: 0.1, WeightDecay: 5e-4, WarmupEpochs: 0.2, Batch: 128}, []string{"resnet18", "resnet50"}},
	// ViT: DeiT (Touvron et al. 2021, timm's deit_*): AdamW, lr 5e-4 x batch/512, weight decay
	// 0.05, label smoothing 0.1, RandAugment rand-m9-mstd0.5-inc1 (2 ops at 9), MixUp 0.8, CutMix
	// 1.0, random erasing 0.25 (drop path 0.1: torchvision's VisionTransformer has none); layer
	// decay 0.75 when fine-tuning (MAE's for ViT-B, He et al. 2022; BEiT's 0.65).
	{Recipe{Optimizer: "adamw", LR: 4e-3, LRBatch: 512, WeightDecay: 0.05, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "randaugment:2:9", MixUp: 0.8, CutMix: 1, RandomErasing: 0.25, LayerDecay: 0.75},
		[]string{"vit", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
			"timm/vit_tiny_patch16_224", "timm/vit_small_patch16_224", "timm/vit_base_patch16_224",
			"timm/deit_tiny_patch16_224", "timm/deit_small_patch16_224", "timm/deit_base_patch16_224"}},
	// Swin (Liu et al. 2021) and ConvNeXt (Liu et al. 2022): DeiT's recipe but the layer decay
	// (ConvNeXt's drop path 0.1 to 0.5 by size, Swin's 0.2 to 0.5: their builders' defaults);
	// timm's ConvNeXt builders too.
	{Recipe{Optimizer: "adamw", LR: 4e-3, LRBatch: 512, WeightDecay: 0.05, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "randaugment:2:9", MixUp: 0.8, CutMix: 1, RandomErasing: 0.25},
		[]string{"swin", "swin_t", "swin_s", "swin_b", "swin_v2", "swin_v2_t", "swin_v2_s", "swin_v2_b",
			"convnext", "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
			"timm/convnext_atto", "timm/convnext_femto", "timm/convnext_pico", "timm/convnext_nano", "timm/convnext_tiny",
			"timm/convnext_small", "timm/convnext_base"}},
	// EfficientNet V1 and V2: torchvision's recipe for efficientnet_v2_s (the V1 weights are
	// timm's ports, without a torchvision recipe): SGD, lr 0.5 per 1024, weight decay 2e-5, label
	// smoothing 0.1, TrivialAugmentWide (--auto-augment ta_wide), MixUp 0.2, CutMix 1.0, random
	// erasing 0.1.
	{Recipe{Optimizer: "sgd", LR: 4, LRBatch: 1024, WeightDecay: 2e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "trivialaugment", MixUp: 0.2, CutMix: 1, RandomErasing: 0.1},
		append(slices.Sorted(maps.Keys(efficientNets)), "efficientnet", "timm/efficientnet_b0", "timm/efficientnet_b1", "timm/efficientnet_b2", "timm/efficientnet_b3")},
	// MobileNet V2: torchvision's recipe for mobilenet_v2: SGD, lr 0.036 per 256, weight decay
	// 4e-5; label smoothing 0.1 as the other families'.
	{Recipe{Optimizer: "sgd", LR: 0.288, LRBatch: 256, WeightDecay: 4e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1},
		[]string{"mobilenet_v2"}},
	// MobileNet V3: torchvision's recipe for mobilenet_v3_large and _small: RMSprop (train.py's
	// --opt rmsprop: momentum 0.9, alpha 0.9, eps 0.0316), lr 0.064 per 1024 (8 GPUs of 128),
	// weight decay 1e-5, AutoAugment's ImageNet policy (--auto-augment imagenet), random erasing
	// 0.2; label smoothing 0.1 as the other families', a cosine schedule where it steps by 0.973
	// every 2 of its 600 epochs, which a run of 3 would not see.
	{Recipe{Optimizer: "rmsprop", LR: 0.512, LRBatch: 1024, WeightDecay: 1e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "autoaugment", RandomErasing: 0.2},
		[]string{"mobilenet_v3_large", "mobilenet_v3_small"}},
	// RegNet: torchvision's recipe for regnet_x and regnet_y: SGD, lr 0.8 per 1024, weight decay
	// 5e-5, label smoothing 0.1, MixUp 0.2, CutMix 1.0, random erasing 0.1.
	{Recipe{Optimizer: "sgd", LR: 6.4, LRBatch: 1024, WeightDecay: 5e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		MixUp: 0.2, CutMix: 1, RandomErasing: 0.1},
		[]string{"regnet", "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf",
			"regnet_y_32gf", "regnet_y_128gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf",
			"regnet_x_16gf", "regnet_x_32gf"}},
	// ResNet, ResNeXt, Wide ResNet: torchvision's original recipe (He et al. 2016): SGD, lr 0.1
	// per 256, weight decay 1e-4; label smoothing 0.1 as resnet8's.
	{Recipe{Optimizer: "sgd", LR: 0.8, LRBatch: 256, WeightDecay: 1e-4, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1},
		[]string{"resnet", "resnet34", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
			"wide_resnet50_2", "wide_resnet101_2"}},
}

func init() {
	for _, z := range zooRecipes {
		if err := RegisterRecipe(z.r, z.names...); err != nil {
			panic(err)
		}
	}
}
