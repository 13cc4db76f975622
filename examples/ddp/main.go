// Command ddp trains the MNIST MLP data-parallel, as PyTorch's DistributedDataParallel does: one
// process per rank, each loading its own part of every epoch, the gradients of every step averaged
// over the ranks, so that every rank holds the same weights after each step.
//
// Under a launcher, each process is one rank and finds its place in the environment:
//
//	go build -o ddp ./examples/ddp
//	torchrun --redirects 1 --tee 1 --nproc_per_node 2 --no_python ./ddp
//
// Without one (`go run ./examples/ddp`), it starts itself -world times on 127.0.0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/stoke-ml/stoke/collective"
	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
)

func main() {
	world := flag.Int("world", 2, "ranks to start when no launcher did")
	epochs := flag.Int("epochs", 1, "epochs")
	dir := flag.String("dir", "", "folder of the MNIST files, downloaded there if missing (default: stoke/mnist in the user's cache folder)")
	batch := flag.Int("batch", 64, "batch per rank (the global batch is world x batch)")
	flag.Parse()
	ctx := context.Background()

	if *dir == "" {
		cache, err := os.UserCacheDir()
		check(err)
		*dir = filepath.Join(cache, "stoke", "mnist")
	}
	// Before the ranks start: the processes this one launches find the files in place (under
	// torchrun every rank downloads, and the files are renamed into place whole).
	check(datasets.DownloadMNIST(ctx, *dir))
	spec := "mnist:" + *dir

	cfg, err := collective.FromEnv() // torchrun's or Slurm's variables
	check(err)
	if cfg.WorldSize <= 1 && *world > 1 {
		check(launch(*world))
		return
	}
	cfg.Timeout = time.Minute // how long a rank waits for the others before it fails
	g, err := collective.Init(ctx, cfg)
	check(err)
	defer g.Close()

	dev, err := gpu.Open("cpu")
	check(err)
	defer dev.Close()
	m, err := train.NewModel("mlp", train.Shape{C: 1, H: 28, W: 28}, 10)
	check(err)
	recipe := models.RecipeFor("mlp")
	opt, err := optim.ForRecipe(recipe, *batch*g.Size())
	check(err)
	tr, err := train.New(ctx, m, dev, opt, train.Config{Epochs: *epochs, Seed: 1, Schedule: optim.Cosine(recipe.WarmupEpochs), LabelSmoothing: recipe.LabelSmoothing, Collective: g})
	check(err)
	defer tr.Close()

	newLoader := func(split string, shuffle bool) *loaders.Loader {
		ds, err := datasets.Open(spec, split)
		check(err)
		l, err := loaders.New(ds, loaders.Config{Batch: *batch, Shuffle: shuffle, Seed: 1, Device: dev, Stream: tr.Stream(),
			Rank: g.Rank(), WorldSize: g.Size()}) // this rank's part of every epoch
		check(err)
		return l
	}
	trainL, testL := newLoader("train", true), newLoader("test", false)
	defer trainL.Close()
	defer testL.Close()

	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
	check(err)
	if g.Rank() == 0 { // every rank has the same result; one reports it
		fmt.Printf("%d ranks, global batch %d: test accuracy %.4f after %d epochs (%.0f samples/s)\n",
			g.Size(), g.Size()**batch, res.TestAcc, res.Epochs, res.SamplesPerS)
	}
}

// launch runs this program once per rank, as torchrun would, and waits for them all.
func launch(world int) error {
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for rank 0's store
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmds := make([]*exec.Cmd, world)
	for r := range cmds {
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), fmt.Sprint("RANK=", r), fmt.Sprint("WORLD_SIZE=", world), fmt.Sprint("LOCAL_RANK=", r),
			fmt.Sprint("LOCAL_WORLD_SIZE=", world), "MASTER_ADDR=127.0.0.1", fmt.Sprint("MASTER_PORT=", port))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		cmds[r] = cmd
	}
	var first error
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil && first == nil {
			first = fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return first
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
