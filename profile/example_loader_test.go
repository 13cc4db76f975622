package profile_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/profile"
	"github.com/stoke-ml/stoke/transforms"
)

// Profiling a Loader from a program: a Recorder as the Loader's Tracer records the timeline, and
// FromLoader turns the Loader's Stats into the stage table and the verdict. Here the consumer's
// step (100 ms a batch) is much slower than loading these small images, so the verdict names it.
func ExampleFromLoader() {
	samples := make([]loaders.Sample, 128)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: bytes.Repeat([]byte{byte(i)}, 3*40*40), H: 40, W: 40, C: 3}, Label: i % 10}
	}
	ds := loaders.NewMemory(loaders.Info{Name: "squares", NumClasses: 10, Shape: transforms.Shape{C: 3, H: 40, W: 40}}, samples)

	rec := profile.NewRecorder(time.Now(), 100_000)
	ld, err := loaders.New(ds, loaders.Config{Batch: 16, Workers: 2, Transform: transforms.Compose(transforms.RandomCrop(32, 4)), Tracer: rec})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ld.Close()
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		time.Sleep(100 * time.Millisecond) // the training step
		b.Release()
	}

	r := profile.FromLoader(ld.Stats(), "train step")
	r.WriteTable(os.Stderr) // the table `stoke profile` prints
	verdict, _, _ := strings.Cut(r.Verdict.Text, ":")
	fmt.Printf("%d batches; bottleneck: %s (%s)\n", r.Batches, r.Verdict.Limit, verdict)

	var trace, svg bytes.Buffer // in real use: files, opened in Perfetto and a browser
	tl := rec.Timeline()
	if err := profile.WriteTrace(&trace, tl); err != nil {
		fmt.Println(err)
	}
	if err := profile.WriteSVG(&svg, tl); err != nil {
		fmt.Println(err)
	}
	fmt.Println(strings.Contains(trace.String(), "h2d copy"), strings.Contains(trace.String(), "read 0"), strings.HasPrefix(svg.String(), "<svg"))
	// Output:
	// 8 batches; bottleneck: train step (the pipeline outpaces the step)
	// true true true
}
