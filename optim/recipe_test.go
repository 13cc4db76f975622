package optim_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
)

// TestForRecipe: a recipe's rate given per batch scales linearly with the global batch
// (DeiT's 5e-4*B/512); one without LRBatch keeps its rate; ForRecipe is the recipe's
// optimizer at that rate, and every registered model's recipe names one of Names. RecipeFor
// finds a registered recipe by a name with arguments.
func TestForRecipe(t *testing.T) {
	opt := func(r models.Recipe, batch int) optim.Optimizer {
		t.Helper()
		o, err := optim.ForRecipe(r, batch)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	deit := models.Recipe{Optimizer: "adamw", LR: 5e-4, LRBatch: 512, WeightDecay: 0.05, Batch: 64}
	if got := opt(deit, 1024); got != (optim.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05}) {
		t.Errorf("DeiT's recipe at a batch of 1024: %v; want optim.AdamW at lr 1e-3", got)
	}
	mnv3 := models.Recipe{Optimizer: "rmsprop", LR: 0.064, LRBatch: 1024, WeightDecay: 1e-5, Batch: 128}
	if got := opt(mnv3, 1024); got != (optim.RMSprop{LR: 0.064, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-5}) {
		t.Errorf("torchvision's MobileNetV3 recipe at a batch of 1024: %v; want its train.py's optim.RMSprop at lr 0.064", got)
	}
	if err := models.RegisterRecipe(mnv3, "recipe_test_rmsprop"); err != nil {
		t.Errorf("RegisterRecipe with rmsprop: %v", err)
	}
	if got := opt(models.RecipeFor("resnet8"), 7); got != (optim.SGD{LR: 0.2, Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}) {
		t.Errorf("resnet8's recipe at a batch of 7: %v; want its own rate, 0.2", got)
	}
	for _, name := range models.Names() {
		if r := models.RecipeFor(name); !slices.Contains(optim.Names, r.Optimizer) {
			t.Errorf("%s's recipe names optimizer %q; want one of %v", name, r.Optimizer, optim.Names)
		}
	}
	if _, err := optim.ForRecipe(models.Recipe{Optimizer: "lion", LR: 1, Batch: 1}, 1); !errors.Is(err, optim.ErrUnknown) {
		t.Errorf("a recipe of optimizer lion: %v; want optim.ErrUnknown", err)
	}
	if err := models.RegisterRecipe(deit, "recipe_test_model"); err != nil {
		t.Fatal(err)
	}
	if got := models.RecipeFor("recipe_test_model(a=1)"); got != deit {
		t.Errorf("RecipeFor with arguments: %v; want the registered %v", got, deit)
	}
	for _, r := range []models.Recipe{{LR: 1, Batch: 1}, {Optimizer: "sgd", LR: 1}, {Optimizer: "sgd", Batch: 1}} {
		if err := models.RegisterRecipe(r, "recipe_test_bad"); err == nil {
			t.Errorf("models.RegisterRecipe(%v): no error", r)
		}
	}
	for _, aug := range []string{"none", "randaugment:2", "randaugment:2:31", "mixup", "AutoAugment"} {
		if err := models.RegisterRecipe(models.Recipe{Optimizer: "sgd", LR: 1, Batch: 1, AutoAugment: aug}, "recipe_test_bad"); err == nil {
			t.Errorf("RegisterRecipe with AutoAugment %q: no error", aug)
		}
	}
	ta := models.Recipe{Optimizer: "sgd", LR: 1, Batch: 1, AutoAugment: "trivialaugment", MixUp: 0.2}
	if err := models.RegisterRecipe(ta, "recipe_test_trivialaugment"); err != nil {
		t.Errorf("RegisterRecipe with AutoAugment trivialaugment: %v", err)
	}
	if got, want := models.RecipeFor("recipe_test_trivialaugment").String(), "when asked (stoke train --augment recipe) trivialaugment, mixup 0.2"; !strings.HasSuffix(got, want) {
		t.Errorf("recipe %s; want it to end %q", got, want)
	}
	if err := models.RegisterRecipe(deit, "mlp"); !errors.Is(err, models.ErrRegistered) {
		t.Errorf("RegisterRecipe of a built-in model: %v; want models.ErrRegistered", err)
	}
}
