package cli

import (
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// TestAugmentFlagsChain: --augment and --random-erasing add their transforms to the training
// chain only, RandomErasing erasing to the normalization's mean in uint8.
func TestAugmentFlagsChain(t *testing.T) {
	photos := loaders.Info{Shape: transforms.Shape{}}
	tests := []struct {
		policy  string
		erasing float64
		want    []string
	}{
		{"none", 0, nil},
		{"trivialaugment", 0, []string{"TrivialAugmentWide(bins=31)"}},
		{"randaugment", 0.25, []string{
			"RandAugment(num_ops=2, magnitude=9, bins=31)",
			"RandomErasing(p=0.25, scale=[0.02 0.33], ratio=[0.3 3.3], value=[124 116 104])",
		}},
		{"autoaugment", 1, []string{"AutoAugment(imagenet)", "RandomErasing(p=1"}},
		{"randaugment:3:14", 0, []string{"RandAugment(num_ops=3, magnitude=14, bins=31)"}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			lf := loaderFlags{size: 32, augment: &augmentFlags{policy: tt.policy, erasing: tt.erasing}}
			base := transforms.Train(32).String()
			train, test := lf.transform(photos, "train").String(), lf.transform(photos, "test").String()
			if test != transforms.Eval(32).String() {
				t.Errorf("test chain = %s; want the evaluation transform alone", test)
			}
			want := strings.TrimSuffix(base, ")")
			for _, w := range tt.want {
				if !strings.Contains(train, w) {
					t.Errorf("train chain = %s; want it to contain %s", train, w)
				}
			}
			if tt.want == nil && train != base {
				t.Errorf("train chain = %s; want %s", train, base)
			}
			if !strings.HasPrefix(train, want) {
				t.Errorf("train chain = %s; want it to start with the recipe %s", train, want)
			}
		})
	}
}

// TestModelTransform: photos are evaluated with the transform of the model's weights (swin_t's
// bicubic resize to 232, timm's augreg ViTs' mean and std of 0.5) and train with its
// normalization; a model without weights of its own keeps torchvision's ImageNet recipe; without
// --size, photos take the size the weights were evaluated at (efficientnet_b1's 240, its resize
// 255 bilinear; efficientnet_v2_s's 384, bilinear to 384).
func TestModelTransform(t *testing.T) {
	photos := loaders.Info{Shape: transforms.Shape{}}
	half := transforms.Normalize([]float32{0.5, 0.5, 0.5}, []float32{0.5, 0.5, 0.5}).String()
	for _, tc := range []struct {
		model       string
		train, test string
	}{
		{"", transforms.Train(224).String(), transforms.Eval(224).String()},
		{"cnn", transforms.Train(224).String(), transforms.Eval(224).String()},
		{"swin_t(stochastic_depth_prob=0.1)", transforms.Train(224).String(), "Compose(Resize(232, bicubic), CenterCrop(224), " +
			transforms.Normalize(transforms.ImageNetMean, transforms.ImageNetStd).String() + ").WithDecode(exact)"},
		{"timm/vit_tiny_patch16_224", "Compose(RandomResizedCrop(224, scale=[0.08 1], ratio=[0.75 1.3333333333333333]), HorizontalFlip(0.5), " + half + ")",
			"Compose(Resize(248, bicubic), CenterCrop(224), " + half + ").WithDecode(exact)"},
		{"efficientnet_b1", transforms.Train(240).String(), "Compose(Resize(255, bilinear), CenterCrop(240), " +
			transforms.Normalize(transforms.ImageNetMean, transforms.ImageNetStd).String() + ").WithDecode(exact)"},
		{"efficientnet_v2_s", transforms.Train(384).String(), "Compose(Resize(384, bilinear), CenterCrop(384), " +
			transforms.Normalize(transforms.ImageNetMean, transforms.ImageNetStd).String() + ").WithDecode(exact)"},
	} {
		lf := loaderFlags{model: tc.model}
		if got := lf.transform(photos, "test").String(); got != tc.test {
			t.Errorf("model %q: test chain %s; want %s", tc.model, got, tc.test)
		}
		if got := lf.transform(photos, "train").String(); got != tc.train {
			t.Errorf("model %q: train chain %s; want %s", tc.model, got, tc.train)
		}
	}
}

func TestTrainAugment(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	for _, policy := range []string{"trivialaugment", "randaugment", "autoaugment"} {
		_, errOut, code := stoke(t, "train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1",
			"--val-split", "0.25", "--augment", policy, "--random-erasing", "0.5", "-q")
		if code != 0 {
			t.Errorf("train --augment %s: exit %d: %s", policy, code, errOut)
		}
	}
	for _, args := range [][]string{
		{"--augment", "mixup"}, {"--augment", "randaugment:2"}, {"--augment", "randaugment:2:31"}, {"--augment", "randaugment:x:9"},
		{"--random-erasing", "1.5"}, {"--random-erasing", "-0.1"},
	} {
		_, errOut, code := stoke(t, append([]string{"train", "--data", root, "--size", "8", "--model", "mlp", "--val-split", "0.25", "-q"}, args...)...)
		if code == 0 || !strings.Contains(errOut, args[0]) {
			t.Errorf("train %v: exit %d, stderr %q; want a usage error naming %s", args, code, errOut, args[0])
		}
	}
}

// TestTrainMix: --mixup and --cutmix reach the training loader (the run trains on other numbers,
// and its JSON says what it mixed with); a bad alpha is a usage error naming its flag.
func TestTrainMix(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	args := []string{"train", "--data", root, "--size", "8", "--model", "mlp", "--batch", "4", "--epochs", "1", "--val-split", "0.25", "--json"}
	var plain, mixed trainResult
	out, errOut, code := stoke(t, args...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	lastJSON(t, out, &plain)
	out, errOut, code = stoke(t, append(args, "--mixup", "0.2", "--cutmix", "1")...)
	if code != 0 {
		t.Fatalf("train --mixup 0.2 --cutmix 1: exit %d: %s", code, errOut)
	}
	lastJSON(t, out, &mixed)
	if mixed.MixUp != 0.2 || mixed.CutMix != 1 || plain.MixUp != 0 || plain.CutMix != 0 || mixed.FinalLoss == plain.FinalLoss {
		t.Errorf("mixup %v cutmix %v, loss %v; unmixed run: %v %v, loss %v; want 0.2 1 against 0 0, and another loss", mixed.MixUp, mixed.CutMix,
			mixed.FinalLoss, plain.MixUp, plain.CutMix, plain.FinalLoss)
	}
	for _, bad := range [][]string{{"--mixup", "-0.2"}, {"--cutmix", "NaN"}, {"--mixup", "+Inf"}, {"--cutmix", "x"}} {
		_, errOut, code := stoke(t, append(args[:len(args)-1], bad...)...)
		if code != 2 || !strings.Contains(errOut, strings.TrimLeft(bad[0], "-")) {
			t.Errorf("train %v: exit %d, stderr %q; want a usage error naming %s", bad, code, errOut, bad[0])
		}
	}
}
