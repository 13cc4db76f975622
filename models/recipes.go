package models

import (
	"maps"
	"slices"

	"github.com/stoke-ml/stoke/train"
)

// The zoo's training recipes (train.RecipeFor), one per family, from its paper and the recipes of
// timm and torchvision (references/classification). Two adaptations to the short runs on small
// data that stoke train's defaults make (3 epochs, where the papers run 300 to 600 on ImageNet):
//
//   - The learning rate is the paper's rule per batch, eight times higher: resnet8's measured
//     best on MNIST in 3 epochs (0.2 at batch 64, train.RecipeFor) is eight times torchvision's
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
	r     train.Recipe
	names []string
}{
	// ViT: DeiT (Touvron et al. 2021, timm's deit_*): AdamW, lr 5e-4 x batch/512, weight decay
	// 0.05, label smoothing 0.1, RandAugment rand-m9-mstd0.5-inc1 (2 ops at 9), MixUp 0.8, CutMix
	// 1.0, random erasing 0.25 (drop path 0.1: torchvision's VisionTransformer has none); layer
	// decay 0.75 when fine-tuning (MAE's for ViT-B, He et al. 2022; BEiT's 0.65).
	{train.Recipe{Optimizer: "adamw", LR: 4e-3, LRBatch: 512, WeightDecay: 0.05, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "randaugment:2:9", MixUp: 0.8, CutMix: 1, RandomErasing: 0.25, LayerDecay: 0.75},
		[]string{"vit", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
			"timm/vit_tiny_patch16_224", "timm/vit_small_patch16_224", "timm/vit_base_patch16_224",
			"timm/deit_tiny_patch16_224", "timm/deit_small_patch16_224", "timm/deit_base_patch16_224"}},
	// Swin (Liu et al. 2021) and ConvNeXt (Liu et al. 2022): DeiT's recipe but the layer decay
	// (ConvNeXt's drop path 0.1 to 0.5 by size, Swin's 0.2 to 0.5: their builders' defaults);
	// timm's ConvNeXt builders too.
	{train.Recipe{Optimizer: "adamw", LR: 4e-3, LRBatch: 512, WeightDecay: 0.05, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "randaugment:2:9", MixUp: 0.8, CutMix: 1, RandomErasing: 0.25},
		[]string{"swin", "swin_t", "swin_s", "swin_b", "swin_v2", "swin_v2_t", "swin_v2_s", "swin_v2_b",
			"convnext", "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
			"timm/convnext_atto", "timm/convnext_femto", "timm/convnext_pico", "timm/convnext_nano", "timm/convnext_tiny",
			"timm/convnext_small", "timm/convnext_base"}},
	// EfficientNet V1 and V2: torchvision's recipe for efficientnet_v2_s (the V1 weights are
	// timm's ports, without a torchvision recipe): SGD, lr 0.5 per 1024, weight decay 2e-5, label
	// smoothing 0.1, TrivialAugmentWide (--auto-augment ta_wide), MixUp 0.2, CutMix 1.0, random
	// erasing 0.1.
	{train.Recipe{Optimizer: "sgd", LR: 4, LRBatch: 1024, WeightDecay: 2e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "trivialaugment", MixUp: 0.2, CutMix: 1, RandomErasing: 0.1},
		append(slices.Sorted(maps.Keys(efficientNets)), "efficientnet", "timm/efficientnet_b0", "timm/efficientnet_b1", "timm/efficientnet_b2", "timm/efficientnet_b3")},
	// MobileNet V2: torchvision's recipe for mobilenet_v2: SGD, lr 0.036 per 256, weight decay
	// 4e-5; label smoothing 0.1 as the other families'.
	{train.Recipe{Optimizer: "sgd", LR: 0.288, LRBatch: 256, WeightDecay: 4e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1},
		[]string{"mobilenet_v2"}},
	// MobileNet V3: torchvision's recipe for mobilenet_v3_large and _small: RMSprop (train.py's
	// --opt rmsprop: momentum 0.9, alpha 0.9, eps 0.0316), lr 0.064 per 1024 (8 GPUs of 128),
	// weight decay 1e-5, AutoAugment's ImageNet policy (--auto-augment imagenet), random erasing
	// 0.2; label smoothing 0.1 as the other families', a cosine schedule where it steps by 0.973
	// every 2 of its 600 epochs, which a run of 3 would not see.
	{train.Recipe{Optimizer: "rmsprop", LR: 0.512, LRBatch: 1024, WeightDecay: 1e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		AutoAugment: "autoaugment", RandomErasing: 0.2},
		[]string{"mobilenet_v3_large", "mobilenet_v3_small"}},
	// RegNet: torchvision's recipe for regnet_x and regnet_y: SGD, lr 0.8 per 1024, weight decay
	// 5e-5, label smoothing 0.1, MixUp 0.2, CutMix 1.0, random erasing 0.1.
	{train.Recipe{Optimizer: "sgd", LR: 6.4, LRBatch: 1024, WeightDecay: 5e-5, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1,
		MixUp: 0.2, CutMix: 1, RandomErasing: 0.1},
		[]string{"regnet", "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf",
			"regnet_y_32gf", "regnet_y_128gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf",
			"regnet_x_16gf", "regnet_x_32gf"}},
	// ResNet, ResNeXt, Wide ResNet: torchvision's original recipe (He et al. 2016): SGD, lr 0.1
	// per 256, weight decay 1e-4; label smoothing 0.1 as resnet8's.
	{train.Recipe{Optimizer: "sgd", LR: 0.8, LRBatch: 256, WeightDecay: 1e-4, WarmupEpochs: 0.2, Batch: 64, LabelSmoothing: 0.1},
		[]string{"resnet", "resnet34", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
			"wide_resnet50_2", "wide_resnet101_2"}},
}

func init() {
	for _, z := range zooRecipes {
		if err := train.RegisterRecipe(z.r, z.names...); err != nil {
			panic(err)
		}
	}
}
