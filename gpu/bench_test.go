package gpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/stoke-ml/stoke/pinned"
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

// BenchmarkCopyH2D measures host-to-device copy bandwidth from pinned (Locked) and from ordinary
// (Heap) host memory on the CPU backend, where both are a memcpy on the stream's goroutine (the
// CUDA backend's, DMA from locked pages against a staged copy, is gpu/cuda's BenchmarkCUDAH2D).
func BenchmarkCopyH2D(b *testing.B) {
	for _, src := range []struct {
		name  string
		alloc pinned.Allocator
	}{{"pinned", pinned.Locked()}, {"heap", pinned.Heap()}} {
		for _, size := range []int{256 << 10, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", src.name, size>>10), func(b *testing.B) {
				benchCopy(b, src.alloc, size)
			})
		}
	}
}

func benchCopy(b *testing.B, alloc pinned.Allocator, size int) {
	d, err := Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	defer s.Close()
	buf, err := d.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	blk, err := alloc.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer alloc.Free(blk)
	if r, ok := d.(pinned.Registerer); ok && blk.Pinned {
		if r.RegisterHost(blk.Bytes) == nil {
			defer r.UnregisterHost(blk.Bytes)
		}
	}
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		s.CopyH2D(buf, 0, blk.Bytes)
		if err := s.Synchronize(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	if !blk.Pinned {
		b.Log(blk.Reason)
	}
}

// BenchmarkFeeder measures the feeder's round trip for MNIST-sized batches (128 images of 28x28
// plus labels): acquire a slot, feed it, deliver, release, with a compute stream in the loop.
func BenchmarkFeeder(b *testing.B) {
	const batch, img = 128, 28 * 28
	d, err := Open("cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	compute, _ := d.NewStream()
	defer compute.Close()
	pool, err := pinned.NewPool(pinned.Config{SlotSize: batch*img + 4*batch})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	f, err := NewFeeder(FeederConfig{Device: d, Compute: compute, Sizes: []int{batch * img, 4 * batch}})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	b.SetBytes(batch*img + 4*batch)
	b.ReportAllocs()
	for b.Loop() {
		s, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		db, err := f.Feed(ctx, s, Region{0, batch * img}, Region{batch * img, 4 * batch})
		if err != nil {
			b.Fatal(err)
		}
		db.Deliver()
		db.Release()
	}
	compute.Synchronize(ctx)
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "images/s")
}
