//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl -Wl,--as-needed
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>

#ifndef STOKE_CUDAINC_CUDA_H
#error "build with internal/cudainc first on the include path: CGO_CFLAGS=-I<repo>/internal/cudainc (see scripts/cuda-check.sh)"
#endif
// The wrapper turns cuInit into a no-op for gorgonia.org/cu's package init; this is the driver's.
#undef cuInit

int stoke_dl_load_driver(const char *soname, char *err, size_t n); // driver_dl.c
static CUresult stoke_init(void) { return cuInit(0); }
static CUresult stoke_host_register(uintptr_t p, size_t n) {
	return cuMemHostRegister((void *)p, n, CU_MEMHOSTREGISTER_PORTABLE);
}
static CUresult stoke_host_unregister(uintptr_t p) { return cuMemHostUnregister((void *)p); }

*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/pinned"
)

func init() { gpu.Register(cudaBackend{}) }

// cudaBackend is the NVIDIA backend over the CUDA driver API (gorgonia.org/cu). Registering it
// touches no hardware; the driver is initialised the first time a device is listed or opened.
type cudaBackend struct{}

var _ gpu.Backend = cudaBackend{}

func (cudaBackend) Name() string { return "cuda" }

var driver struct {
	once sync.Once
	err  error
}

// driverLib is the driver's soname: the one name NVIDIA gives libcuda, whatever the version.
const driverLib = "libcuda.so.1"

// initDriver loads the driver library (driver_dl.c) and calls its cuInit, once; a failure (no
// driver installed, no GPU, no device node, a driver older than the toolkit) is reported by every
// later Devices and Open.
func initDriver() error {
	driver.once.Do(func() {
		if err := loadDriver(driverLib); err != nil {
			driver.err = fmt.Errorf("cuda: %w: %w (install the NVIDIA driver, or put its %s on LD_LIBRARY_PATH)", gpu.ErrNoDevice, err, driverLib)
			return
		}
		if r := C.stoke_init(); r != C.CUDA_SUCCESS {
			driver.err = fmt.Errorf("cuda: %w: cuInit: %v (is an NVIDIA GPU attached and its driver loaded? nvidia-smi should list it)",
				gpu.ErrNoDevice, cuResultError(r))
		}
	})
	return driver.err
}

// loadDriver dlopens soname and points the driver's trampolines (driver_dl.c) at it.
func loadDriver(soname string) error {
	so := C.CString(soname)
	defer C.free(unsafe.Pointer(so))
	var msg [512]C.char
	if C.stoke_dl_load_driver(so, &msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("cannot load the CUDA driver: %s", C.GoString(&msg[0]))
	}
	return nil
}

// cuResultError names a raw CUresult from our own cgo calls.
func cuResultError(r C.CUresult) error {
	var name *C.char
	if C.cuGetErrorName(r, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("CUresult %d", int(r))
	}
	return fmt.Errorf("%s (%d)", C.GoString(name), int(r))
}

