package profile

import (
	"testing"
	"time"
)

// BenchmarkRecorderSpan is the cost a traced pipeline worker pays per item.
func BenchmarkRecorderSpan(b *testing.B) {
	t0 := time.Now()
	rec := NewRecorder(t0, 1<<30)
	end := t0.Add(time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		rec.Span("transform", 1, 42, t0, end)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}
