package cli

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/profile"
)

func TestProfile(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		consumer string
		tracks   []string // span tracks the trace must have, besides one per transform worker and the copy stream
	}{
		{"loader", []string{"--workers", "2"}, "step", []string{"consumer", "compute stream"}},
		{"train", []string{"--workers", "2", "--train", "--model", "mlp"}, "train step", []string{"consumer"}},
		{"auto workers", []string{"--workers", "auto"}, "step", []string{"consumer", "compute stream"}},
		{"augmented", []string{"--workers", "2", "--augment", "trivialaugment", "--random-erasing", "0.25", "--mixup", "0.2"}, "step",
			[]string{"consumer", "compute stream"}},
		{"the recipe's augmentation", []string{"--workers", "2", "--train", "--model", "mlp", "--augment", "recipe"}, "train step", []string{"consumer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			root := photoFolder(t, 2, 6, nil)
			dir := t.TempDir()
			trace, svg := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.svg")
			args := append([]string{"profile", "--data", root, "--size", "16", "--batch", "4", "--batches", "5",
				"--trace", trace, "--svg", svg, "--json", "-q"}, tc.args...)
			out, errOut, code := stoke(t, args...)
			if code != 0 {
				t.Fatalf("stoke %v exit %d: %s", args, code, errOut)
			}
			if strings.Count(out, "\n") != 1 {
				t.Errorf("profile --json -q stdout = %q; want only the JSON line", out)
			}
			var r profile.Report
			lastJSON(t, out, &r)
			if r.Batches != 5 || r.Samples != 20 {
				t.Errorf("profile batches, samples = %d, %d; want 5, 20 (12 samples an epoch: the run spans epochs)", r.Batches, r.Samples)
			}
			var names []string
			for _, s := range r.Stages {
				names = append(names, s.Name)
			}
			if want := []string{"sampler", "transform", "collate", "copy", tc.consumer}; !slices.Equal(names, want) {
				t.Errorf("profile stages = %q; want %q", names, want)
			}
			if !strings.Contains(r.Verdict.Text, "bottleneck") || r.Verdict.Limit == "" {
				t.Errorf("profile verdict = %+v; want a limit and the word bottleneck", r.Verdict)
			}
			// The loader copies ahead of the consumer: at least the 5 batches consumed were copied.
			if perSample := int64(3*16*16 + 4); r.Workers < 1 || r.AutoWorkers < 1 || r.Copy.Bytes < 20*perSample || r.Copy.Bytes%(4*perSample) != 0 {
				t.Errorf("profile workers %d, auto %d, copied %d bytes; want >= 1, >= 1, whole batches of %d bytes, at least 5", r.Workers, r.AutoWorkers, r.Copy.Bytes,
					4*perSample)
			}
			perTrack := checkTrace(t, trace, tc.tracks)
			// One lane per transform worker that ran (with 12 samples an epoch, the scheduler may
			// give them all to one), and the reads on lanes of the same workers; none beyond.
			transformSpans, readSpans := 0, 0
			for w := range r.Workers + 1 {
				n, ok := perTrack[fmt.Sprintf("transform %d", w)]
				if ok && w >= r.Workers {
					t.Errorf("trace has track \"transform %d\"; want none beyond the %d workers", w, r.Workers)
				}
				transformSpans += n
				readSpans += perTrack[fmt.Sprintf("read %d", w)]
			}
			if readSpans != transformSpans {
				t.Errorf("trace has %d read slices and %d transform slices; want one read per sample transformed", readSpans, transformSpans)
			}
			// Every sample of every batch consumed was transformed (the loader may run ahead).
			if transformSpans < 20 {
				t.Errorf("trace has %d transform slices; want one per sample, at least 20", transformSpans)
			}
			// One slice per copy: the 5 batches consumed, and perhaps the third of the second
			// epoch's 3 batches, copied ahead.
			if n := perTrack["copy stream"]; n < 5 || n > 6 {
				t.Errorf("trace has %d slices on the copy stream; want one per copy, 5 or 6", n)
			}
			checkSVG(t, svg)
		})
	}
}

// checkTrace parses a trace-event file, checks it names every track in want and has slices, and
// returns the number of slices on each track.
func checkTrace(t *testing.T, path string, want []string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
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
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	tracks := map[string]bool{}
	names := map[int]string{}
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "M" && ev.Name == "thread_name" {
			name, _ := ev.Args["name"].(string)
			tracks[name], names[ev.Tid] = true, name
		}
	}
	slicesN := 0
	perTrack := map[string]int{}
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "X" {
			slicesN++
			perTrack[names[ev.Tid]]++
		}
	}
	for _, w := range want {
		if !tracks[w] {
			t.Errorf("trace tracks %v; want %q among them", tracks, w)
		}
	}
	if slicesN < 20 {
		t.Errorf("trace has %d slices; want at least one per sample read (20)", slicesN)
	}
	return perTrack
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	elems := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if elems == 0 && se.Name.Local != "svg" {
				t.Fatalf("%s root = %q; want svg", path, se.Name.Local)
			}
			elems++
		}
	}
	if elems < 20 {
		t.Errorf("%s has %d elements; want a picture", path, elems)
	}
}

func TestProfileReport(t *testing.T) {
	root := photoFolder(t, 2, 4, nil)
	out, errOut, code := stoke(t, "profile", "--data", root, "--size", "16", "--batch", "4", "--batches", "2", "--workers", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"stage", "transform", "items/s", "busy", "starved", "blocked", "GB/s", "stalled", "verdict: ", "bottleneck"} {
		if !strings.Contains(out, want) {
			t.Errorf("profile stdout = %q; want it to contain %q", out, want)
		}
	}
}

func TestProfileUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"profile"}, 2, "--data is required"},
		{[]string{"profile", "--data", "x", "--batches", "0"}, 2, "--batches 0"},
		{[]string{"profile", "--data", "x", "--augment", "sharpen"}, 2, "--augment"},
		{[]string{"profile", "--data", "x", "--mixup", "-1"}, 2, "--mixup -1"},
		{[]string{"profile", "--data", "x", "--workers", "many"}, 2, `"many": want a number >= 0 or auto`},
		{[]string{"profile", "--data", "/nonexistent/folder"}, 1, "stoke profile: "},
		{[]string{"profile", "--help"}, 0, "--trace"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := stoke(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("stoke %v = exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
			}
		})
	}
}
