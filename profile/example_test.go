package profile_test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/pipeline"
	"github.com/stoke-ml/stoke/profile"
)

// A loader whose two decode workers are always busy while the training step waits for data.
func ExampleDiagnose() {
	el := 10 * time.Second
	stats := []pipeline.StageStats{
		{Name: "transform", Kind: "map", Workers: 2, Out: 5000, Busy: 19 * time.Second, Starved: time.Second, Elapsed: el},
		{Name: "copy", Kind: "map", Workers: 1, Out: 78, Busy: time.Second / 10, Starved: 9 * time.Second, Elapsed: el},
	}
	r := &profile.Report{
		Stages:   append(profile.FromPipeline(stats), profile.Consumer("train step", 78, 4*time.Second, el)),
		Stall:    0.4,
		Cores:    8,
		Parallel: "transform",
		Workers:  2,
		Pinned:   true,
	}
	r.Conclude()
	fmt.Println(strings.ReplaceAll(r.Verdict.Text, "; ", ";\n")) // the diagnosis, then the remedies
	// Output:
	// transform is the bottleneck: 2 workers 95% busy, and the device waits 40% of each step for data;
	// add workers (Workers: loaders.AutoWorkers would use 4 of 8 cores), or pack to raw+zstd (stoke pack --format raw --compress zstd --max-side 256) so that decoding becomes a copy, or lower the transform's output size
}

// A Recorder collects spans (a pipeline gives it one per item and worker through
// pipeline.WithTracer) and counter points; WriteTrace turns them into a file that Perfetto opens.
func ExampleWriteTrace() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	rec := profile.NewRecorder(t0, 100)
	rec.Span("decode", 0, 7, ms(0), ms(3)) // as pipeline.Tracer: item 7 on worker 0
	rec.Add("consumer", "step", "step 0", ms(3), ms(5))
	rec.Count("busy workers: decode", ms(3), 1)
	tl := rec.Timeline()
	fmt.Println(tl.Tracks, tl.Counters)
	var buf bytes.Buffer
	if err := profile.WriteTrace(&buf, tl); err != nil {
		fmt.Println(err)
	}
	fmt.Println(strings.Count(buf.String(), `"ph":"X"`), "slices")
	// Output:
	// [decode 0 consumer] [busy workers: decode]
	// 2 slices
}
