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
