// Command customdataset shows how to plug your own data into Stoke: a Dataset over images listed
// in a CSV file of "path,label" lines, iterated through a Loader that decodes, augments and copies
// the batches to a device, with the throughput printed at the end.
//
//	go run ./examples/customdataset -csv images.csv -size 112 -batch 64 -workers 4 -epochs 2
//	go run ./examples/customdataset -demo      # writes a small CSV and images to a temporary folder first
//
// Paths in the CSV are relative to the CSV file's folder unless absolute. A header line "path,label"
// is allowed.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	_ "github.com/stoke-ml/stoke/gpu/cuda" // --device cuda, in a -tags cuda build
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// csvDataset is the user-defined Dataset: Len and Sample are all a Loader needs. Sample is called
// from many workers at once; it only reads immutable fields, so it is safe for concurrent use.
type csvDataset struct {
	name    string
	paths   []string
	labels  []int
	classes int
}

// openCSV reads the "path,label" list.
func openCSV(file string) (*csvDataset, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 2
	d := &csvDataset{name: file}
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if line == 1 && rec[0] == "path" {
			continue
		}
		label, err := strconv.Atoi(rec[1])
		if err != nil || label < 0 {
			return nil, fmt.Errorf("%s line %d: label %q is not a non-negative integer", file, line, rec[1])
		}
		p := rec[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		d.paths = append(d.paths, p)
		d.labels = append(d.labels, label)
		d.classes = max(d.classes, label+1)
	}
	if len(d.paths) == 0 {
		return nil, fmt.Errorf("%s: %w", file, loaders.ErrEmpty)
	}
	return d, nil
}

func (d *csvDataset) Len() int { return len(d.paths) }

// Info is optional: it names the dataset in errors and bounds the labels.
func (d *csvDataset) Info() loaders.Info {
	return loaders.Info{Name: d.name, NumClasses: d.classes}
}

func (d *csvDataset) Sample(_ context.Context, i int) (loaders.Sample, error) {
	if i < 0 || i >= len(d.paths) {
		return loaders.Sample{}, &loaders.SampleError{Dataset: d.name, Index: i, Err: loaders.ErrIndex}
	}
	b, err := os.ReadFile(d.paths[i])
	if err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: d.name, Index: i, Key: d.paths[i], Err: err}
	}
	return loaders.Sample{Input: transforms.Input{Encoded: b}, Label: d.labels[i], Key: d.paths[i]}, nil
}

// writeDemo writes n small PNG images of 3 classes and their CSV into dir.
func writeDemo(dir string, n int) (string, error) {
	var lines []byte
	lines = append(lines, "path,label\n"...)
	for i := range n {
		img := image.NewNRGBA(image.Rect(0, 0, 64+i%7, 48+i%5))
		for y := range img.Rect.Dy() {
			for x := range img.Rect.Dx() {
				img.SetNRGBA(x, y, color.NRGBA{byte(x * (i%3 + 1)), byte(y * 4), byte(i * 9), 255})
			}
		}
		name := fmt.Sprintf("img%03d.png", i)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		err = errors.Join(png.Encode(f, img), f.Close())
		if err != nil {
			return "", err
		}
		lines = fmt.Appendf(lines, "%s,%d\n", name, i%3)
	}
	file := filepath.Join(dir, "images.csv")
	return file, os.WriteFile(file, lines, 0o644)
}

func main() {
	csvFile := flag.String("csv", "", "CSV file of path,label lines")
	demo := flag.Bool("demo", false, "write a demo CSV with 200 images to a temporary folder and use it")
	size := flag.Int("size", 112, "output image side (RandomResizedCrop)")
	batch := flag.Int("batch", 64, "batch size")
	workers := flag.Int("workers", 0, "decode workers (0: one per CPU)")
	epochs := flag.Int("epochs", 2, "epochs")
	device := flag.String("device", "cpu", `device: "cpu" or "cuda"`)
	onError := flag.String("on-error", "fail", "bad samples: fail or skip")
	flag.Parse()
	if err := run(*csvFile, *demo, *size, *batch, *workers, *epochs, *device, *onError); err != nil {
		fmt.Fprintln(os.Stderr, "customdataset:", err)
		os.Exit(1)
	}
}

func run(csvFile string, demo bool, size, batch, workers, epochs int, device, onError string) error {
	if demo {
		dir, err := os.MkdirTemp("", "stoke-customdataset-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if csvFile, err = writeDemo(dir, 200); err != nil {
			return err
		}
	}
	if csvFile == "" {
		return errors.New("give -csv FILE or -demo")
	}
	ds, err := openCSV(csvFile)
	if err != nil {
		return err
	}
	policy, err := loaders.ParseErrorPolicy(onError)
	if err != nil {
		return err
	}
	dev, err := gpu.Open(device)
	if err != nil {
		return err
	}
	defer dev.Close()
	ld, err := loaders.New(ds, loaders.Config{
		Batch: batch, Workers: workers, Shuffle: true, Seed: 1, OnError: policy,
		Transform: transforms.Train(size), Device: dev,
	})
	if err != nil {
		return err
	}
	defer ld.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	images := 0
	for e := range epochs {
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			images += b.N // a training step would use b.Images and b.Labels here
			b.Release()
		}
	}
	secs := time.Since(start).Seconds()
	st := ld.Stats()
	fmt.Printf("%d images of %v in %.2f s: %.0f images/s, %d skipped, consumer stalled %.0f%% of the time\n",
		images, ld.Shape(), secs, float64(images)/secs, st.Skipped, 100*st.StallFraction())
	for _, s := range st.Stages {
		fmt.Printf("  %-10s workers %2d  busy %3.0f%%  starved %3.0f%%  blocked %3.0f%%\n",
			s.Name, s.Workers, 100*s.BusyFraction(), 100*s.StarvedFraction(), 100*s.BlockedFraction())
	}
	return nil
}
