package pipeline

import (
	"math"
	"sync"
	"time"
)

// StageStats is what one stage has done so far. Times are summed over the stage's workers: a stage
// with 4 workers that ran for 1 s can have up to 4 s of Busy+Starved+Blocked.
type StageStats struct {
	Name    string
	Kind    string // "source", "map", "batch", "prefetch" or "sink"
	Workers int
	Ordered bool // a map that keeps input order

	In, Out int64 // items received and items sent on (Out counts batches for a batch stage)

	Busy    time.Duration // working: in the user function (or producing, for a source) or handing items on, less what the function reported through Blocked
	Starved time.Duration // waiting for input
	Blocked time.Duration // waiting for downstream to take output (or, in an ordered map, for the reorder window)

	Elapsed time.Duration // wall time since Run began, up to now or to when Run returned

	QueueLen, QueueCap int     // the output queue now
	QueueMean          float64 // mean occupancy of the output queue right after each send (0..QueueCap)
}

// BusyFraction is the share of the stage's worker time spent doing work (0..1); 0 before Run.
func (s StageStats) BusyFraction() float64 { return s.fraction(s.Busy) }

// StarvedFraction is the share of the stage's worker time spent waiting for input (0..1).
func (s StageStats) StarvedFraction() float64 { return s.fraction(s.Starved) }

// BlockedFraction is the share of the stage's worker time spent waiting for downstream (0..1).
func (s StageStats) BlockedFraction() float64 { return s.fraction(s.Blocked) }

// Rate is items out per second of wall time; 0 before Run.
func (s StageStats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Out) / s.Elapsed.Seconds()
}

func (s StageStats) fraction(d time.Duration) float64 {
	if s.Elapsed <= 0 || s.Workers <= 0 {
		return 0
	}
	f := float64(d) / (float64(s.Elapsed) * float64(s.Workers))
	return min(f, 1)
}

// stage is one declared stage; its counters live in its workers (see worker).
type stage struct {
	p       *Pipeline
	name    string
	kind    string
	workers int
	ordered bool
	queue   func() (length, capacity int)

	mu   sync.Mutex
	live []*worker // every worker goroutine started so far, running or ended
}

func (st *stage) snapshot(elapsed time.Duration) StageStats {
	s := StageStats{Name: st.name, Kind: st.kind, Workers: st.workers, Ordered: st.ordered, Elapsed: elapsed}
	var queued int64
	st.mu.Lock()
	for _, w := range st.live {
		s.In += w.in.Load()
		s.Out += w.out.Load()
		queued += w.queued.Load()
		s.Busy += time.Duration(w.busy.Load())
		s.Starved += time.Duration(w.starved.Load())
		s.Blocked += time.Duration(w.blocked.Load())
	}
	st.mu.Unlock()
	if st.queue != nil {
		s.QueueLen, s.QueueCap = st.queue()
		if s.Out > 0 {
			s.QueueMean = float64(queued) / float64(s.Out)
		}
	}
	return s
}

// Stats returns every stage's statistics in declaration order. It may be called while the pipeline
// runs (figures so far) and after Run returned (final figures).
func (p *Pipeline) Stats() []StageStats {
	p.mu.Lock()
	stages := append([]*stage(nil), p.stages...)
	p.mu.Unlock()
	var elapsed time.Duration
	if t0 := p.t0.Load(); t0 != 0 {
		end := p.t1.Load()
		if end == 0 {
			end = now()
		}
		elapsed = time.Duration(end - t0)
	}
	out := make([]StageStats, len(stages))
	for i, st := range stages {
		out[i] = st.snapshot(elapsed)
	}
	return out
}

// Headroom is the margin SuggestWorkers adds so that jitter does not starve the stages downstream.
const Headroom = 1.15

// SuggestWorkers sizes a parallel stage from measured busy shares, like tf.data's AUTOTUNE: in
// steady state every stage passes the same items, so a stage that is b busy could go 1/b times
// faster. A stage of workers workers at busy share busy must keep up with the busiest other stage
// (otherBusy, the consumer included): it needs ceil(Headroom * workers * busy / otherBusy)
// workers, at least 1 and at most cores. When nothing else is busy (otherBusy under 5%), the
// answer is cores. ok is false when the stage did no work to measure.
func SuggestWorkers(workers int, busy, otherBusy float64, cores int) (n int, ok bool) {
	if busy <= 0 || workers <= 0 || cores < 1 {
		return 0, false
	}
	if otherBusy < 0.05 {
		return cores, true
	}
	n = int(math.Ceil(Headroom * float64(workers) * busy / otherBusy))
	return min(max(n, 1), cores), true
}
