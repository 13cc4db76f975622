package models

import (
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// The zoo's evaluation transforms (train.EvalTransformFor), one per model with weights: those of
// the weights its builder's name loads by default, torchvision 0.14's DEFAULT weights
// (weights.transforms(): ImageClassification's resize_size, crop_size, interpolation, mean, std)
// and timm 0.9's default pretrained tag (pretrained_cfg's crop_pct, interpolation, mean, std, as
// timm.data.create_transform makes them: a resize of floor(crop/crop_pct)). The builders without
// weights of their own (vit, swin, swin_v2, convnext, resnet, regnet) take transforms.Eval's.
// TestEvalTransforms compares every one with torchvision's and timm's.
var zooEvals = []struct {
	e     train.EvalTransform
	names []string
}{
	// torchvision: the weights of before its 2021 recipe (IMAGENET1K_V1), and vit_b_16's.
	{evalImageNet(256, 224, transforms.Bilinear), []string{"resnet34", "mobilenet_v3_small", "vit_b_16", "vit_b_32", "vit_l_32"}},
	// torchvision's 2021 recipe (IMAGENET1K_V2, "How to train state-of-the-art models"), and the
	// ConvNeXts', RegNets' and resnext101_64x4d's weights trained with it.
	{evalImageNet(232, 224, transforms.Bilinear), []string{"resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
		"wide_resnet50_2", "wide_resnet101_2", "mobilenet_v2", "mobilenet_v3_large", "convnext_base", "convnext_large",
		"regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf", "regnet_x_16gf", "regnet_x_32gf",
		"regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf", "regnet_y_32gf"}},
	{evalImageNet(236, 224, transforms.Bilinear), []string{"convnext_tiny"}},
	{evalImageNet(230, 224, transforms.Bilinear), []string{"convnext_small"}},
	{evalImageNet(242, 224, transforms.Bilinear), []string{"vit_l_16"}},
	// torchvision's Swin V1 and V2.
	{evalImageNet(232, 224, transforms.Bicubic), []string{"swin_t"}},
	{evalImageNet(246, 224, transforms.Bicubic), []string{"swin_s"}},
	{evalImageNet(238, 224, transforms.Bicubic), []string{"swin_b"}},
	{evalImageNet(260, 256, transforms.Bicubic), []string{"swin_v2_t", "swin_v2_s"}},
	{evalImageNet(272, 256, transforms.Bicubic), []string{"swin_v2_b"}},
	// torchvision's EfficientNets: V1 ported from timm (b1's retrained, IMAGENET1K_V2), V2 its own
	// (v2_l ported from the paper's, with its mean and std of 0.5).
	{evalImageNet(256, 224, transforms.Bicubic), []string{"efficientnet_b0"}},
	{evalImageNet(255, 240, transforms.Bilinear), []string{"efficientnet_b1"}},
	{evalImageNet(288, 288, transforms.Bicubic), []string{"efficientnet_b2"}},
	{evalImageNet(320, 300, transforms.Bicubic), []string{"efficientnet_b3"}},
	{evalImageNet(384, 380, transforms.Bicubic), []string{"efficientnet_b4"}},
	{evalImageNet(456, 456, transforms.Bicubic), []string{"efficientnet_b5"}},
	{evalImageNet(528, 528, transforms.Bicubic), []string{"efficientnet_b6"}},
	{evalImageNet(600, 600, transforms.Bicubic), []string{"efficientnet_b7"}},
	{evalImageNet(384, 384, transforms.Bilinear), []string{"efficientnet_v2_s"}},
	{evalImageNet(480, 480, transforms.Bilinear), []string{"efficientnet_v2_m"}},
	{evalHalf(480, 480), []string{"efficientnet_v2_l"}},
	// torchvision's SWAG weights (fine-tuned end to end at their size): the largest models' DEFAULT.
	{evalImageNet(384, 384, transforms.Bicubic), []string{"regnet_y_128gf"}},
	{evalImageNet(518, 518, transforms.Bicubic), []string{"vit_h_14"}},
	// timm, all bicubic: crop_pct 0.875 (convnext_atto, _femto, _pico: d1/d2_in1k; convnext_base:
	// fb_in22k_ft_in1k; efficientnet_b0: ra_in1k), 0.95 (in12k_ft_in1k), 0.9 (DeiT's fb_in1k),
	// 1.0 (efficientnet_b1 to b3 at their sizes), and the ViTs' augreg weights' 0.9 with a mean
	// and std of 0.5.
	{evalImageNet(256, 224, transforms.Bicubic), []string{"timm/convnext_atto", "timm/convnext_femto", "timm/convnext_pico",
		"timm/convnext_base", "timm/efficientnet_b0"}},
	{evalImageNet(235, 224, transforms.Bicubic), []string{"timm/convnext_nano", "timm/convnext_tiny", "timm/convnext_small"}},
	{evalImageNet(248, 224, transforms.Bicubic), []string{"timm/deit_tiny_patch16_224", "timm/deit_small_patch16_224", "timm/deit_base_patch16_224"}},
	{evalImageNet(224, 224, transforms.Bicubic), []string{"timm/efficientnet_b1"}},
	{evalImageNet(256, 256, transforms.Bicubic), []string{"timm/efficientnet_b2"}},
	{evalImageNet(288, 288, transforms.Bicubic), []string{"timm/efficientnet_b3"}},
	{evalHalf(248, 224), []string{"timm/vit_tiny_patch16_224", "timm/vit_small_patch16_224", "timm/vit_base_patch16_224"}},
}

// evalImageNet is an evaluation transform with ImageNet's mean and std.
func evalImageNet(resize, crop int, f transforms.Filter) train.EvalTransform {
	return train.EvalTransform{Resize: resize, Crop: crop, Filter: f, Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}
}

// evalHalf is a bicubic evaluation transform with a mean and std of 0.5 (Inception's, timm's
// IMAGENET_INCEPTION_MEAN).
func evalHalf(resize, crop int) train.EvalTransform {
	half := []float32{0.5, 0.5, 0.5}
	return train.EvalTransform{Resize: resize, Crop: crop, Filter: transforms.Bicubic, Mean: half, Std: half}
}

func init() {
	for _, z := range zooEvals {
		if err := train.RegisterEvalTransform(z.e, z.names...); err != nil {
			panic(err)
		}
	}
}
