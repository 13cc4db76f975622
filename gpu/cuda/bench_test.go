//go:build cuda

package cuda

import (
	"context"
	"fmt"
	"testing"

	"github.com/stoke-ml/stoke/pinned"
)

// BenchmarkCUDAH2D measures host-to-device copy bandwidth from pageable and from pinned
// (registered) memory, one copy of 1, 16 or 256 MiB per iteration (scripts/gpu-check.sh reports
// them):
//
//	go test -tags cuda -run '^$' -bench CUDAH2D ./gpu/cuda/
func BenchmarkCUDAH2D(b *testing.B) {
	for _, mib := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) { benchH2D(b, mib<<20) })
	}
}

func benchH2D(b *testing.B, size int) {
	d := openCUDA(b)
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	dst, err := d.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Free()
	run := func(b *testing.B, src []byte) {
		b.ReportAllocs()
		b.SetBytes(int64(size))
		for b.Loop() {
			if err := s.CopyH2D(dst, 0, src); err != nil {
				b.Fatal(err)
			}
			if err := s.Synchronize(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	}
	b.Run("pageable", func(b *testing.B) { run(b, make([]byte, size)) })
	b.Run("pinned", func(b *testing.B) {
		alloc := pinned.Registered(pinned.Locked(), d.(pinned.Registerer))
		blk, err := alloc.Alloc(size)
		if err != nil {
			b.Fatal(err)
		}
		defer alloc.Free(blk)
		if !blk.Pinned {
			b.Skipf("memory not pinned: %s", blk.Reason)
		}
		run(b, blk.Bytes)
	})
}
