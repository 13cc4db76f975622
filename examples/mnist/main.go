// Command mnist trains the MNIST MLP (or, with -model cnn, the CNN) on the CPU device with
// Stoke's library API: a loader feeds device batches, a trainer runs the kernels.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

func main() {
	model := flag.String("model", "mlp", "mlp or cnn")
	epochs := flag.Int("epochs", 3, "epochs")
	dir := flag.String("dir", "", "folder of the MNIST files, downloaded there if missing (default: stoke/mnist in the user's cache folder)")
	flag.Parse()

	if *dir == "" {
		cache, err := os.UserCacheDir()
		check(err)
		*dir = filepath.Join(cache, "stoke", "mnist")
	}
	ctx := context.Background()
	check(datasets.DownloadMNIST(ctx, *dir)) // the four original files, once
	spec := "mnist:" + *dir

	dev, err := gpu.Open("cpu")
	check(err)
	defer dev.Close()
	m, err := train.NewModel(*model, train.Shape{C: 1, H: 28, W: 28}, 10)
	check(err)
	recipe := models.RecipeFor(*model) // the settings that reach the MNIST targets
	opt, err := optim.ForRecipe(recipe, recipe.Batch)
	check(err)
	tr, err := train.New(ctx, m, dev, opt, train.Config{Epochs: *epochs, Seed: 1, Schedule: optim.Cosine(recipe.WarmupEpochs), LabelSmoothing: recipe.LabelSmoothing,
		Progress: func(p *train.Progress) {
			if p.Done {
				fmt.Printf("epoch %d: loss %.4f, test accuracy %.4f, %.0f samples/s\n", p.Epoch, p.Result.TrainLoss, p.Result.TestAcc, p.Result.SamplesPerS)
			}
		}})
	check(err)
	defer tr.Close()

	newLoader := func(split string, shuffle bool) *loaders.Loader {
		ds, err := datasets.Open(spec, split)
		check(err)
		l, err := loaders.New(ds, loaders.Config{Batch: recipe.Batch, Shuffle: shuffle, Seed: 1, Device: dev, Stream: tr.Stream()})
		check(err)
		return l
	}
	trainL, testL := newLoader("train", true), newLoader("test", false)
	defer trainL.Close()
	defer testL.Close()

	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
	check(err)
	fmt.Printf("test accuracy %.4f after %d epochs (%.0f samples/s)\n", res.TestAcc, res.Epochs, res.SamplesPerS)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
