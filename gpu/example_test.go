package gpu_test

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/pinned"
)

// Open a device, copy a buffer to it, run a "kernel" in stream order, copy back, and wait on an
// event.
func Example() {
	ctx := context.Background()
	dev, err := gpu.Open("cpu")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	s, err := dev.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	buf, _ := dev.Alloc(4)
	defer buf.Free()
	s.CopyH2D(buf, 0, []byte{1, 2, 3, 4})
	s.Host(func() error { // a CPU kernel: double every byte
		mem, _ := gpu.HostBytes(buf)
		for i := range mem {
			mem[i] *= 2
		}
		return nil
	})
	out := make([]byte, 4)
	s.CopyD2H(out, buf, 0)
	done, _ := s.Record()
	if err := done.Synchronize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out, done.Done())
	// Output: [2 4 6 8] true
}

func ExampleOpen() {
	_, err := gpu.Open("cpu:1")
	fmt.Println(err)
	// Output: gpu: open "cpu:1": gpu: no such device: cpu:1 (the cpu backend has one device, cpu:0)
}

// The feeder moves a filled slot to the device; the consumer's compute stream waits for the copy
// (Deliver) and the buffers go back to the ring after the work enqueued before Release.
func ExampleFeeder() {
	ctx := context.Background()
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	compute, _ := dev.NewStream()
	defer compute.Close()
	pool, _ := pinned.NewPool(pinned.Config{SlotSize: 8, Allocator: pinned.Heap()})
	defer pool.Close()
	feeder, err := gpu.NewFeeder(gpu.FeederConfig{Device: dev, Compute: compute, Sizes: []int{6, 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer feeder.Close()

	slot, _ := pool.Acquire(ctx)
	copy(slot.Bytes(), "pixels\x01\x02") // the loader's layout: 6 bytes of images, 2 of labels
	batch, err := feeder.Feed(ctx, slot, gpu.Region{Off: 0, Len: 6}, gpu.Region{Off: 6, Len: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	batch.Deliver() // on the consumer's side: compute work enqueued from now on sees the copy
	compute.Host(func() error {
		img, _ := gpu.HostBytes(batch.Buffers[0])
		lab, _ := gpu.HostBytes(batch.Buffers[1])
		fmt.Printf("%s %v\n", img, lab)
		return nil
	})
	batch.Release()
	compute.Synchronize(ctx)
	fmt.Println(feeder.Stats().Batches)
	// Output:
	// pixels [1 2]
	// 1
}
