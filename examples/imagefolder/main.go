// Command imagefolder trains a small CNN on any folder of photos laid out like torchvision's
// ImageFolder (DIR/CLASS/IMAGE.jpg, with DIR/train and DIR/test used when they exist), or, with
// -bench, measures how fast the loader alone delivers batches to the device.
//
//	go run ./examples/imagefolder -data ~/photos -size 64 -epochs 3
//	go run ./examples/imagefolder -data ~/photos -bench -size 224 -workers 4
//
// Decoding, random crops and flips run on the loader's workers straight into pinned host slots;
// images cross to the device as uint8 and are normalized there.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/gpu"
	_ "github.com/stoke-ml/stoke/gpu/cuda" // --device cuda, in a -tags cuda build
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

func main() {
	data := flag.String("data", "", "image folder (required)")
	device := flag.String("device", "cpu", "cpu, cuda or cuda:N")
	size := flag.Int("size", 64, "image side the network sees")
	batch := flag.Int("batch", 64, "samples per batch")
	workers := flag.Int("workers", 0, "loader workers (0: one per core)")
	epochs := flag.Int("epochs", 3, "epochs")
	lr := flag.Float64("lr", 0.01, "peak learning rate (SGD with Nesterov momentum, cosine schedule)")
	bench := flag.Bool("bench", false, "only measure the loader")
	flag.Parse()
	if *data == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dev, err := gpu.Open(*device)
	check(err)
	defer dev.Close()

	// The trainer owns the compute stream; the loaders order their copies before its kernels.
	var tr *train.Trainer
	var stream gpu.Stream
	if !*bench {
		ds, err := datasets.Open(*data, "train")
		check(err)
		classes := loaders.Describe(ds).NumClasses
		m, err := train.NewModel("cnn", train.Shape{C: 3, H: *size, W: *size}, classes)
		check(err)
		opt := optim.SGD{LR: *lr, Momentum: 0.9, Nesterov: true}
		tr, err = train.New(ctx, m, dev, opt, train.Config{Epochs: *epochs, Schedule: optim.Cosine(0.2), Seed: 1,
			Progress: func(p *train.Progress) {
				if p.Done {
					fmt.Printf("epoch %d: loss %.4f, test accuracy %.3f, %.0f images/s, waited for data %.0f%% of the time\n",
						p.Epoch, p.Result.TrainLoss, p.Result.TestAcc, p.Result.SamplesPerS, 100*p.Result.DataWaitFraction)
				}
			}})
		check(err)
		defer tr.Close()
		stream = tr.Stream()
	}
	newLoader := func(split string, tf *transforms.Chain, shuffle bool) *loaders.Loader {
		ds, err := datasets.Open(*data, split)
		check(err)
		l, err := loaders.New(ds, loaders.Config{Batch: *batch, Workers: *workers, Shuffle: shuffle, Seed: 1,
			Transform: tf, Device: dev, Stream: stream})
		check(err)
		return l
	}
	trainL := newLoader("train", transforms.Train(*size), true)
	defer trainL.Close()

	if *bench {
		for epoch := range *epochs {
			start, n := time.Now(), 0
			for b, err := range trainL.Epoch(ctx, epoch) {
				check(err)
				n += b.N
				b.Release()
			}
			st := trainL.Stats()
			fmt.Printf("epoch %d: %.0f images/s, copies at %.2f GB/s, host slots pinned: %v\n",
				epoch, float64(n)/time.Since(start).Seconds(), st.CopyGBps(), st.Pool.Pinned)
		}
		return
	}
	testL := newLoader("test", transforms.Eval(*size), false)
	defer testL.Close()
	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
	check(err)
	fmt.Printf("test accuracy %.3f after %d epochs\n", res.TestAcc, res.Epochs)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
