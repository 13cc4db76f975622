package profile

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stoke-ml/stoke/pipeline"
)

// Stage is one row of the stage table: what one stage did over the profiled run. Busy, Starved and
// Blocked are shares (0..1) of the stage's worker time.
type Stage struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"` // a pipeline kind ("source", "map", "batch", ...) or "consumer"
	Workers int     `json:"workers"`
	Items   int64   `json:"items"`
	PerS    float64 `json:"items_per_s"`
	Busy    float64 `json:"busy"`
	Starved float64 `json:"starved"`
	Blocked float64 `json:"blocked"`
}

// KindConsumer marks the row of the loop that takes the batches (a training step, or the
// normalization a benchmark runs): busy while it works, starved while it waits for data.
const KindConsumer = "consumer"

// Copy is the device side of the run: the host-to-device copies and how busy they kept the copy
// engine (CopyTime over wall time).
type Copy struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gbps"`
	Busy    float64 `json:"busy"`
}

// Report is everything `stoke profile` prints. Stages lists the loader's stages in pipeline order,
// then the consumer.
type Report struct {
	Device  string  `json:"device"`
	Cores   int     `json:"cores"`
	Batch   int     `json:"batch"`
	Batches int64   `json:"batches"`
	Samples int64   `json:"samples"`
	Seconds float64 `json:"seconds"`
	Stages  []Stage `json:"stages"`
	Copy    Copy    `json:"copy"`
	// Stall is the share of the consumer's time spent waiting for the next batch.
	Stall  float64 `json:"stall_fraction"`
	Pinned bool    `json:"pinned"`
	// Parallel names the stage whose worker count is tunable (loaders.TransformStage in a Loader) and
	// AutoWorkers is what AutoWorkers suggests for it (0: no suggestion).
	Parallel    string `json:"parallel_stage"`
	Workers     int    `json:"workers"`
	AutoWorkers int    `json:"auto_workers"`
	// ReadShare is the share of the parallel stage's busy time spent reading samples (the rest is
	// decoding and augmenting them); 0 when not measured.
	ReadShare float64 `json:"read_share"`
	// Parts are where the parallel stage's busy time went: "read" (Dataset.Sample), "decode",
	// "resample" and each transform's pixel steps by name (loaders.Stats.Transform); empty when
	// not measured.
	Parts   []Part  `json:"parts,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Flags says that the advice names stoke's command-line flags (--workers, --size, ...), as
	// `stoke profile` reports; otherwise it names loaders.Config's fields, as a program of its own
	// sets them. Set it before Conclude.
	Flags bool `json:"-"`
}

// knob is the name of a setting in the advice: the flag, or loaders.Config's field.
func (r *Report) knob(flag, field string) string {
	if r.Flags {
		return flag
	}
	return field
}

// autoWorkers names the setting that sizes the workers by measurement.
func (r *Report) autoWorkers() string {
	return r.knob("--workers auto", "Workers: loaders.AutoWorkers")
}

// Part is a part of the parallel stage's busy time, and its share of it.
type Part struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Share   float64 `json:"share"`
}

// costliest is the largest part but reading, nil when none was measured.
func (r *Report) costliest() *Part {
	var top *Part
	for i := range r.Parts {
		if p := &r.Parts[i]; p.Name != "read" && (top == nil || p.Seconds > top.Seconds) {
			top = p
		}
	}
	return top
}

// Accumulator sums the statistics of several runs of the same pipeline (a Loader runs one pipeline
// per epoch) into one row per stage name, in the order the names first appear.
type Accumulator struct {
	order []string
	sums  map[string]*pipeline.StageStats
}

// Add adds one run's final statistics. Workers is the largest count seen for a name.
func (a *Accumulator) Add(stats []pipeline.StageStats) {
	if a.sums == nil {
		a.sums = map[string]*pipeline.StageStats{}
	}
	for _, s := range stats {
		t, ok := a.sums[s.Name]
		if !ok {
			c := s
			a.sums[s.Name] = &c
			a.order = append(a.order, s.Name)
			continue
		}
		t.Workers = max(t.Workers, s.Workers)
		t.In += s.In
		t.Out += s.Out
		t.Busy += s.Busy
		t.Starved += s.Starved
		t.Blocked += s.Blocked
		t.Elapsed += s.Elapsed
	}
}

// Stats returns the sums, in order.
func (a *Accumulator) Stats() []pipeline.StageStats {
	out := make([]pipeline.StageStats, 0, len(a.order))
	for _, n := range a.order {
		out = append(out, *a.sums[n])
	}
	return out
}

// FromPipeline converts pipeline statistics into table rows.
func FromPipeline(stats []pipeline.StageStats) []Stage {
	out := make([]Stage, 0, len(stats))
	for _, s := range stats {
		out = append(out, Stage{
			Name: s.Name, Kind: s.Kind, Workers: s.Workers, Items: s.Out, PerS: s.Rate(),
			Busy: s.BusyFraction(), Starved: s.StarvedFraction(), Blocked: s.BlockedFraction(),
		})
	}
	return out
}

// Consumer is the row of the loop that took items batches over elapsed, waiting for them for
// wait of that time. A zero elapsed gives zero shares.
func Consumer(name string, items int64, wait, elapsed time.Duration) Stage {
	s := Stage{Name: name, Kind: KindConsumer, Workers: 1, Items: items}
	if elapsed > 0 {
		s.PerS = float64(items) / elapsed.Seconds()
		s.Starved = min(1, max(0, float64(wait)/float64(elapsed)))
		s.Busy = 1 - s.Starved
	}
	return s
}

// WriteTable writes the stage table, the device line, the verdict and the worker suggestion.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	on := ""
	if r.Device != "" {
		on = " on " + r.Device
	}
	fmt.Fprintf(&b, "%d batches of %d (%d samples) in %.2f s%s, %d cores\n\n", r.Batches, r.Batch, r.Samples, r.Seconds, on, r.Cores)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tkind\tworkers\titems\titems/s\tbusy\tstarved\tblocked\t")
	for _, s := range r.Stages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t\n", s.Name, s.Kind, s.Workers, s.Items, s.PerS, pct(s.Busy), pct(s.Starved), pct(s.Blocked))
	}
	tw.Flush()
	b.WriteString("\n")
	switch {
	case len(r.Parts) > 0:
		parts := make([]string, len(r.Parts))
		for i, p := range r.Parts {
			parts[i] = p.Name + " " + pct(p.Share)
		}
		fmt.Fprintf(&b, "%s time: %s\n", r.Parallel, strings.Join(parts, ", "))
	case r.ReadShare > 0:
		fmt.Fprintf(&b, "%s time: %s reading samples, %s decoding and augmenting them\n", r.Parallel, pct(r.ReadShare), pct(1-r.ReadShare))
	}
	fmt.Fprintf(&b, "device: %.1f MB copied in %.3f s of copy time (%.2f GB/s, copy engine %s busy), host slots %s; the consumer stalled %s of the time\n",
		float64(r.Copy.Bytes)/1e6, r.Copy.Seconds, r.Copy.GBps, pct(r.Copy.Busy), pinnedWord(r.Pinned), pct(r.Stall))
	fmt.Fprintf(&b, "verdict: %s\n", r.Verdict.Text)
	if r.AutoWorkers > 0 && r.AutoWorkers != r.Workers {
		fmt.Fprintf(&b, "workers: %s would run %d %s workers instead of %d\n", r.autoWorkers(), r.AutoWorkers, r.Parallel, r.Workers)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func pinnedWord(p bool) string {
	if p {
		return "pinned"
	}
	return "not pinned"
}

// Conclude fills in AutoWorkers (for the Parallel stage) and the Verdict from the rest of r.
func (r *Report) Conclude() {
	r.AutoWorkers, _ = AutoWorkers(r.Stages, r.Parallel, r.Cores)
	r.Verdict = Diagnose(r)
}
