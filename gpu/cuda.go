//go:build cuda

package gpu

/*
#include <stdint.h>
#include <cuda.h>

#ifndef STOKE_CUDAINC_CUDA_H
#error "build with internal/cudainc first on the include path: CGO_CFLAGS=-I<repo>/internal/cudainc (see scripts/cuda-check.sh)"
#endif
// The wrapper turns cuInit into a no-op for gorgonia.org/cu's package init; this is the driver's.
#undef cuInit

// stokeCUDAHostFunc is exported by cuda_hostfn.go.
extern void stokeCUDAHostFunc(uintptr_t handle);

void stoke_host_trampoline(void *data) { stokeCUDAHostFunc((uintptr_t)data); }

static CUresult stoke_launch_host(CUstream s, uintptr_t handle) {
	return cuLaunchHostFunc(s, stoke_host_trampoline, (void *)handle);
}
static CUresult stoke_init(void) { return cuInit(0); }
static CUresult stoke_host_register(uintptr_t p, size_t n) {
	return cuMemHostRegister((void *)p, n, CU_MEMHOSTREGISTER_PORTABLE);
}
static CUresult stoke_host_unregister(uintptr_t p) { return cuMemHostUnregister((void *)p); }

// The host side of a copy travels as an integer: it may be memory inside a Go object that holds
// pointers (a field of a struct), which cgo's pointer check refuses as an unsafe.Pointer although
// the driver keeps no reference to it (a copy from or to pageable memory is synchronous; pinned
// memory is not on the Go heap).
static CUresult stoke_copy_h2d(CUdeviceptr dst, uintptr_t src, size_t n, CUstream s) {
	return cuMemcpyHtoDAsync(dst, (const void *)src, n, s);
}
static CUresult stoke_copy_d2h(uintptr_t dst, CUdeviceptr src, size_t n, CUstream s) {
	return cuMemcpyDtoHAsync((void *)dst, src, n, s);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/pinned"
)

func init() { Register(cudaBackend{}) }

// cudaBackend is the NVIDIA backend over the CUDA driver API (gorgonia.org/cu). Registering it
// touches no hardware; the driver is initialised the first time a device is listed or opened.
type cudaBackend struct{}

var _ Backend = cudaBackend{}

func (cudaBackend) Name() string { return "cuda" }

var driver struct {
	once sync.Once
	err  error
}

// initDriver calls the driver's cuInit once; its failure (no GPU, no device node, a driver older
// than the toolkit) is reported by every later Devices and Open.
func initDriver() error {
	driver.once.Do(func() {
		if r := C.stoke_init(); r != C.CUDA_SUCCESS {
			driver.err = fmt.Errorf("%w: cuda: cuInit: %v (is an NVIDIA GPU attached and its driver loaded? nvidia-smi should list it)",
				ErrNoDevice, cuResultError(r))
		}
	})
	return driver.err
}

// cuResultError names a raw CUresult from our own cgo calls.
func cuResultError(r C.CUresult) error {
	var name *C.char
	if C.cuGetErrorName(r, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("CUresult %d", int(r))
	}
	return fmt.Errorf("%s (%d)", C.GoString(name), int(r))
}

func (cudaBackend) Devices() ([]Info, error) {
	if err := initDriver(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: cuda: count devices: %w", err)
	}
	infos := make([]Info, 0, n)
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
func cudaInfo(i int) (Info, error) {
	d, err := cu.GetDevice(i)
	if err != nil {
		return Info{}, fmt.Errorf("gpu: cuda:%d: %w", i, err)
	}
	name, err := d.Name()
	if err != nil {
		return Info{}, fmt.Errorf("gpu: cuda:%d: name: %w", i, err)
	}
	mem, err := d.TotalMem()
	if err != nil {
		return Info{}, fmt.Errorf("gpu: cuda:%d: memory: %w", i, err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return Info{}, fmt.Errorf("gpu: cuda:%d: compute capability: %w", i, err)
	}
	return Info{Backend: "cuda", Index: i, Name: name, Memory: mem, ComputeCapability: fmt.Sprintf("%d.%d", major, minor)}, nil
}

func (cudaBackend) Open(index int) (Device, error) {
	if err := initDriver(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: cuda: count devices: %w", err)
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("%w: cuda:%d (this machine has %d CUDA devices)", ErrNoDevice, index, n)
	}
	info, err := cudaInfo(index)
	if err != nil {
		return nil, err
	}
	d := &cudaDevice{
		info:    info,
		dev:     cu.Device(index),
		exact:   os.Getenv("STOKE_CUDA_EXACT_ALLOC") == "1",
		streams: make(map[*cudaStream]struct{}),
		cache:   make(map[int][]cu.DevicePtr),
		live:    make(map[cu.DevicePtr]int),
	}
	var pctx cu.CUContext
	d.th, err = startThread(func() error {
		var err error
		if pctx, err = d.dev.RetainPrimaryCtx(); err != nil {
			return fmt.Errorf("gpu: %s: retain primary context: %w", info, err)
		}
		if err = cu.SetCurrentContext(pctx); err != nil {
			_ = d.dev.ReleasePrimaryCtx()
			return fmt.Errorf("gpu: %s: make context current: %w", info, err)
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
		return ErrClosed
	}
}

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
	info  Info
	dev   cu.Device
	th    *cudaThread
	exact bool // STOKE_CUDA_EXACT_ALLOC=1: blocks of the exact size asked for (see Alloc)

	mu      sync.Mutex
	closed  bool
	streams map[*cudaStream]struct{}
	cache   map[int][]cu.DevicePtr // free blocks by size class
	live    map[cu.DevicePtr]int   // every block the driver gave us, with its size class
	cached  int64                  // bytes held in cache
}

var (
	_ Device            = (*cudaDevice)(nil)
	_ pinned.Registerer = (*cudaDevice)(nil)
)

func (d *cudaDevice) Info() Info { return d.info }

func (d *cudaDevice) NewStream() (Stream, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("gpu: new stream on %s: %w", d.info, ErrClosed)
	}
	var cs cu.Stream
	// Non-blocking: our streams never serialise with the legacy default stream.
	err := d.th.do(func() (err error) { cs, err = cu.MakeStream(cu.NonBlocking); return err })
	if err != nil {
		return nil, fmt.Errorf("gpu: new stream on %s: %w", d.info, err)
	}
	s := &cudaStream{dev: d, s: cs}
	d.mu.Lock()
	if d.closed { // closed while we were creating it
		d.mu.Unlock()
		_ = d.th.do(func() error { return cs.Destroy() })
		return nil, fmt.Errorf("gpu: new stream on %s: %w", d.info, ErrClosed)
	}
	d.streams[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
}

func (d *cudaDevice) Alloc(n int) (Buffer, error) {
	if n < 0 || (d.info.Memory > 0 && int64(n) > d.info.Memory) {
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: %w (device memory %d bytes)", n, d.info, ErrRange, d.info.Memory)
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
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: %w", n, d.info, ErrClosed)
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
	if err != nil {
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: %w", n, d.info, err)
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
	d.th.stop(func() {
		for p := range live {
			_ = cu.MemFree(p)
		}
		if err := d.dev.ReleasePrimaryCtx(); err != nil {
			errs = append(errs, fmt.Errorf("gpu: close %s: release primary context: %w", d.info, err))
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
		return fmt.Errorf("gpu: register host memory with %s: empty range: %w", d.info, ErrRange)
	}
	p, n := uintptr(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
	var r C.CUresult
	if err := d.th.do(func() error { r = C.stoke_host_register(C.uintptr_t(p), n); return nil }); err != nil {
		return err
	}
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("gpu: register %d bytes of host memory with %s: %w", len(b), d.info, cuResultError(r))
	}
	return nil
}

// UnregisterHost undoes RegisterHost for the same slice; no copy may be using b.
func (d *cudaDevice) UnregisterHost(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("gpu: unregister host memory from %s: empty range: %w", d.info, ErrRange)
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	var r C.CUresult
	if err := d.th.do(func() error { r = C.stoke_host_unregister(C.uintptr_t(p)); return nil }); err != nil {
		return err
	}
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("gpu: unregister %d bytes of host memory from %s: %w", len(b), d.info, cuResultError(r))
	}
	return nil
}

type cudaBuffer struct {
	dev   *cudaDevice
	ptr   cu.DevicePtr // 0 for an empty buffer
	n     int
	freed atomic.Bool
}

var _ Buffer = (*cudaBuffer)(nil)

func (b *cudaBuffer) Len() int { return b.n }

// Free hands the block back to the device's cache, where the next Alloc of its size class finds
// it; the memory itself stays allocated until the cache is trimmed or the device closes.
func (b *cudaBuffer) Free() error {
	if !b.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("gpu: free buffer of %d bytes on %s: %w", b.n, b.dev.info, ErrFreed)
	}
	if b.ptr != 0 {
		b.dev.release(b.ptr)
	}
	return nil
}

type cudaStream struct {
	dev    *cudaDevice
	s      cu.Stream
	closed atomic.Bool

	mu     sync.Mutex
	sticky error // the first failure of a host function or an enqueue
}

var _ Stream = (*cudaStream)(nil)

// c is the driver's handle of the stream for our own cgo calls.
func (s *cudaStream) c() C.CUstream { return C.CUstream(unsafe.Pointer(s.s.C())) }

func (s *cudaStream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sticky
}

func (s *cudaStream) fail(err error) {
	s.mu.Lock()
	if s.sticky == nil {
		s.sticky = err
	}
	s.mu.Unlock()
}

func (s *cudaStream) open(what string) error {
	if s.closed.Load() {
		return fmt.Errorf("gpu: %s on stream of %s: %w", what, s.dev.info, ErrClosed)
	}
	return nil
}

func (s *cudaStream) buffer(b Buffer, what string) (*cudaBuffer, error) {
	cb, ok := b.(*cudaBuffer)
	if !ok || cb == nil || cb.dev != s.dev {
		return nil, fmt.Errorf("gpu: %s: buffer %T is not memory of %s: %w", what, b, s.dev.info, ErrForeign)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("gpu: %s: %w", what, ErrFreed)
	}
	return cb, nil
}

// CopyH2D enqueues an asynchronous copy. From pinned (registered) memory it is a DMA transfer that
// returns at once; from pageable memory the driver stages it and returns once src may be reused.
// A copy enqueued once the stream's sticky error is known is skipped; one enqueued behind a host
// function that has not run yet still runs if that function fails (unlike on the CPU backend, the
// GPU's copy engine does not consult the host).
func (s *cudaStream) CopyH2D(dst Buffer, dstOff int, src []byte) error {
	const what = "copy host to device"
	if err := s.open(what); err != nil {
		return err
	}
	b, err := s.buffer(dst, what)
	if err != nil {
		return err
	}
	if dstOff < 0 || dstOff+len(src) > b.n {
		return fmt.Errorf("gpu: %s: %d bytes at offset %d of a %d-byte buffer: %w", what, len(src), dstOff, b.n, ErrRange)
	}
	if len(src) == 0 || s.err() != nil {
		return nil
	}
	var r C.CUresult
	err = s.dev.th.do(func() error {
		r = C.stoke_copy_h2d(C.CUdeviceptr(b.ptr+cu.DevicePtr(dstOff)), C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(src)))),
			C.size_t(len(src)), s.c())
		return nil
	})
	runtime.KeepAlive(src)
	if err == nil && r != C.CUDA_SUCCESS {
		err = cuResultError(r)
	}
	if err != nil {
		err = fmt.Errorf("gpu: %s on %s: %w", what, s.dev.info, err)
		s.fail(err)
	}
	return err
}

// CopyD2H enqueues an asynchronous copy into dst; dst is written when the stream reaches it.
func (s *cudaStream) CopyD2H(dst []byte, src Buffer, srcOff int) error {
	const what = "copy device to host"
	if err := s.open(what); err != nil {
		return err
	}
	b, err := s.buffer(src, what)
	if err != nil {
		return err
	}
	if srcOff < 0 || srcOff+len(dst) > b.n {
		return fmt.Errorf("gpu: %s: %d bytes at offset %d of a %d-byte buffer: %w", what, len(dst), srcOff, b.n, ErrRange)
	}
	if len(dst) == 0 || s.err() != nil {
		return nil
	}
	var r C.CUresult
	err = s.dev.th.do(func() error {
		r = C.stoke_copy_d2h(C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(dst)))), C.CUdeviceptr(b.ptr+cu.DevicePtr(srcOff)),
			C.size_t(len(dst)), s.c())
		return nil
	})
	runtime.KeepAlive(dst)
	if err == nil && r != C.CUDA_SUCCESS {
		err = cuResultError(r)
	}
	if err != nil {
		err = fmt.Errorf("gpu: %s on %s: %w", what, s.dev.info, err)
		s.fail(err)
	}
	return err
}

// Host enqueues fn with cuLaunchHostFunc: it runs on a driver thread when the stream reaches it,
// and later work on the stream waits for it to return. fn must not call the CUDA driver through
// this device in a way that waits for this stream (Synchronize, an event of a later point): that
// deadlocks, as in CUDA. Once the stream has a sticky error, later host functions are skipped
// when the stream reaches them.
func (s *cudaStream) Host(fn func() error) error {
	if fn == nil {
		return fmt.Errorf("gpu: host function: nil function: %w", ErrRange)
	}
	if err := s.open("host function"); err != nil {
		return err
	}
	return s.launchHost(func() {
		if s.err() != nil {
			return
		}
		if err := runHost(fn); err != nil {
			s.fail(err)
		}
	})
}

// launchHost enqueues f as a host function; f runs exactly once if the launch succeeds.
func (s *cudaStream) launchHost(f func()) error {
	h := cgo.NewHandle(f)
	var r C.CUresult
	err := s.dev.th.do(func() error {
		r = C.stoke_launch_host(s.c(), C.uintptr_t(h))
		return nil
	})
	if err == nil && r != C.CUDA_SUCCESS {
		err = cuResultError(r)
	}
	if err != nil {
		h.Delete()
		err = fmt.Errorf("gpu: enqueue host function on %s: %w", s.dev.info, err)
		s.fail(err)
	}
	return err
}

// Record enqueues a CUDA event (with timing) and, after it, a host function that marks it done,
// so that waiting for it is a channel receive and needs no thread blocked in the driver.
func (s *cudaStream) Record() (Event, error) {
	if err := s.open("record event"); err != nil {
		return nil, err
	}
	e, err := s.record()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return e, nil
}

func (s *cudaStream) record() (*cudaEvent, error) {
	e := &cudaEvent{dev: s.dev, done: make(chan struct{})}
	err := s.dev.th.do(func() error {
		ev, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return err
		}
		if err := ev.Record(s.s); err != nil {
			_ = cu.DestroyEvent(&ev)
			return err
		}
		e.ev = ev
		return nil
	})
	if err != nil {
		err = fmt.Errorf("gpu: record event on %s: %w", s.dev.info, err)
		s.fail(err)
		return nil, err
	}
	runtime.AddCleanup(e, destroyEvent, eventHandle{th: s.dev.th, ev: e.ev})
	if err := s.launchHost(func() { e.fire(s.err()) }); err != nil {
		return nil, err
	}
	return e, nil
}

type eventHandle struct {
	th *cudaThread
	ev cu.Event
}

// destroyEvent runs when an event is no longer referenced; after the device closed, the context
// is gone and with it the event.
func destroyEvent(h eventHandle) {
	_ = h.th.do(func() error { return cu.DestroyEvent(&h.ev) })
}

// Wait makes later work on s wait for e on the device (cuStreamWaitEvent); the caller does not
// block. e must be an event of the same device.
func (s *cudaStream) Wait(e Event) error {
	ce, ok := e.(*cudaEvent)
	if !ok || ce == nil || ce.dev != s.dev {
		return fmt.Errorf("gpu: stream wait: event %T is not an event of %s: %w", e, s.dev.info, ErrForeign)
	}
	if err := s.open("wait"); err != nil {
		return err
	}
	if ce.Done() {
		return nil
	}
	err := s.dev.th.do(func() error { return s.s.Wait(ce.ev, 0) })
	runtime.KeepAlive(ce)
	if err != nil {
		err = fmt.Errorf("gpu: stream wait on %s: %w", s.dev.info, err)
		s.fail(err)
	}
	return err
}

func (s *cudaStream) Synchronize(ctx context.Context) error {
	e, err := s.Record()
	if err != nil {
		return err
	}
	if err := e.Synchronize(ctx); err != nil {
		return err
	}
	return s.err()
}

func (s *cudaStream) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("gpu: close stream of %s: %w", s.dev.info, ErrClosed)
	}
	// Wait for queued work: a host function still to run refers to this stream. A device fault
	// ends the wait too (the event's query reports it).
	if e, err := s.record(); err == nil {
		_ = e.Synchronize(context.Background())
	}
	err := s.dev.th.do(func() error { return s.s.Destroy() })
	s.dev.mu.Lock()
	delete(s.dev.streams, s)
	s.dev.mu.Unlock()
	return errors.Join(s.err(), err)
}

type cudaEvent struct {
	dev  *cudaDevice
	ev   cu.Event
	done chan struct{}
	err  error // the stream's sticky error when the event was reached; read after done
}

var _ Event = (*cudaEvent)(nil)

func (e *cudaEvent) fire(err error) {
	e.err = err
	close(e.done)
}

// pollInterval is how often Synchronize asks the driver whether the stream failed: a context
// that hit a device fault never runs the host function that would mark the event done.
const pollInterval = 20 * time.Millisecond

func (e *cudaEvent) Synchronize(ctx context.Context) error {
	select {
	case <-e.done:
		return e.err
	default:
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.done:
			return e.err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			err := e.dev.th.do(func() error { return e.ev.Query() })
			if err != nil && !errors.Is(err, cu.NotReady) {
				return fmt.Errorf("gpu: event on %s: %w", e.dev.info, err)
			}
		}
	}
}

func (e *cudaEvent) Done() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *cudaEvent) Elapsed(start Event) (time.Duration, error) {
	se, ok := start.(*cudaEvent)
	if !ok || se == nil || se.dev != e.dev {
		return 0, fmt.Errorf("gpu: elapsed: event %T is not an event of %s: %w", start, e.dev.info, ErrForeign)
	}
	if !e.Done() || !se.Done() {
		return 0, ErrNotReady
	}
	var ms float64
	err := e.dev.th.do(func() (err error) { ms, err = se.ev.Elapsed(e.ev); return err })
	runtime.KeepAlive(se)
	runtime.KeepAlive(e)
	if err != nil {
		return 0, fmt.Errorf("gpu: elapsed time on %s: %w", e.dev.info, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}
