package models

import (
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/transforms"
)

// EvalTransform is the evaluation transform a model's weights were made with, as torchvision's
// weights.transforms() gives it (ImageClassification's resize_size, crop_size, interpolation, mean
// and std) and timm's pretrained_cfg (a resize of crop/crop_pct, its interpolation, mean and std):
// a resize of the shorter side, a central crop, a normalization. Each model with weights
// registers its own beside its builder (RegisterEvalTransform); EvalTransformFor returns it, and
// predict.New and stoke predict (and stoke train's evaluation) apply it when no transform
// is given, nor one by the weights' name (a hub repository's config.json, a torchvision
// member's own: hub.TransformOf).
type EvalTransform struct {
	// Resize is the side the shorter side of an image is resized to, for a model whose input is
	// Crop x Crop; Crop is the side of the central crop.
	Resize, Crop int
	// Filter is the resize's interpolation, antialiased as PIL's (and torchvision's on PIL
	// images).
	Filter transforms.Filter
	// Mean and Std are the per-channel normalization (RGB, on [0,1] values).
	Mean, Std []float32
}

// imageNetEval is transforms.Eval's: torchvision's ImageNet evaluation transform, the transform
// of its weights made before 2021 (resnet18's, vit_b_16's).
var imageNetEval = EvalTransform{Resize: 256, Crop: 224, Filter: transforms.Bilinear,
	Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}

// Chain returns the transform for a model of input size x size: Resize(r) with Filter,
// CenterCrop(size) and Normalize(Mean, Std), decoding JPEG exactly as PIL does (ExactDecode). At
// size Crop, r is Resize: the weights' own transform. At another size (a model built for other
// images: vit_b_16(image_size=384), a ViT of 28 pixels) r keeps the ratio of the two,
// floor(size*Resize/Crop), as transforms.Eval keeps 8/7 and timm keeps its crop_pct (which it
// applies as floor(size/crop_pct), one pixel more at some sizes); torchvision's weights have one
// size only.
func (e EvalTransform) Chain(size int) *transforms.Chain {
	e = e.At(size)
	return transforms.Compose(transforms.ResizeFilter(e.Resize, e.Filter), transforms.CenterCrop(e.Crop),
		transforms.Normalize(e.Mean, e.Std)).WithDecode(transforms.ExactDecode)
}

// At returns e for a model of input size x size, as Chain applies it: Crop is size, and Resize
// keeps the ratio of the two, floor(size*Resize/Crop). It shares e's Mean and Std.
func (e EvalTransform) At(size int) EvalTransform {
	e.Resize, e.Crop = int(int64(size)*int64(e.Resize)/int64(e.Crop)), size
	return e
}

func (e EvalTransform) String() string {
	return fmt.Sprintf("resize %d %v, crop %d, mean %v, std %v", e.Resize, e.Filter, e.Crop, e.Mean, e.Std)
}

// Check reports why e is not a transform: a crop below 1, a resize below the crop or above 32768,
// an unknown filter, no mean or not as many means as stds, a mean or std not finite, a std not
// positive.
func (e EvalTransform) Check() error {
	if e.Crop < 1 || e.Resize < e.Crop || e.Resize > 1<<15 || e.Filter > transforms.Lanczos || len(e.Mean) == 0 || len(e.Mean) != len(e.Std) {
		return fmt.Errorf("%v: want a crop >= 1, a resize from the crop to 32768, a known filter, as many means as stds", e)
	}
	if err := transforms.CheckNormalization(e.Mean, e.Std); err != nil {
		return fmt.Errorf("%v: %w", e, err)
	}
	return nil
}

var evals nameRegistry[EvalTransform]

// RegisterEvalTransform makes e the evaluation transform of the registered models names
// (EvalTransformFor), as each model with weights does beside Register: the transform of the weights the
// builder of each name loads by default (torchvision's DEFAULT weights, timm's default pretrained
// tag). Register in an init function; it is safe for concurrent use.
func RegisterEvalTransform(e EvalTransform, names ...string) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("models: RegisterEvalTransform: %w", err)
	}
	e.Mean, e.Std = slices.Clone(e.Mean), slices.Clone(e.Std)
	return evals.register("evaluation transform", e, names)
}

// EvalTransformFor returns the evaluation transform of a model, by name ("swin_t", or with
// arguments: "vit_b_16(image_size=384)"): a registered one (RegisterEvalTransform), else
// transforms.Eval's (Resize 256, Crop 224, bilinear, ImageNet's mean and std). The slices are the
// caller's.
func EvalTransformFor(model string) EvalTransform {
	e, ok := evals.lookup(model)
	if !ok {
		e = imageNetEval
	}
	e.Mean, e.Std = slices.Clone(e.Mean), slices.Clone(e.Std)
	return e
}

// The zoo's evaluation transforms (EvalTransformFor), one per model with weights: those of
// the weights its builder's name loads by default, torchvision 0.14's DEFAULT weights
// (weights.transforms(): ImageClassification's resize_size, crop_size, interpolation, mean, std)
// and timm 0.9's default pretrained tag (pretrained_cfg's crop_pct, interpolation, mean, std, as
// timm.data.create_transform makes them: a resize of floor(crop/crop_pct)). The builders without
// weights of their own (vit, swin, swin_v2, convnext, resnet, regnet) take transforms.Eval's.
// TestEvalTransforms compares every one with torchvision's and timm's, and
// TestEvalTransformsTorchvisionDefault the torchvision ones with the DEFAULT weights' in package
// hub's table, which gives each torchvision weights name its own (hub.TransformOf).
var zooEvals = []struct {
	e     EvalTransform
	names []string
}{
	// torchvision: the weights of before its 2021 recipe (IMAGENET1K_V1), and vit_b_16's.
	{evalImageNet(256, 224, transforms.Bilinear), []string{"resnet34", "mobilenet_v3_small", "vit_b_16", "vit_b_32", "vit_l_32"}},
	// torchvision's 2021 recipe (IMAGENET1K_V2, "How to train state-of-the-art models"), and the
	// ConvNeXts', RegNets' and resnext101_64x4d's weights trained with it.
	{evalImageNet(232, 224, transforms.Bilinear), []string{"resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
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
func evalImageNet(resize, crop int, f transforms.Filter) EvalTransform {
	return EvalTransform{Resize: resize, Crop: crop, Filter: f, Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}
}

// evalHalf is a bicubic evaluation transform with a mean and std of 0.5 (Inception's, timm's
// IMAGENET_INCEPTION_MEAN).
func evalHalf(resize, crop int) EvalTransform {
	half := []float32{0.5, 0.5, 0.5}
	return EvalTransform{Resize: resize, Crop: crop, Filter: transforms.Bicubic, Mean: half, Std: half}
}

func init() {
	for _, z := range zooEvals {
		if err := RegisterEvalTransform(z.e, z.names...); err != nil {
			panic(err)
		}
	}
}
