package profile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// loaderStats returns the four stages of a Loader epoch that ran for elapsed, with the transform's
// workers busy tBusy and the copy stage busy cBusy of their time.
func loaderStats(elapsed time.Duration, workers int, tBusy, cBusy float64, samples, batch int64) []pipeline.StageStats {
	frac := func(w int, f float64) time.Duration { return time.Duration(f * float64(w) * float64(elapsed)) }
	return []pipeline.StageStats{
		{Name: "sampler", Kind: "source", Workers: 1, Out: samples, Busy: frac(1, 0.02), Blocked: frac(1, 0.98), Elapsed: elapsed},
		{Name: "transform", Kind: "map", Workers: workers, Ordered: true, In: samples, Out: samples,
			Busy: frac(workers, tBusy), Starved: frac(workers, (1-tBusy)/2), Blocked: frac(workers, (1-tBusy)/2), Elapsed: elapsed},
		{Name: "collate", Kind: "batch", Workers: 1, In: samples, Out: samples / batch, Busy: frac(1, 0.01), Starved: frac(1, 0.99), Elapsed: elapsed},
		{Name: "copy", Kind: "map", Workers: 1, In: samples / batch, Out: samples / batch, Busy: frac(1, cBusy), Starved: frac(1, 1-cBusy), Elapsed: elapsed},
	}
}

// synthetic builds a report from loader statistics and a consumer that waited stall of the time.
func synthetic(cores, workers int, tBusy, cBusy, stall, copyBusy float64, pinned bool) *Report {
	const batch, samples = 64, 6400
	el := 4 * time.Second
	r := &Report{
		Flags:  true, // as stoke profile reports
		Device: "cpu:0 (test)", Cores: cores, Batch: batch, Batches: samples / batch, Samples: samples, Seconds: el.Seconds(),
		Stages: append(FromPipeline(loaderStats(el, workers, tBusy, cBusy, samples, batch)),
			Consumer("step", samples/batch, time.Duration(stall*float64(el)), el)),
		Copy:      Copy{Bytes: samples * 3 * 224 * 224, Seconds: copyBusy * el.Seconds(), Busy: copyBusy},
		Stall:     stall,
		Pinned:    pinned,
		Parallel:  "transform",
		Workers:   workers,
		ReadShare: 0.125,
	}
	if r.Copy.Seconds > 0 {
		r.Copy.GBps = float64(r.Copy.Bytes) / r.Copy.Seconds / 1e9
	}
	r.Conclude()
	return r
}

var cases = []struct {
	name  string
	r     *Report
	limit string
	want  string // in the verdict
}{
	{"decode-bound with spare cores", synthetic(8, 2, 0.97, 0.05, 0.41, 0.02, true), "transform", "add workers (--workers auto would use 4 of 8 cores)"},
	{"decode-bound on every core", synthetic(2, 2, 0.98, 0.05, 0.55, 0.02, true), "transform", "all 2 cores are at work"},
	{"step-bound", synthetic(8, 8, 0.20, 0.90, 0.02, 0.01, true), "step", "2 transform workers would keep up"},
	{"copy-bound, not pinned", synthetic(8, 4, 0.40, 0.30, 0.35, 0.85, false), loaders.CopyStage, "not pinned"},
	{"serial copy stage", synthetic(8, 4, 0.40, 0.80, 0.30, 0.10, true), "copy", "it runs on one goroutine"},
	{"latency-bound", synthetic(8, 4, 0.40, 0.20, 0.30, 0.10, true), "latency", "raise --prefetch"},
	{"read-bound", readBound(synthetic(2, 2, 0.99, 0.05, 0.50, 0.02, true)), "transform", "spend 90% of their time reading"},
	{"decode-bound, a program of its own", library(synthetic(8, 2, 0.97, 0.05, 0.41, 0.02, true)), "transform",
		"add workers (Workers: loaders.AutoWorkers would use 4 of 8 cores), or pack to raw+zstd (stoke pack --format raw --compress zstd --max-side 256) " +
			"so that decoding becomes a copy, or lower the transform's output size"},
}

