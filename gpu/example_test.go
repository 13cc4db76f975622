package gpu_test

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
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
