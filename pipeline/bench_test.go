package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/stoke-ml/stoke/internal/cputime"
)

// BenchmarkOverhead measures the engine's own cost: a source and three no-op stages (map, map,
// sink) moving 10,000 ints. ns/item/stage divides the wall time per item by the three stages after
// the source; cpu-ns/item/stage does the same with the process's CPU time (user + system, every
// goroutine and the scheduler's own spinning), the figure to compare on a shared machine.
func BenchmarkOverhead(b *testing.B) {
	const items, stages = 10_000, 3
	xs := seq(items)
	noop := func(_ context.Context, x int) (int, error) { return x, nil }
	for _, ordered := range []bool{false, true} {
		for _, workers := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("ordered=%v/workers=%d", ordered, workers), func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				cpu0, _ := cputime.Process()
				for b.Loop() {
					p := New()
					m1 := Map(p, "a", FromSlice(p, "src", xs), noop, Workers(workers), Ordered(ordered))
					m2 := Map(p, "b", m1, noop, Workers(workers), Ordered(ordered))
					Sink(p, "sink", m2, func(context.Context, int) error { return nil })
					if err := p.Run(ctx); err != nil {
						b.Fatal(err)
					}
				}
				perItem := float64(b.Elapsed().Nanoseconds()) / float64(b.N*items)
				b.ReportMetric(perItem/stages, "ns/item/stage")
				if cpu1, ok := cputime.Process(); ok {
					b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N*items)/stages, "cpu-ns/item/stage")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
