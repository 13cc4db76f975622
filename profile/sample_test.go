package profile

import (
	"slices"
	"testing"
	"time"
)

func TestCounterCeiling(t *testing.T) {
	tests := []struct {
		dt, busy, want []float64
	}{
		{[]float64{1, 1, 1}, []float64{0, 1, 5}, []float64{2, 2, 2}},
		{[]float64{1, 1, 1, 1}, []float64{1, 0, 3, 1}, []float64{1, 1, 2, 1}},
		{[]float64{2, 1, 1}, []float64{0, 0, 6}, []float64{1, 2, 2}}, // moves time, not rates
		{[]float64{1, 1}, []float64{0, 0}, []float64{0, 0}},
		{[]float64{1}, []float64{9}, []float64{9}}, // nothing before it to give the excess to
	}
	for _, tc := range tests {
		c := &counter{dt: tc.dt, busy: slices.Clone(tc.busy), ceiling: 2, at: make([]time.Time, len(tc.dt))}
		rec := NewRecorder(time.Time{}, 100)
		c.record(rec, "x")
		var got []float64
		for _, p := range rec.Timeline().Points {
			got = append(got, p.Value)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("counter{dt %v, busy %v}.record (ceiling 2) = %v; want %v", tc.dt, tc.busy, got, tc.want)
		}
	}
}
