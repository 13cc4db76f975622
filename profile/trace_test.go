package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/pipeline"
)

// record runs a small two-worker pipeline traced by a Recorder, adds consumer spans and a counter
// the way stoke profile does, and returns the timeline.
func record(t *testing.T, limit int) Timeline {
	t.Helper()
	defer goleak.VerifyNone(t)
	rec := NewRecorder(time.Now(), limit)
	p := pipeline.New(pipeline.WithTracer(rec))
	src := pipeline.FromSlice(p, "index", []int{1, 2, 3, 4, 5, 6, 7, 8})
	sq := pipeline.Map(p, "square", src, func(_ context.Context, v int) (int, error) {
		time.Sleep(time.Millisecond)
		return v * v, nil
	}, pipeline.Workers(2), pipeline.Ordered(true))
	b := pipeline.Batch(p, "batch", sq, 4)
	k := 0
	for _, err := range pipeline.Iter(t.Context(), p, b) {
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		rec.Add("consumer", "step", fmt.Sprintf("step %d", k), now, now.Add(time.Millisecond))
		rec.Add("compute stream", "copy", fmt.Sprintf("batch %d ready", k), now, now)
		rec.Count("busy workers: square", now, float64(k+1))
		k++
	}
	return rec.Timeline()
}

func TestWriteTrace(t *testing.T) {
	tl := record(t, 1000)
	var buf bytes.Buffer
	if err := WriteTrace(&buf, tl); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	names := map[int]string{}
	slicesPer := map[string]int{}
	counters, instants := 0, 0
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				names[ev.Tid] = ev.Args["name"].(string)
			}
		case "X":
			if ev.Dur <= 0 || ev.Ts < 0 {
				t.Errorf("slice %q ts %v dur %v; want ts >= 0 and dur > 0", ev.Name, ev.Ts, ev.Dur)
			}
			slicesPer[names[ev.Tid]]++
		case "i":
			instants++
		case "C":
			counters++
		}
	}
	var tracks []string
	for _, n := range names {
		tracks = append(tracks, n)
	}
	slices.Sort(tracks)
	// One lane per worker of the source and the map (batch stages report no spans), the consumer and
	// the stream.
	want := []string{"compute stream", "consumer", "index 0", "square 0", "square 1"}
	if !slices.Equal(tracks, want) {
		t.Errorf("trace tracks = %q; want %q", tracks, want)
	}
	if got := slicesPer["square 0"] + slicesPer["square 1"]; got != 8 {
		t.Errorf("square slices = %d; want 8 (one per item)", got)
	}
	if slicesPer["consumer"] != 2 || instants != 2 || counters != 2 {
		t.Errorf("consumer slices, instants, counters = %d, %d, %d; want 2, 2, 2", slicesPer["consumer"], instants, counters)
	}
	if !slices.Equal(tl.Counters, []string{"busy workers: square"}) {
		t.Errorf("Timeline.Counters = %q; want the one counter", tl.Counters)
	}
}

func TestRecorderLimit(t *testing.T) {
	tl := record(t, 5)
	if len(tl.Spans)+len(tl.Points) != 5 || tl.Dropped == 0 {
		t.Errorf("recorder with limit 5 kept %d events and dropped %d; want 5 kept and some dropped", len(tl.Spans)+len(tl.Points), tl.Dropped)
	}
}

func TestTrackOrder(t *testing.T) {
	t0 := time.Now()
	rec := NewRecorder(t0, 100)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rec.Add("read 10", "read", "a", at(3), at(4))
	rec.Add("consumer", "step", "b", at(5), at(6))
	rec.Add("read 2", "read", "c", at(1), at(2))
	rec.Add("read 0", "read", "d", at(7), at(8))
	got := rec.Timeline().Tracks
	want := []string{"read 0", "read 2", "read 10", "consumer"}
	if !slices.Equal(got, want) {
		t.Errorf("Timeline().Tracks = %q; want %q", got, want)
	}
}

func TestWriteSVG(t *testing.T) {
	tl := record(t, 1000)
	var buf bytes.Buffer
	if err := WriteSVG(&buf, tl); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	var root string
	rects, titles, polylines := 0, 0, 0
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg is not XML: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
			switch v.Name.Local {
			case "rect":
				rects++
			case "title":
				titles++
			case "polyline":
				polylines++
			case "text":
				inText = true
			}
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(v))
			}
		}
	}
	if root != "svg" {
		t.Errorf("svg root element = %q; want svg", root)
	}
	// One titled rectangle per span, plus the background and the legend's swatches.
	if titles != len(tl.Spans)+polylines || polylines != len(tl.Counters) {
		t.Errorf("svg titles, polylines = %d, %d; want %d, %d", titles, polylines, len(tl.Spans)+len(tl.Counters), len(tl.Counters))
	}
	if rects < len(tl.Spans)+1 {
		t.Errorf("svg rects = %d; want at least %d", rects, len(tl.Spans)+1)
	}
	joined := strings.Join(texts, "|")
	for _, lane := range append(slices.Clone(tl.Tracks), tl.Counters...) {
		if !slices.Contains(texts, lane) {
			t.Errorf("svg labels %q; want a label %q", joined, lane)
		}
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, time.Microsecond},
		{3 * time.Millisecond, 5 * time.Millisecond},
		{11 * time.Millisecond, 20 * time.Millisecond},
		{time.Second, time.Second},
		{60 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := niceStep(tc.in); got != tc.want {
			t.Errorf("niceStep(%v) = %v; want %v", tc.in, got, tc.want)
		}
	}
}
