package gpu

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkHostOp measures the per-operation cost of a stream: enqueue a trivial host function
// and have the executor run it (synchronizing every 64 operations, as a training step would).
func BenchmarkHostOp(b *testing.B) {
	d, _ := Open("cpu")
	defer d.Close()
	s, _ := d.NewStream()
	defer s.Close()
	nop := func() error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		s.Host(nop)
		if n++; n%64 == 0 {
			s.Synchronize(ctx)
		}
	}
	s.Synchronize(ctx)
}

// BenchmarkCopyH2D measures host-to-device copy bandwidth of the CPU backend (a memcpy on the
// stream's goroutine).
func BenchmarkCopyH2D(b *testing.B) {
	for _, size := range []int{64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			d, _ := Open("cpu")
			defer d.Close()
			s, _ := d.NewStream()
			defer s.Close()
			buf, _ := d.Alloc(size)
			src := make([]byte, size)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				s.CopyH2D(buf, 0, src)
				s.Synchronize(ctx)
			}
		})
	}
}
