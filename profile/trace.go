package profile

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/pipeline"
)

// Span is one slice of the timeline: on lane Track (a worker, a stream, the consumer), work of
// Stage (which sets its colour) called Name, from Start to End since the recording began. A span
// with End == Start is an instant.
type Span struct {
	Track      string
	Stage      string
	Name       string
	Start, End time.Duration
}

// Point is one sample of a counter track (busy workers of a stage, a queue's length).
type Point struct {
	Track string
	At    time.Duration
	Value float64
}

// Timeline is a recording: spans and counter points in time order, and tracks in display order.
type Timeline struct {
	Tracks   []string // span tracks, grouped by stage in order of first activity, numbered lanes in numeric order
	Counters []string // counter tracks, in order of first point
	Spans    []Span
	Points   []Point
	// Dropped counts spans and points refused once the recorder's limit was reached.
	Dropped int64
	// End is the time of the last event.
	End time.Duration
}

// Recorder collects spans and counter points. It implements pipeline.Tracer, so a pipeline built
// with pipeline.WithTracer(rec), or a loaders.Config with Tracer rec, gives one lane per worker of
// every stage (and a loader's copies the lane loaders.CopyStage + " 0"). It keeps at most limit
// events (spans and points together) and counts the rest as dropped, so memory stays bounded.
type Recorder struct {
	t0    time.Time
	limit int

	mu      sync.Mutex
	spans   []Span
	points  []Point
	dropped int64
}

var _ pipeline.Tracer = (*Recorder)(nil)

// NewRecorder returns a recorder whose time 0 is t0, keeping at most limit events (limit < 1
// means 1).
func NewRecorder(t0 time.Time, limit int) *Recorder {
	return &Recorder{t0: t0, limit: max(limit, 1)}
}

// Span records the pipeline item index that worker of stage processed from start to end, on the
// lane "STAGE WORKER".
func (r *Recorder) Span(stage string, worker int, index int64, start, end time.Time) {
	r.Add(stage+" "+strconv.Itoa(worker), stage, stage+" "+strconv.FormatInt(index, 10), start, end)
}

// Add records a span on track. An end before start is recorded as an instant at start.
func (r *Recorder) Add(track, stage, name string, start, end time.Time) {
	s := Span{Track: track, Stage: stage, Name: name, Start: start.Sub(r.t0), End: end.Sub(r.t0)}
	s.End = max(s.End, s.Start)
	r.mu.Lock()
	if len(r.spans)+len(r.points) < r.limit {
		r.spans = append(r.spans, s)
	} else {
		r.dropped++
	}
	r.mu.Unlock()
}

// Count records value v of counter track at time at.
func (r *Recorder) Count(track string, at time.Time, v float64) {
	p := Point{Track: track, At: at.Sub(r.t0), Value: v}
	r.mu.Lock()
	if len(r.spans)+len(r.points) < r.limit {
		r.points = append(r.points, p)
	} else {
		r.dropped++
	}
	r.mu.Unlock()
}

// Timeline returns a sorted copy of what was recorded so far.
func (r *Recorder) Timeline() Timeline {
	r.mu.Lock()
	tl := Timeline{Spans: slices.Clone(r.spans), Points: slices.Clone(r.points), Dropped: r.dropped}
	r.mu.Unlock()
	tl.sort()
	return tl
}

// sort orders spans and points by time and derives the track orders and End.
func (tl *Timeline) sort() {
	slices.SortStableFunc(tl.Spans, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	slices.SortStableFunc(tl.Points, func(a, b Point) int { return cmp.Compare(a.At, b.At) })
	firstOfStage := map[string]int{}
	stageOf := map[string]string{}
	for _, s := range tl.Spans {
		if _, ok := firstOfStage[s.Stage]; !ok {
			firstOfStage[s.Stage] = len(firstOfStage)
		}
		if _, ok := stageOf[s.Track]; !ok {
			stageOf[s.Track] = s.Stage
			tl.Tracks = append(tl.Tracks, s.Track)
		}
		tl.End = max(tl.End, s.End)
	}
	slices.SortStableFunc(tl.Tracks, func(a, b string) int {
		if c := cmp.Compare(firstOfStage[stageOf[a]], firstOfStage[stageOf[b]]); c != 0 {
			return c
		}
		return lessLane(a, b)
	})
	seen := map[string]bool{}
	for _, p := range tl.Points {
		if !seen[p.Track] {
			seen[p.Track] = true
			tl.Counters = append(tl.Counters, p.Track)
		}
		tl.End = max(tl.End, p.At)
	}
}

// lessLane orders "read 2" before "read 10".
func lessLane(a, b string) int {
	pa, na := splitLane(a)
	pb, nb := splitLane(b)
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	return cmp.Compare(na, nb)
}

func splitLane(s string) (string, int) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return s, -1
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}

// traceEvent is one entry of the Chrome trace-event format ("JSON Object Format").
type traceEvent struct {
	Name  string         `json:"name"`
	Cat   string         `json:"cat,omitempty"`
	Ph    string         `json:"ph"`
	Ts    float64        `json:"ts"` // microseconds
	Dur   *float64       `json:"dur,omitempty"`
	Pid   int            `json:"pid"`
	Tid   int            `json:"tid"`
	Scope string         `json:"s,omitempty"`
	Args  map[string]any `json:"args,omitempty"`
}

// WriteTrace writes tl as Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one
// thread per span track, named and sorted as in tl.Tracks, a complete event ("X") per span (an
// instant, "i", for a span without duration), and a counter ("C") per point.
func WriteTrace(w io.Writer, tl Timeline) error {
	const pid = 1
	evs := []traceEvent{{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": "stoke"}}}
	tid := map[string]int{}
	for i, t := range tl.Tracks {
		tid[t] = i + 1
		evs = append(evs,
			traceEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: i + 1, Args: map[string]any{"name": t}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: i + 1, Args: map[string]any{"sort_index": i}})
	}
	for _, s := range tl.Spans {
		ev := traceEvent{Name: s.Name, Cat: s.Stage, Ph: "X", Ts: micros(s.Start), Pid: pid, Tid: tid[s.Track]}
		if s.End > s.Start {
			d := micros(s.End - s.Start)
			ev.Dur = &d
		} else {
			ev.Ph, ev.Scope = "i", "t"
		}
		evs = append(evs, ev)
	}
	for _, p := range tl.Points {
		evs = append(evs, traceEvent{Name: p.Track, Ph: "C", Ts: micros(p.At), Pid: pid, Args: map[string]any{"value": p.Value}})
	}
	doc := struct {
		TraceEvents     []traceEvent   `json:"traceEvents"`
		DisplayTimeUnit string         `json:"displayTimeUnit"`
		OtherData       map[string]any `json:"otherData"`
	}{evs, "ms", map[string]any{"producer": "stoke profile", "dropped_events": tl.Dropped}}
	enc := json.NewEncoder(w)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("profile: write trace: %w", err)
	}
	return nil
}

// micros is d in microseconds, rounded to nanoseconds' precision.
func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