func (cudaBackend) Devices() ([]gpu.Info, error) {
	if err := initDriver(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w", err)
	}
	infos := make([]gpu.Info, 0, n)
	for i := range n {
		info, err := cudaInfo(i)
		if err != nil {
			return infos, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// cudaInfo describes device i; the calls need no context, so any thread may make them.
func cudaInfo(i int) (gpu.Info, error) {
	d, err := cu.GetDevice(i)
	if err != nil {
		return gpu.Info{}, fmt.Errorf("cuda: device %d: %w", i, err)
	}
	name, err := d.Name()
	if err != nil {
		return gpu.Info{}, fmt.Errorf("cuda: device %d: name: %w", i, err)
	}
	mem, err := d.TotalMem()
	if err != nil {
		return gpu.Info{}, fmt.Errorf("cuda: device %d: memory: %w", i, err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return gpu.Info{}, fmt.Errorf("cuda: device %d: compute capability: %w", i, err)
	}
	return gpu.Info{Backend: "cuda", Index: i, Name: name, Memory: mem, ComputeCapability: fmt.Sprintf("%d.%d", major, minor)}, nil
}

func (cudaBackend) Open(index int) (gpu.Device, error) {
	if err := initDriver(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w", err)
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("cuda: %w: cuda:%d (this machine has %d CUDA devices)", gpu.ErrNoDevice, index, n)
	}
	info, err := cudaInfo(index)
	if err != nil {
		return nil, err
	}
	d := &cudaDevice{
		info:    info,
		dev:     cu.Device(index),
		exact:   os.Getenv("STOKE_CUDA_EXACT_ALLOC") == "1",
		peak:    peakFLOPS(cu.Device(index)),
		streams: make(map[*cudaStream]struct{}),
		cache:   make(map[int][]cu.DevicePtr),
		live:    make(map[cu.DevicePtr]int),
	}
	var pctx cu.CUContext
	d.th, err = startThread(func() error {
		var err error
		if pctx, err = d.dev.RetainPrimaryCtx(); err != nil {
			return fmt.Errorf("cuda: %s: retain primary context: %w", info, err)
		}
		if err = cu.SetCurrentContext(pctx); err != nil {
			_ = d.dev.ReleasePrimaryCtx()
			return fmt.Errorf("cuda: %s: make context current: %w", info, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// cudaThread is the one goroutine, locked to its OS thread, on which a device's context is
// current; every driver call for that context runs there (a CUDA context is current per thread).
type cudaThread struct {
	work chan func()
	quit chan func() // the teardown to run as the thread's last act
	done chan struct{}
}

// startThread starts the thread and runs setup on it; if setup fails the thread has ended by
// the time startThread returns.
func startThread(setup func() error) (*cudaThread, error) {
	t := &cudaThread{work: make(chan func()), quit: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(t.done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := setup(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			select {
			case fn := <-t.work:
				fn()
			case teardown := <-t.quit:
				teardown()
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

// do runs fn on the thread and returns its error, or ErrClosed once the thread has stopped.
func (t *cudaThread) do(fn func() error) error {
	errc := make(chan error, 1)
	select {
	case t.work <- func() { errc <- fn() }:
		return <-errc
	case <-t.done:
		return errThreadClosed
	}
}

// errThreadClosed is do's error once the device has closed; the callers name what they did.
var errThreadClosed = fmt.Errorf("device thread: %w", gpu.ErrClosed)

// stop runs teardown on the thread, ends it and waits for it; later calls do nothing.
func (t *cudaThread) stop(teardown func()) {
	select {
	case t.quit <- teardown:
	case <-t.done:
	}
	<-t.done
}

// Buffers are cached by size class so that a training loop, which allocates the same sizes every
// step, reaches cuMemAlloc only in its first step.
const (
	smallRound = 512     // small buffers round up to a multiple of this
	largeRound = 1 << 20 // buffers of 1 MiB or more round up to whole MiB
)

func sizeClass(n int) int {
	r := smallRound
	if n >= largeRound {
		r = largeRound
	}
	return (n + r - 1) / r * r
}

type cudaDevice struct {
	info  gpu.Info
	dev   cu.Device
	th    *cudaThread
	exact bool    // STOKE_CUDA_EXACT_ALLOC=1: blocks of the exact size asked for (see Alloc)
	peak  float64 // PeakFLOPS, read when the device opened

	opsMu sync.Mutex
	ops   *cudaOps // the device's op set, made by the first kernels.For (cudaFor)

	mu      sync.Mutex
	closed  bool
	streams map[*cudaStream]struct{}
	cache   map[int][]cu.DevicePtr // free blocks by size class
	live    map[cu.DevicePtr]int   // every block the driver gave us, with its size class
	cached  int64                  // bytes held in cache
}

var (
	_ gpu.Device        = (*cudaDevice)(nil)
	_ pinned.Registerer = (*cudaDevice)(nil)
)

func (d *cudaDevice) Info() gpu.Info { return d.info }

func (d *cudaDevice) NewStream() (gpu.Stream, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("cuda: new stream on %s: %w", d.info, gpu.ErrClosed)
	}
	var cs cu.Stream
	// Non-blocking: our streams never serialise with the legacy default stream.
	err := d.th.do(func() (err error) { cs, err = cu.MakeStream(cu.NonBlocking); return err })
	if err != nil {
		return nil, fmt.Errorf("cuda: new stream on %s: %w", d.info, err)
	}
	s := &cudaStream{dev: d, s: cs}
	d.mu.Lock()
	if d.closed { // closed while we were creating it
		d.mu.Unlock()
		_ = d.th.do(func() error { return cs.Destroy() })
		return nil, fmt.Errorf("cuda: new stream on %s: %w", d.info, gpu.ErrClosed)
	}
	d.streams[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
}

func (d *cudaDevice) Alloc(n int) (gpu.Buffer, error) {
	if n < 0 || (d.info.Memory > 0 && int64(n) > d.info.Memory) {
		return nil, fmt.Errorf("cuda: alloc %d bytes on %s: %w (device memory %d bytes)", n, d.info, gpu.ErrRange, d.info.Memory)
	}
	if n == 0 {
		return &cudaBuffer{dev: d}, nil
	}
	// With STOKE_CUDA_EXACT_ALLOC=1 a block is as long as the buffer, so that a memory checker
	// (compute-sanitizer, or the guard pages of the CPU stand-in of internal/cudainc/sim) sees an
	// access past the buffer's end; the cache then reuses blocks of the same size only.
	class := sizeClass(n)
	if d.exact {
		class = n
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("cuda: alloc %d bytes on %s: %w", n, d.info, gpu.ErrClosed)
	}
	if free := d.cache[class]; len(free) > 0 {
		p := free[len(free)-1]
		d.cache[class] = free[:len(free)-1]
		d.cached -= int64(class)
		d.mu.Unlock()
		return &cudaBuffer{dev: d, ptr: p, n: n}, nil
	}
	d.mu.Unlock()
	p, err := d.memAlloc(class)
	if errors.Is(err, cu.OutOfMemory) {
		// The cache may hold what we need in other size classes: give it back and retry once.
		d.trim()
		p, err = d.memAlloc(class)
	}
	if errors.Is(err, cu.OutOfMemory) {
		return nil, fmt.Errorf("cuda: alloc %d bytes on %s: %w: %w", n, d.info, gpu.ErrOutOfMemory, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %d bytes on %s: %w", n, d.info, err)
	}
	d.mu.Lock()
	d.live[p] = class
	d.mu.Unlock()
	return &cudaBuffer{dev: d, ptr: p, n: n}, nil
}

func (d *cudaDevice) memAlloc(class int) (p cu.DevicePtr, err error) {
	err = d.th.do(func() error { p, err = cu.MemAlloc(int64(class)); return err })
	return p, err
}

// trim returns every cached block to the driver.
func (d *cudaDevice) trim() {
	d.mu.Lock()
	var ptrs []cu.DevicePtr
	for class, free := range d.cache {
		ptrs = append(ptrs, free...)
		delete(d.cache, class)
	}
	for _, p := range ptrs {
		delete(d.live, p)
	}
	d.cached = 0
	d.mu.Unlock()
	_ = d.th.do(func() error {
		for _, p := range ptrs {
			_ = cu.MemFree(p)
		}
		return nil
	})
}

// release puts a block back into the cache.
func (d *cudaDevice) release(p cu.DevicePtr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	class, ok := d.live[p]
	if !ok || d.closed { // the device freed everything at Close
		return
	}
	d.cache[class] = append(d.cache[class], p)
	d.cached += int64(class)
}

// Close closes the streams still open (waiting for their work), frees every block of device
// memory, live buffers included, releases the primary context and ends the context's thread.
func (d *cudaDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	streams := make([]*cudaStream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	d.mu.Unlock()
	var errs []error
	for _, s := range streams {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	d.mu.Lock()
	live := d.live
	d.live, d.cache, d.cached = map[cu.DevicePtr]int{}, map[int][]cu.DevicePtr{}, 0
	d.mu.Unlock()
	d.opsMu.Lock()
	ops := d.ops
	d.ops = nil
	d.opsMu.Unlock()
	d.th.stop(func() {
		if ops != nil { // the module and the mapped host memory go with the context
			if err := ops.blas.destroy(); err != nil {
				errs = append(errs, fmt.Errorf("cuda: close %s: %w", d.info, err))
			}
		}
		for p := range live {
			_ = cu.MemFree(p)
		}
		if err := d.dev.ReleasePrimaryCtx(); err != nil {
			errs = append(errs, fmt.Errorf("cuda: close %s: release primary context: %w", d.info, err))
		}
	})
	return errors.Join(errs...)
}

// RegisterHost page-locks b and registers it with the driver (cuMemHostRegister, portable to every
// context) so that copies from and to it are DMA transfers that overlap compute. b should be
// memory outside the Go heap (pinned.Locked maps its own); memory on the Go heap works because the
// collector does not move objects, but must stay referenced until UnregisterHost.
func (d *cudaDevice) RegisterHost(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("cuda: register host memory with %s: empty range: %w", d.info, gpu.ErrRange)
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
	var r C.CUresult
	if err := d.th.do(func() error { r = C.stoke_host_register(C.uintptr_t(p), n); return nil }); err != nil {
		return err
	}
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: register %d bytes of host memory with %s: %w", len(b), d.info, cuResultError(r))
	}
	return nil
}

// UnregisterHost undoes RegisterHost for the same slice; no copy may be using b.
func (d *cudaDevice) UnregisterHost(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("cuda: unregister host memory from %s: empty range: %w", d.info, gpu.ErrRange)
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	var r C.CUresult
	if err := d.th.do(func() error { r = C.stoke_host_unregister(C.uintptr_t(p)); return nil }); err != nil {
		return err
	}
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: unregister %d bytes of host memory from %s: %w", len(b), d.info, cuResultError(r))
	}
	return nil
}

type cudaBuffer struct {
	dev   *cudaDevice
	ptr   cu.DevicePtr // 0 for an empty buffer
	n     int
	freed atomic.Bool
}

var _ gpu.Buffer = (*cudaBuffer)(nil)

func (b *cudaBuffer) Len() int { return b.n }

// Free hands the block back to the device's cache, where the next Alloc of its size class finds
// it; the memory itself stays allocated until the cache is trimmed or the device closes.
func (b *cudaBuffer) Free() error {
	if !b.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("cuda: free buffer of %d bytes on %s: %w", b.n, b.dev.info, gpu.ErrFreed)
	}
	if b.ptr != 0 {
		b.dev.release(b.ptr)
	}
	return nil
}
