// Command external uses Stoke as a program in another module would: only exported packages,
// through a replace directive (../.. here; scripts/external-check.sh copies this directory out of
// the repository and points the replace at the checkout). It exercises the extension points a
// user reaches for and exits non-zero if one of them misbehaves:
//
//   - a user-written transform (Invert) composed with the package's random ones, whose per-sample
//     randomness comes from the Loader, so the batches do not depend on the worker count;
//   - profiling a Loader (Workers: loaders.AutoWorkers) with the public profile package: the
//     stage table, the verdict, the timeline as a trace and an SVG;
//   - the pipeline engine's worker index, for per-worker state;
//   - the loaders' data extension points (data.go): a user StreamSource with a shuffle buffer
//     resumed mid-epoch, a user Sampler, multi-label targets with a collate hook;
//   - the model side (model.go): a model of one's own of the layers of package layers (modules of
//     package nn, written as forward passes) and a user optimizer trained through Loaders, and its
//     checkpoint loaded into the same model built again; a registered model whose arguments are
//     a Go struct (tiny-transformer), and its misfit arguments refused naming the op;
//   - a registered model of those layers (se-net, layers.go) trained, resumed and served;
//   - a stoke of its own (stoke.go, ./cmd/stoke): the command line built with package layers
//     trains, predicts and exports a model holding them, and agrees with the library.
//
// Run it with `go run .` in this directory, or `make external` from the repository root.
// `go run . -folder DIR` only writes the image folder the stoke step trains on into DIR, for
// ./cmd/stoke to be run on by hand (scripts/external-check.sh does).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/profile"
	"github.com/stoke-ml/stoke/transforms"
)

func main() {
	folder := flag.String("folder", "", "only write the stoke step's image folder into this folder")
	flag.Parse()
	if *folder != "" {
		if err := writeColours(*folder, 48); err != nil {
			fmt.Fprintf(os.Stderr, "external: %v\n", err)
			os.Exit(1)
		}
		return
	}
	ctx := context.Background()
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"user transform", userTransform},
		{"profile", profileLoader},
		{"pipeline worker index", workerIndex},
		{"data: stream, sampler, targets", func(context.Context) error { return exerciseData() }}, // data.go
		{"model: user layers, user optimizer, checkpoint", userModel},                             // model.go
		{"model: a transformer block, arguments as a struct", transformerModel},                   // model.go
		{"model: a registered model of one's own layers", forwardOnlyLayers},                      // layers.go
		{"a stoke of its own: train, predict, export", ownStoke},                                  // stoke.go
	} {
		if err := step.run(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "external: %s: %v\n", step.name, err)
			os.Exit(1)
		}
		fmt.Printf("ok: %s\n", step.name)
	}
}

// Invert is a user transform: with probability P it inverts the output pixels (v -> 255-v).
type Invert struct{ P float64 }

func (t Invert) String() string { return fmt.Sprintf("Invert(%g)", t.P) }

func (t Invert) Plan(p *transforms.Plan, r *rand.Rand) error {
	if r == nil || r.Float64() >= t.P {
		return nil
	}
	p.Pixels(func(m transforms.Image) {
		for i, v := range m.Pix {
			m.Pix[i] = 255 - v
		}
	})
	return nil
}

// squares is an in-memory dataset of n 40x40 RGB images, each one grey level.
func squares(n int) *loaders.Memory {
	samples := make([]loaders.Sample, n)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: bytes.Repeat([]byte{byte(10 + i)}, 40*40*3), H: 40, W: 40, C: 3}, Label: i % 10}
	}
	return loaders.NewMemory(loaders.Info{Name: "squares", NumClasses: 10, Shape: transforms.Shape{C: 3, H: 40, W: 40}}, samples)
}

// epochImages runs one epoch of a Loader over ds with the given workers and returns the images.
func epochImages(ctx context.Context, ds loaders.Dataset, tf *transforms.Chain, workers int) ([]byte, error) {
	ld, err := loaders.New(ds, loaders.Config{Batch: 8, Workers: workers, Shuffle: true, Seed: 7, Transform: tf})
	if err != nil {
		return nil, err
	}
	defer ld.Close()
	var out []byte
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			return nil, err
		}
		img, ok := gpu.HostBytes(b.Images)
		if !ok {
			return nil, fmt.Errorf("CPU device buffers are not host memory")
		}
		out = append(out, img[:b.N*b.Shape.Len()]...)
		b.Release()
	}
	return out, nil
}