// library is r as a program of its own gets it: its advice names loaders.Config's fields.
func library(r *Report) *Report {
	r.Flags = false
	r.Conclude()
	return r
}

// readBound is r with its parallel stage reading 90% of the time.
func readBound(r *Report) *Report {
	r.ReadShare = 0.9
	r.Conclude()
	return r
}

func TestVerdicts(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.r.Verdict
			if v.Limit != tc.limit {
				t.Errorf("Diagnose(%s).Limit = %q; want %q (text %q)", tc.name, v.Limit, tc.limit, v.Text)
			}
			if !strings.Contains(v.Text, "bottleneck") || !strings.Contains(v.Text, tc.want) {
				t.Errorf("Diagnose(%s).Text = %q; want it to contain \"bottleneck\" and %q", tc.name, v.Text, tc.want)
			}
			if tc.limit != "latency" && !strings.Contains(v.Text, tc.limit) {
				t.Errorf("Diagnose(%s).Text = %q; want it to name %q", tc.name, v.Text, tc.limit)
			}
		})
	}
}

// TestTableGolden compares the whole printed report of every case with testdata/report.golden
// (go test -run TestTableGolden -update rewrites it).
func TestTableGolden(t *testing.T) {
	var got bytes.Buffer
	for _, tc := range cases {
		fmt.Fprintf(&got, "=== %s\n", tc.name)
		if err := tc.r.WriteTable(&got); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("WriteTable output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got.String(), want)
	}
}

func TestAutoWorkers(t *testing.T) {
	row := func(name, kind string, workers int, busy float64) Stage {
		return Stage{Name: name, Kind: kind, Workers: workers, Busy: busy}
	}
	tests := []struct {
		name   string
		stages []Stage
		cores  int
		want   int
		ok     bool
	}{
		{"consumer-bound shrinks", []Stage{row("src", "source", 1, 1), row("t", "map", 8, 0.2), row("step", KindConsumer, 1, 1)}, 8, 2, true},
		{"decode-bound grows to cores", []Stage{row("t", "map", 2, 0.97), row("step", KindConsumer, 1, 0.5)}, 16, 5, true},
		{"capped at cores", []Stage{row("t", "map", 2, 0.97), row("step", KindConsumer, 1, 0.1)}, 4, 4, true},
		{"nothing else busy", []Stage{row("t", "map", 3, 0.9), row("step", KindConsumer, 1, 0.01)}, 6, 6, true},
		{"at least one", []Stage{row("t", "map", 1, 0.01), row("step", KindConsumer, 1, 1)}, 6, 1, true},
		{"a busy source counts", []Stage{row("src", "source", 1, 1), row("t", "map", 2, 0.5)}, 4, 2, true},
		{"no such stage", []Stage{row("step", KindConsumer, 1, 1)}, 4, 0, false},
		{"idle stage", []Stage{row("t", "map", 2, 0), row("step", KindConsumer, 1, 1)}, 4, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AutoWorkers(tc.stages, "t", tc.cores)
			if got != tc.want || ok != tc.ok {
				t.Errorf("AutoWorkers(%s, %d cores) = %d, %v; want %d, %v", tc.name, tc.cores, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestAccumulator(t *testing.T) {
	var a Accumulator
	e1 := loaderStats(time.Second, 2, 0.5, 0.1, 640, 64)
	e2 := loaderStats(3*time.Second, 2, 0.9, 0.1, 640, 64)
	a.Add(e1)
	a.Add(e2)
	got := a.Stats()
	if len(got) != 4 || got[1].Name != "transform" {
		t.Fatalf("Accumulator.Stats() = %+v; want the 4 stages in order", got)
	}
	if got[1].Out != 1280 || got[1].Elapsed != 4*time.Second {
		t.Errorf("summed transform Out, Elapsed = %d, %v; want 1280, 4s", got[1].Out, got[1].Elapsed)
	}
	if b := got[1].BusyFraction(); b < 0.799 || b > 0.801 {
		t.Errorf("summed transform busy = %v; want 0.8 (time-weighted)", b)
	}
}
