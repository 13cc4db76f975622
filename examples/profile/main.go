// Command profile shows how to find the bottleneck of your own data-loading pipeline with the
// profile package. It loads a dataset whose reads are slow (like a network file system) while a
// stand-in training step takes -step per batch, then turns Loader.Stats into the table and
// verdict `stoke profile` prints: every stage's busy, starved and blocked shares, the share of the
// transform time spent reading, the host-to-device copies, how long the consumer waited, and the
// stage that bounds the run with what to change; -trace writes the timeline.
//
//	go run ./examples/profile                          # transform (read, decode, augment) is the bottleneck
//	go run ./examples/profile -workers 8               # more workers: now the step is
//	go run ./examples/profile -read 0 -step 0          # no slow reads: augmenting on every core is
//
// A stage that is busy nearly all the time while the others are starved or blocked is the one that
// bounds the pipeline. `stoke profile --data SPEC --trace t.json --svg t.svg` does the same for any
// dataset from the command line.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/profile"
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
	trace := flag.String("trace", "", "write the timeline as Chrome trace-event JSON to this file")
	flag.Parse()

	rec := profile.NewRecorder(time.Now(), 200_000) // the Loader's Tracer: one span per item, read and copy

	ld, err := loaders.New(slowDataset{n: 100_000, delay: *read}, loaders.Config{
		Batch: 32, Workers: *workers, Shuffle: true, Seed: 1,
		Transform: transforms.Compose(transforms.RandomResizedCrop(64), transforms.HorizontalFlip(0.5)),
		Tracer:    rec,
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

	// The profile package reads the Loader's statistics: every stage's busy, starved and blocked
	// shares, the reads within the transform stage, the copies and the consumer's waits, and
	// names the bottleneck with what to change.
	r := profile.FromLoader(ld.Stats(), "step")
	check(r.WriteTable(os.Stdout))
	if *trace != "" {
		f, err := os.Create(*trace)
		check(err)
		check(profile.WriteTrace(f, rec.Timeline()))
		check(f.Close())
		fmt.Printf("trace: %s (open it in https://ui.perfetto.dev)\n", *trace)
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
