package optim

import (
	"math"
	"testing"
)

// TestSchedules: each schedule's factor at the steps where it changes.
func TestSchedules(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		s                     Schedule
		step, perEpoch, total int
		want                  float64
	}{
		{"constant", Constant(), 50, 10, 100, 1},
		{"step before", StepDecay(2, 0.1), 19, 10, 100, 1},
		{"step after", StepDecay(2, 0.1), 20, 10, 100, 0.1},
		{"step twice", StepDecay(2, 0.1), 45, 10, 100, 0.01},
		{"cosine warmup start", Cosine(1), 0, 10, 100, 0.1},
		{"cosine warmup end", Cosine(1), 9, 10, 100, 1},
		{"cosine top", Cosine(1), 10, 10, 100, 1},
		{"cosine middle", Cosine(1), 55, 10, 100, 0.5},
		{"cosine end", Cosine(0), 100, 10, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s(tc.step, tc.perEpoch, tc.total); math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("schedule(%d, %d, %d) = %v; want %v", tc.step, tc.perEpoch, tc.total, got, tc.want)
			}
		})
	}
}
