package cli

import (
	"flag"
	"fmt"
	"math"
	"strings"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/transforms"
)

// augmentFlags are stoke train's augmentation flags: a policy after the training crop and flip,
// RandomErasing after it, and MixUp and CutMix of the training batches.
type augmentFlags struct {
	policy        string
	erasing       float64
	mixup, cutmix float64
}

func (a *augmentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.policy, "augment", "none", "augmentation of the training images after the crop and flip, torchvision's: none, "+
		"trivialaugment (TrivialAugmentWide), randaugment (RandAugment(2, 9); randaugment:N:M for N ops at magnitude M of 31), "+
		"autoaugment (AutoAugment, ImageNet policy); stoke train also takes recipe: the model's recipe's policy (stoke train --help lists them), and its "+
		"--random-erasing, --mixup and --cutmix where those flags are unset (off by default, as in timm's and torchvision's training scripts: "+
		"meant for runs of hundreds of epochs, they slow a short one down)")
	fs.Float64Var(&a.erasing, "random-erasing", 0, "probability of torchvision's RandomErasing on a training image (0: none), "+
		"erasing to the normalization's mean (0 after Normalize, as torchvision's recipes)")
	fs.Float64Var(&a.mixup, "mixup", 0, "MixUp of the training batches with a weight from Beta(ALPHA, ALPHA) "+
		"(0: none; timm's and torchvision's recipes: 0.2 to 0.8), "+
		"each image blended with the one before it in the batch and the targets alike (soft targets, smoothed by --label-smoothing first); with --cutmix, "+
		"each batch gets one of the two with probability 1/2")
	fs.Float64Var(&a.cutmix, "cutmix", 0, "CutMix of the training batches with ALPHA (0: none; the recipes: 1.0): a box of the image before it pasted in, "+
		"the targets weighted by the box's area")
}

// useRecipe is --augment recipe: the recipe's AutoAugment (or none), and its random erasing,
// MixUp and CutMix where their flags are unset.
func (a *augmentFlags) useRecipe(fs *flag.FlagSet, r models.Recipe) {
	a.policy = "none"
	if r.AutoAugment != "" {
		a.policy = r.AutoAugment
	}
	for _, d := range []struct {
		flag   string
		v      *float64
		recipe float64
	}{{"random-erasing", &a.erasing, r.RandomErasing}, {"mixup", &a.mixup, r.MixUp}, {"cutmix", &a.cutmix, r.CutMix}} {
		if !flagSet(fs, d.flag) {
			*d.v = d.recipe
		}
	}
}

// mix checks --mixup and --cutmix and returns the batch-level mix of the training loader.
func (a *augmentFlags) mix() (transforms.Mix, error) {
	for _, f := range []struct {
		name  string
		alpha float64
	}{{"--mixup", a.mixup}, {"--cutmix", a.cutmix}} {
		if !(f.alpha >= 0) || math.IsInf(f.alpha, 0) {
			return transforms.Mix{}, fmt.Errorf("%w: %s %v; want a finite alpha > 0 (or 0: none)", errUsage, f.name, f.alpha)
		}
	}
	return transforms.Mix{MixUpAlpha: a.mixup, CutMixAlpha: a.cutmix}, nil
}

// mixText says what mix does, for stoke train's first line.
func mixText(m transforms.Mix) string {
	var parts []string
	if m.MixUpAlpha > 0 {
		parts = append(parts, fmt.Sprintf("mixup %g", m.MixUpAlpha))
	}
	if m.CutMixAlpha > 0 {
		parts = append(parts, fmt.Sprintf("cutmix %g", m.CutMixAlpha))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

// transforms checks the flags and returns the transforms they add to the training chain.
func (a *augmentFlags) transforms(mean []float32) ([]transforms.Transform, error) {
	var ts []transforms.Transform
	policy, err := transforms.ParseAugment(a.policy)
	if err != nil {
		return nil, fmt.Errorf("%w: --augment: %v", errUsage, err)
	}
	if policy != nil {
		ts = append(ts, policy)
	}
	if !(a.erasing >= 0 && a.erasing <= 1) {
		return nil, fmt.Errorf("%w: --random-erasing %v; want a probability in [0, 1]", errUsage, a.erasing)
	}
	if a.erasing > 0 {
		value := make([]byte, 0, 3)
		for _, m := range mean {
			value = append(value, byte(m*255+0.5))
		}
		if len(value) != 3 {
			value = []byte{0}
		}
		ts = append(ts, transforms.RandomErasingWith(a.erasing, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, value))
	}
	return ts, nil
}