func userTransform(ctx context.Context) error {
	tf := transforms.Compose(transforms.RandomCrop(32, 4), transforms.HorizontalFlip(0.5), transforms.VerticalFlip(0.5),
		transforms.RandomRotate90(), Invert{P: 0.5}, transforms.RandomRotation(10))
	ds := squares(64)
	one, err := epochImages(ctx, ds, tf, 1)
	if err != nil {
		return err
	}
	three, err := epochImages(ctx, ds, tf, 3)
	if err != nil {
		return err
	}
	if !bytes.Equal(one, three) {
		return fmt.Errorf("%v: batches differ between 1 and 3 workers: per-sample randomness is not the sample's", tf)
	}
	// Every image is one grey level g (10..73) where no padding or rotation reached: Invert
	// turned about half of them into 255-g.
	inverted := 0
	const size = 3 * 32 * 32
	for k := 0; k+size <= len(one); k += size {
		if slices.Max(one[k:k+size]) > 128 {
			inverted++
		}
	}
	if n := len(one) / size; inverted < n/5 || inverted > n-n/5 {
		return fmt.Errorf("%d of %d images inverted; want about half", inverted, n)
	}
	fmt.Printf("%v: %d of %d images inverted, same batches with 1 and 3 workers\n", tf, inverted, len(one)/size)
	return nil
}

func profileLoader(ctx context.Context) error {
	rec := profile.NewRecorder(time.Now(), 100_000)
	ld, err := loaders.New(squares(256), loaders.Config{Batch: 16, Workers: loaders.AutoWorkers, Tracer: rec,
		Transform: transforms.Compose(transforms.RandomCrop(32, 4), transforms.HorizontalFlip(0.5))})
	if err != nil {
		return err
	}
	defer ld.Close()
	// The busy-workers counter tracks of the timeline, sampled while the epoch runs.
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { profile.SampleBusy(sctx, rec, ld.Stats, 5*time.Millisecond); close(sampled) }()
	var copied int64
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			stop()
			return err
		}
		copied += int64(b.N*b.Shape.Len() + 4*b.N) // images and int32 labels
		time.Sleep(2 * time.Millisecond)           // the training step
		b.Release()
	}
	stop()
	<-sampled
	st := ld.Stats()
	if st.CopyBytes != copied {
		return fmt.Errorf("Stats().CopyBytes = %d after the epoch; want the %d bytes copied", st.CopyBytes, copied)
	}
	r := profile.FromLoader(st, "step")
	if err := r.WriteTable(os.Stdout); err != nil {
		return err
	}
	if r.Verdict.Limit == "" || r.Workers != ld.Workers() {
		return fmt.Errorf("report: verdict %q, %d workers; want a verdict for the %d workers AutoWorkers chose", r.Verdict.Limit, r.Workers, ld.Workers())
	}
	dir, err := os.MkdirTemp("", "stoke-external-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tl := rec.Timeline()
	for name, write := range map[string]func(*os.File) error{
		"trace.json":   func(f *os.File) error { return profile.WriteTrace(f, tl) },
		"timeline.svg": func(f *os.File) error { return profile.WriteSVG(f, tl) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if len(tl.Counters) == 0 {
		return fmt.Errorf("no counter tracks sampled")
	}
	fmt.Printf("%d spans on %d tracks and %d counter tracks written as a trace and an SVG\n", len(tl.Spans), len(tl.Tracks), len(tl.Counters))
	return nil
}

func workerIndex(ctx context.Context) error {
	const workers = 3
	scratch := make([][]int, workers) // per-worker state, no lock: one call per worker at a time
	p := pipeline.New()
	src := pipeline.FromSlice(p, "numbers", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	sq := pipeline.Map(p, "square", src, func(ctx context.Context, v int) (int, error) {
		w := pipeline.WorkerIndex(ctx)
		scratch[w] = append(scratch[w], v)
		return v * v, nil
	}, pipeline.Workers(workers), pipeline.Ordered(true))
	sum := 0
	for v, err := range pipeline.Iter(ctx, p, sq) {
		if err != nil {
			return err
		}
		sum += v
	}
	seen := 0
	for _, s := range scratch {
		seen += len(s)
	}
	if sum != 385 || seen != 10 {
		return fmt.Errorf("sum %d over %d items; want 385 over 10", sum, seen)
	}
	return nil
}
