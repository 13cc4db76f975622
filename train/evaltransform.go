package train

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/transforms"
)

// EvalTransform is the evaluation transform a model's weights were made with, as torchvision's
// weights.transforms() gives it (ImageClassification's resize_size, crop_size, interpolation, mean
// and std) and timm's pretrained_cfg (a resize of crop/crop_pct, its interpolation, mean and std):
// a resize of the shorter side, a central crop, a normalization. A model zoo registers each
// model's beside its builder (RegisterEvalTransform); EvalTransformFor returns it, and
// NewPredictor and stoke predict (and stoke train's evaluation) apply it when no transform is
// given.
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
	r := int(int64(size) * int64(e.Resize) / int64(e.Crop))
	return transforms.Compose(transforms.ResizeFilter(r, e.Filter), transforms.CenterCrop(size),
		transforms.Normalize(e.Mean, e.Std)).WithDecode(transforms.ExactDecode)
}

func (e EvalTransform) String() string {
	return fmt.Sprintf("resize %d %v, crop %d, mean %v, std %v", e.Resize, e.Filter, e.Crop, e.Mean, e.Std)
}

func (e EvalTransform) check() error {
	if e.Crop < 1 || e.Resize < e.Crop || e.Resize > 1<<15 || e.Filter > transforms.Lanczos || len(e.Mean) == 0 || len(e.Mean) != len(e.Std) {
		return fmt.Errorf("train: RegisterEvalTransform %v: want a crop >= 1, a resize from the crop to 32768, "+
			"a known filter, as many means as stds", e)
	}
	if err := checkNormalization(e.Mean, e.Std); err != nil {
		return fmt.Errorf("train: RegisterEvalTransform %v: %w", e, err)
	}
	return nil
}

// checkNormalization reports the first channel whose mean is not finite or whose std is not
// finite and positive; mean and std have a value per channel.
func checkNormalization(mean, std []float32) error {
	for c, s := range std {
		if !(s > 0) || math.IsInf(float64(s), 0) || math.IsNaN(float64(mean[c])) || math.IsInf(float64(mean[c]), 0) {
			return fmt.Errorf("channel %d: mean %v, std %v; want finite, std > 0", c, mean[c], s)
		}
	}
	return nil
}

var evals nameRegistry[EvalTransform]

// RegisterEvalTransform makes e the evaluation transform of the registered models names
// (EvalTransformFor), as a model zoo does beside RegisterModel: the transform of the weights the
// builder of each name loads by default (torchvision's DEFAULT weights, timm's default pretrained
// tag). Register in an init function; it is safe for concurrent use.
func RegisterEvalTransform(e EvalTransform, names ...string) error {
	if err := e.check(); err != nil {
		return err
	}
	e.Mean, e.Std = slices.Clone(e.Mean), slices.Clone(e.Std)
	return evals.register("evaluation transform", e, names)
}

// EvalTransformFor returns the evaluation transform of a model NewModel knows, by name
// ("swin_t", or with arguments: "vit_b_16(image_size=384)"): a registered one
// (RegisterEvalTransform), else the built-in models': torchvision's resnet50 weights' (Resize
// 232, IMAGENET1K_V2) for "resnet50", and transforms.Eval's (Resize 256, Crop 224, bilinear,
// ImageNet's mean and std) for any other name. The slices are the caller's.
func EvalTransformFor(model string) EvalTransform {
	e, ok := evals.lookup(model)
	if !ok {
		e = imageNetEval
		if name, _, _ := strings.Cut(model, "("); name == "resnet50" {
			e.Resize = 232
		}
	}
	e.Mean, e.Std = slices.Clone(e.Mean), slices.Clone(e.Std)
	return e
}
