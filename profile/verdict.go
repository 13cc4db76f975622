package profile

import (
	"fmt"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pipeline"
)

// Verdict names the stage that bounds the run (Limit) and says what to do about it (Text, one
// line that always contains the word "bottleneck").
type Verdict struct {
	Limit string `json:"limit"`
	Text  string `json:"text"`
}

// Thresholds of Diagnose.
const (
	// StallLow is the consumer stall below which loading is not the problem.
	StallLow = 0.10
	// Saturated is the busy share from which a stage counts as the one that bounds the pipeline.
	Saturated = 0.60
	// ReadBound is the share of the parallel stage's time spent reading from which its workers
	// are bound by storage rather than by the cores.
	ReadBound = 0.5
)

// Diagnose reads r (its Stages, Copy, Stall, Pinned, Cores, Parallel, Workers and AutoWorkers)
// and returns the verdict:
//   - the consumer stalls less than StallLow: the consumer is the bottleneck, loading is not;
//   - otherwise the busiest stage, or the copy engine, if it is at least Saturated busy, with
//     advice for that kind of stage (for the parallel stage, reads of ReadBound or more of its
//     time mean storage, not the cores, is what it waits on);
//   - otherwise no stage is saturated and the pipeline is bound by latency (prefetch depth).
//
// A report without a consumer row is diagnosed from the loader's stages alone.
func Diagnose(r *Report) Verdict {
	var consumer *Stage
	for i := range r.Stages {
		if r.Stages[i].Kind == KindConsumer {
			consumer = &r.Stages[i]
		}
	}
	stall := pct0(r.Stall)
	if consumer != nil && r.Stall < StallLow {
		text := fmt.Sprintf("the pipeline outpaces the step: loading is not the problem (the consumer waited %s of the time for data); %s is the bottleneck", stall,
			consumer.Name)
		if r.AutoWorkers > 0 && r.AutoWorkers < r.Workers {
			text += fmt.Sprintf(", so speed it up (a larger batch, a faster model or device); %d %s workers would keep up (%s) "+
				"and leave %d cores to it",
				r.AutoWorkers, r.Parallel, r.autoWorkers(), r.Workers-r.AutoWorkers)
		} else {
			text += "; speed the step up (a larger batch, a faster model or device) before the loader"
		}
		return Verdict{Limit: consumer.Name, Text: text}
	}

	var top *Stage
	for i := range r.Stages {
		s := &r.Stages[i]
		if s.Kind == KindConsumer {
			continue
		}
		if top == nil || s.Busy > top.Busy {
			top = s
		}
	}
	waits := fmt.Sprintf("the device waits %s of each step for data", stall)
	if r.Copy.Busy >= Saturated && (top == nil || r.Copy.Busy >= top.Busy) {
		advice := "send fewer bytes: lower " + r.knob("--size", "the transform's output size") + ", or keep images uint8 until they are on the device"
		if !r.Pinned {
			advice = "the host slots are not pinned, so copies are staged: allow page-locked memory (ulimit -l) for DMA transfers"
		}
		return Verdict{Limit: loaders.CopyStage, Text: fmt.Sprintf("%s is the bottleneck: the copy engine is %s busy at %.2f GB/s and %s; %s",
			loaders.CopyStage, pct0(r.Copy.Busy), r.Copy.GBps, waits, advice)}
	}
	if top == nil || top.Busy < Saturated {
		busiest := "none"
		if top != nil {
			busiest = fmt.Sprintf("%s %s busy", top.Name, pct0(top.Busy))
		}
		return Verdict{Limit: "latency",
			Text: fmt.Sprintf("no stage is saturated (busiest: %s) yet %s: the bottleneck is latency, not throughput; raise %s so that more batches are "+
				"under way, or %s", busiest, waits, r.knob("--prefetch", "Prefetch"), r.knob("--workers", "Workers"))}
	}
	head := fmt.Sprintf("%s is the bottleneck: %d %s %s busy, and %s", top.Name, top.Workers, plural(top.Workers, "worker", "workers"), pct0(top.Busy), waits)
	var advice string
	switch {
	case top.Name == r.Parallel && r.ReadShare >= ReadBound:
		advice = fmt.Sprintf("its workers spend %s of their time reading samples, waiting on storage rather than computing: raise %s beyond the %d cores "+
			"(reads overlap), or pack the dataset into shards read front to back (stoke pack)", pct0(r.ReadShare), r.knob("--workers", "Workers"), r.Cores)
	case top.Name == r.Parallel:
		// What to make cheaper follows from where the workers' time went.
		size := r.knob("--size", "the transform's output size")
		fix := "pack to raw+zstd (stoke pack --format raw --compress zstd --max-side 256) so that decoding becomes a copy, or lower " + size
		switch part := r.costliest(); {
		case part == nil || part.Name == "decode":
		case part.Name == "resample":
			fix = fmt.Sprintf("resampling takes %s of their time: lower %s, or pack at a smaller --max-side (stoke pack) so that less is read and resampled",
				pct0(part.Share), size)
		default:
			fix = fmt.Sprintf("%s takes %s of their time: make it cheaper, or apply it to fewer samples", part.Name, pct0(part.Share))
		}
		if top.Workers < r.Cores {
			n := r.AutoWorkers
			if n <= top.Workers {
				n = r.Cores
			}
			advice = fmt.Sprintf("add workers (%s would use %d of %d cores), or %s", r.autoWorkers(), n, r.Cores, fix)
		} else {
			advice = fmt.Sprintf("all %d cores are at work: %s", r.Cores, fix)
		}
	default:
		advice = fmt.Sprintf("it runs on one goroutine: raise %s so that it overlaps with the others, or use a larger %s to amortise its per-batch work",
			r.knob("--prefetch", "Prefetch"), r.knob("--batch", "Batch"))
	}
	return Verdict{Limit: top.Name, Text: head + "; " + advice}
}

// pct0 formats a share as a whole percentage.
func pct0(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// AutoWorkers sizes the stage named parallel with pipeline.SuggestWorkers: it must keep up with
// the busiest of the other stages (the consumer included). It reports false when stages holds no
// stage of that name or it did no work.
func AutoWorkers(stages []Stage, parallel string, cores int) (int, bool) {
	var p *Stage
	other := 0.0
	for i := range stages {
		s := &stages[i]
		if s.Name == parallel {
			p = s
		} else {
			other = max(other, s.Busy)
		}
	}
	if p == nil {
		return 0, false
	}
	return pipeline.SuggestWorkers(p.Workers, p.Busy, other, cores)
}
