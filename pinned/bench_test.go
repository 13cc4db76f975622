package pinned

import (
	"context"
	"testing"
)

// BenchmarkSlotCycle measures one trip through the lifecycle (the per-batch bookkeeping cost).
func BenchmarkSlotCycle(b *testing.B) {
	p, err := NewPool(Config{SlotSize: 4096, Allocator: Heap()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, _ := p.Acquire(ctx)
		s.Ready()
		s.InFlight()
		s.Release()
	}
}
