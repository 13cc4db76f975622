package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// TestRecorderTracesLoader records a Loader's epoch with a Recorder as its Config.Tracer and checks
// the trace: one lane per transform worker with a slice per sample, and a copy lane with a slice
// per batch.
func TestRecorderTracesLoader(t *testing.T) {
	defer goleak.VerifyNone(t)
	const n, batch, workers = 24, 4, 2
	samples := make([]loaders.Sample, n)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: bytes.Repeat([]byte{byte(i)}, 12), H: 2, W: 2, C: 3}, Label: i % 2}
	}
	ds := loaders.NewMemory(loaders.Info{Name: "px", NumClasses: 2, Shape: transforms.Shape{C: 3, H: 2, W: 2}}, samples)
	rec := NewRecorder(time.Now(), 10_000)
	ld, err := loaders.New(ds, loaders.Config{Batch: batch, Workers: workers, Tracer: rec, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range ld.Epoch(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if err := ld.Close(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, rec.Timeline()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	names := map[int]string{}
	perTrack := map[string]int{}
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				names[ev.Tid], _ = ev.Args["name"].(string)
			}
		case "X", "i":
			perTrack[names[ev.Tid]]++
		}
	}
	transformed := 0
	for track, k := range perTrack {
		if !strings.HasPrefix(track, "transform ") {
			continue
		}
		var w int
		if _, err := fmt.Sscanf(track, "transform %d", &w); err != nil || w < 0 || w >= workers {
			t.Errorf("trace track %q; want transform lanes 0..%d", track, workers-1)
		}
		transformed += k
	}
	if transformed != n {
		t.Errorf("transform slices = %d; want %d, one per sample (tracks %v)", transformed, n, perTrack)
	}
	copyLane := loaders.CopyStage + " 0"
	if got := perTrack[copyLane]; got != n/batch {
		t.Errorf("%q slices = %d; want %d, one per batch (tracks %v)", copyLane, got, n/batch, perTrack)
	}
}

// slowStep is a user's transform whose pixel step costs about a millisecond of CPU.
type slowStep struct{}

func (slowStep) String() string { return "SlowStep" }

func (slowStep) Plan(p *transforms.Plan, _ *rand.Rand) error {
	p.Pixels(func(im transforms.Image) {
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
	})
	return nil
}

// TestFromLoaderParts: a loader of raw in-memory pixels whose own slow transform bounds it (the
// issue's library program) gets a report that names that transform as where the workers' time
// goes, and advice that follows from it: nothing of packing or decoding, which it does not do.
func TestFromLoaderParts(t *testing.T) {
	samples := make([]loaders.Sample, 64)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: bytes.Repeat([]byte{byte(i)}, 3*32*32), H: 32, W: 32, C: 3}, Label: i % 2}
	}
	ds := loaders.NewMemory(loaders.Info{Name: "px", NumClasses: 2, Shape: transforms.Shape{C: 3, H: 32, W: 32}}, samples)
	ld, err := loaders.New(ds, loaders.Config{Batch: 8, Workers: 1, Transform: transforms.Compose(transforms.HorizontalFlip(0.5), slowStep{}),
		Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	for b, err := range ld.Epoch(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	r := FromLoader(ld.Stats(), "step")
	names := map[string]float64{}
	for _, p := range r.Parts {
		names[p.Name] = p.Share
	}
	if _, ok := names["read"]; !ok || len(r.Parts) < 4 || names["SlowStep"] < 0.8 {
		t.Fatalf("parts %+v; want read, decode, resample and SlowStep, the last at over 80%%", r.Parts)
	}
	if r.Verdict.Limit != loaders.TransformStage || !strings.Contains(r.Verdict.Text, "SlowStep takes") || strings.Contains(r.Verdict.Text, "pack") {
		t.Errorf("verdict %q; want the transform stage, naming SlowStep, without packing", r.Verdict.Text)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil || !strings.Contains(b.String(), "transform time: read ") || !strings.Contains(b.String(), "SlowStep ") {
		t.Errorf("table (%v):\n%s\nwant a line of the transform stage's parts", err, b.String())
	}
}
