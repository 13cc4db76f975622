//go:build cuda

package cuda

// The CUDA backend's streams and events (device.go has the backend, the device and its

/*
#include <stdint.h>
#include <cuda.h>

// stokeCUDAHostFunc is exported by hostfn.go.
extern void stokeCUDAHostFunc(uintptr_t handle);

void stoke_host_trampoline(void *data) { stokeCUDAHostFunc((uintptr_t)data); }

static CUresult stoke_launch_host(CUstream s, uintptr_t handle) {
	return cuLaunchHostFunc(s, stoke_host_trampoline, (void *)handle);
}

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
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
)

type cudaStream struct {
	dev    *cudaDevice
	s      cu.Stream
	closed atomic.Bool

	mu     sync.Mutex
	sticky error // the first failure of a host function or an enqueue
}

var _ gpu.Stream = (*cudaStream)(nil)

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
		return fmt.Errorf("cuda: %s on stream of %s: %w", what, s.dev.info, gpu.ErrClosed)
	}
	return nil
}

func (s *cudaStream) buffer(b gpu.Buffer, what string) (*cudaBuffer, error) {
	cb, ok := b.(*cudaBuffer)
	if !ok || cb == nil || cb.dev != s.dev {
		return nil, fmt.Errorf("cuda: %s: buffer %T is not memory of %s: %w", what, b, s.dev.info, gpu.ErrForeign)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("cuda: %s: %w", what, gpu.ErrFreed)
	}
	return cb, nil
}

// CopyH2D enqueues an asynchronous copy. From pinned (registered) memory it is a DMA transfer that
// returns at once; from pageable memory the driver stages it and returns once src may be reused.
// A copy enqueued once the stream's sticky error is known is skipped; one enqueued behind a host
// function that has not run yet still runs if that function fails (unlike on the CPU backend, the
// GPU's copy engine does not consult the host).
func (s *cudaStream) CopyH2D(dst gpu.Buffer, dstOff int, src []byte) error {
	const what = "copy host to device"
	if err := s.open(what); err != nil {
		return err
	}
	b, err := s.buffer(dst, what)
	if err != nil {
		return err
	}
	if dstOff < 0 || dstOff+len(src) > b.n {
		return fmt.Errorf("cuda: %s: %d bytes at offset %d of a %d-byte buffer: %w", what, len(src), dstOff, b.n, gpu.ErrRange)
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
		err = fmt.Errorf("cuda: %s on %s: %w", what, s.dev.info, err)
		s.fail(err)
	}
	return err
}

// CopyD2H enqueues an asynchronous copy into dst; dst is written when the stream reaches it.
func (s *cudaStream) CopyD2H(dst []byte, src gpu.Buffer, srcOff int) error {
	const what = "copy device to host"
	if err := s.open(what); err != nil {
		return err
	}
	b, err := s.buffer(src, what)
	if err != nil {
		return err
	}
	if srcOff < 0 || srcOff+len(dst) > b.n {
		return fmt.Errorf("cuda: %s: %d bytes at offset %d of a %d-byte buffer: %w", what, len(dst), srcOff, b.n, gpu.ErrRange)
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
		err = fmt.Errorf("cuda: %s on %s: %w", what, s.dev.info, err)
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
		return fmt.Errorf("cuda: host function: nil function: %w", gpu.ErrRange)
	}
	if err := s.open("host function"); err != nil {
		return err
	}
	return s.launchHost(func() {
		if s.err() != nil {
			return
		}
		if err := gpu.RunHost(fn); err != nil {
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
		err = fmt.Errorf("cuda: enqueue host function on %s: %w", s.dev.info, err)
		s.fail(err)
	}
	return err
}

// Record enqueues a CUDA event (with timing) and, after it, a host function that marks it done,
// so that waiting for it is a channel receive and needs no thread blocked in the driver.
func (s *cudaStream) Record() (gpu.Event, error) {
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
		err = fmt.Errorf("cuda: record event on %s: %w", s.dev.info, err)
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
func (s *cudaStream) Wait(e gpu.Event) error {
	ce, ok := e.(*cudaEvent)
	if !ok || ce == nil || ce.dev != s.dev {
		return fmt.Errorf("cuda: stream wait: event %T is not an event of %s: %w", e, s.dev.info, gpu.ErrForeign)
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
		err = fmt.Errorf("cuda: stream wait on %s: %w", s.dev.info, err)
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
		return fmt.Errorf("cuda: close stream of %s: %w", s.dev.info, gpu.ErrClosed)
	}
	// Wait for queued work: a host function still to run refers to this stream. A device fault
	// ends the wait too (the event's query reports it).
	if e, err := s.record(); err == nil {
		_ = e.Synchronize(context.Background())
	}
	err := s.dev.th.do(func() error { return s.s.Destroy() })
	if err != nil {
		err = fmt.Errorf("cuda: close stream on %s: %w", s.dev.info, err)
	}
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

var _ gpu.Event = (*cudaEvent)(nil)

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
				return fmt.Errorf("cuda: event on %s: %w", e.dev.info, err)
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

func (e *cudaEvent) Elapsed(start gpu.Event) (time.Duration, error) {
	se, ok := start.(*cudaEvent)
	if !ok || se == nil || se.dev != e.dev {
		return 0, fmt.Errorf("cuda: elapsed: event %T is not an event of %s: %w", start, e.dev.info, gpu.ErrForeign)
	}
	if !e.Done() || !se.Done() {
		return 0, fmt.Errorf("cuda: elapsed: %w", gpu.ErrNotReady)
	}
	var ms float64
	err := e.dev.th.do(func() (err error) { ms, err = se.ev.Elapsed(e.ev); return err })
	runtime.KeepAlive(se)
	runtime.KeepAlive(e)
	if err != nil {
		return 0, fmt.Errorf("cuda: elapsed time on %s: %w", e.dev.info, err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}
