// Command profile shows how to find the bottleneck of your own data-loading pipeline with the
// statistics a Loader keeps. It loads a dataset whose reads are slow (like a network file system)
// while a stand-in training step takes -step per batch, then reads Loader.Stats: every stage's
// busy, starved and blocked shares, the host-to-device copies, and how long the consumer waited.
//
//	go run ./examples/profile                          # transform (read, decode, augment) is the bottleneck
//	go run ./examples/profile -workers 8               # more workers: now the step is
//	go run ./examples/profile -read 0 -step 0          # no slow reads: augmenting on every core is
//
// A stage that is busy nearly all the time while the others are starved or blocked is the one that
// bounds the pipeline. `stoke profile --data SPEC --trace t.json --svg t.svg` prints the same table
// with a verdict for any dataset, and draws the timeline.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"text/tabwriter"
	"time"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/transforms"
)

// slowDataset is a user-defined Dataset: n generated 96 x 96 RGB images in 10 classes, each read
// taking delay.
type slowDataset struct {
	n     int
	delay time.Duration
}

func (d slowDataset) Len() int { return d.n }

func (d slowDataset) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	if i < 0 || i >= d.n {
		return loaders.Sample{}, fmt.Errorf("slow: sample %d: %w", i, loaders.ErrIndex)
	}
	select {
	case <-time.After(d.delay):
	case <-ctx.Done():
		return loaders.Sample{}, ctx.Err()
	}
	const side = 96
	px := make([]byte, side*side*3)
	for p := range px {
		px[p] = byte(p*i + p/7)
	}
	return loaders.Sample{Input: transforms.Input{Pixels: px, H: side, W: side, C: 3}, Label: i % 10}, nil
}

func main() {
	read := flag.Duration("read", 2*time.Millisecond, "time each sample's read takes")
	step := flag.Duration("step", 20*time.Millisecond, "time the stand-in training step takes per batch")
	workers := flag.Int("workers", 2, "loader workers")
	batches := flag.Int("batches", 30, "batches to run")
	flag.Parse()

	ld, err := loaders.New(slowDataset{n: 100_000, delay: *read}, loaders.Config{
		Batch: 32, Workers: *workers, Shuffle: true, Seed: 1,
		Transform: transforms.Compose(transforms.RandomResizedCrop(64), transforms.HorizontalFlip(0.5)),
	})
	check(err)
	defer ld.Close()

	n := 0
	for b, err := range ld.Epoch(context.Background(), 0) {
		check(err)
		time.Sleep(*step) // the training step would run here, on the device
		b.Release()
		if n++; n == *batches {
			break
		}
	}

	st := ld.Stats()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tworkers\titems\tbusy\tstarved\tblocked")
	for _, s := range st.Stages {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f%%\t%.0f%%\t%.0f%%\n", s.Name, s.Workers, s.Out, 100*s.BusyFraction(), 100*s.StarvedFraction(), 100*s.BlockedFraction())
	}
	tw.Flush()
	fmt.Printf("copies: %.1f MB at %.2f GB/s; the consumer waited %.0f%% of the time\n", float64(st.CopyBytes)/1e6, st.CopyGBps(), 100*st.StallFraction())

	// The sampler's busy time is mostly waiting for free host slots, so it is left out.
	if st.StallFraction() < 0.1 {
		fmt.Println("the step is the bottleneck: loading keeps up")
		return
	}
	var top pipeline.StageStats
	for _, s := range st.Stages {
		if s.Kind != "source" && s.BusyFraction() >= top.BusyFraction() {
			top = s
		}
	}
	fmt.Printf("%s is the bottleneck: %d workers %.0f%% busy while the consumer waits\n", top.Name, top.Workers, 100*top.BusyFraction())
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
