//go:build cuda

package cuda

/*
#include <stdint.h>
#include <cuda.h>

// Page-locked host memory mapped into the device's address space: kernels write flags and read
// small parameter tables there directly, and host functions read them without a copy.
static void *stoke_host_alloc(size_t n, CUresult *r) {
	void *p = NULL;
	*r = cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	return p;
}
static CUdeviceptr stoke_host_devptr(void *p, CUresult *r) {
	CUdeviceptr d = 0;
	*r = cuMemHostGetDevicePointer(&d, p, 0);
	return d;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// Mapped host slots: one per op call that needs one, taken at enqueue and handed back by the host
// function that runs after the kernel, so a slot is never reused while a kernel may touch it.
const (
	slotBytes     = 1024 // 2*maxNormChannels float32s, or a label flag
	slotsPerChunk = 64
	// maxNormChannels is the most channels NormalizeU8 takes per-channel statistics for
	// (MAX_NORM_CHANNELS in ops.cu).
	maxNormChannels = slotBytes / 8
)

type hostSlot struct {
	host unsafe.Pointer // C memory, never moved
	dev  cu.DevicePtr
}

func (s hostSlot) int32s(n int) []int32 { return unsafe.Slice((*int32)(s.host), n) }

func (s hostSlot) float32s(n int) []float32 { return unsafe.Slice((*float32)(s.host), n) }

type hostArena struct {
	dev  *cudaDevice
	mu   sync.Mutex
	free []hostSlot
}

func (a *hostArena) get() (hostSlot, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) == 0 {
		if err := a.grow(); err != nil {
			return hostSlot{}, err
		}
	}
	s := a.free[len(a.free)-1]
	a.free = a.free[:len(a.free)-1]
	return s, nil
}

func (a *hostArena) put(s hostSlot) {
	a.mu.Lock()
	a.free = append(a.free, s)
	a.mu.Unlock()
}

// grow maps another chunk; the memory lives as long as the device's context.
func (a *hostArena) grow() error {
	var (
		base unsafe.Pointer
		dptr C.CUdeviceptr
		r    C.CUresult
	)
	err := a.dev.th.do(func() error {
		if base = C.stoke_host_alloc(C.size_t(slotBytes*slotsPerChunk), &r); r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuMemHostAlloc: CUresult %d", int(r))
		}
		if dptr = C.stoke_host_devptr(base, &r); r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuMemHostGetDevicePointer: CUresult %d", int(r))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cuda: mapped host memory on %s: %w", a.dev.Info(), err)
	}
	for i := range slotsPerChunk {
		a.free = append(a.free, hostSlot{host: unsafe.Add(base, i*slotBytes), dev: cu.DevicePtr(dptr) + cu.DevicePtr(i*slotBytes)})
	}
	return nil
}
