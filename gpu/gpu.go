package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sentinel errors callers check with errors.Is.
var (
	// ErrUnknownBackend: Open was given a backend name that is not built into this binary.
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrNoDevice: the backend is built in but the requested device does not exist.
	ErrNoDevice = errors.New("no such device")
	// ErrClosed: the device, stream or feeder was used after Close.
	ErrClosed = errors.New("used after close")
	// ErrFreed: a buffer was used after Free, or freed twice.
	ErrFreed = errors.New("buffer freed")
	// ErrRange: a copy reaches outside its buffer.
	ErrRange = errors.New("out of range")
	// ErrForeign: an object of one backend or device was handed to another.
	ErrForeign = errors.New("object from another backend")
	// ErrNotReady: an event has not completed yet.
	ErrNotReady = errors.New("event not ready")
	// ErrOutOfMemory: an allocation does not fit in the device's memory (on the CUDA backend,
	// cudaErrorMemoryAllocation; on the CPU backend, the memory the host had available when the
	// device opened, less the device's live buffers).
	ErrOutOfMemory = errors.New("out of device memory")
)

// Info describes one device. Memory is in bytes (0 when unknown); ComputeCapability is empty
// for backends that have none (the CPU backend).
type Info struct {
	Backend           string
	Index             int
	Name              string
	Memory            int64
	ComputeCapability string
}

// String returns "backend:index (name)".
func (i Info) String() string {
	return fmt.Sprintf("%s:%d (%s)", i.Backend, i.Index, i.Name)
}

// Backend is one kind of device runtime. Backends register from init through Register and must
// not touch hardware there: a machine without a GPU imports every package.
type Backend interface {
	// Name is the name Open selects the backend by ("cpu", "cuda").
	Name() string
	// Devices lists the devices the backend finds; it may touch hardware. A backend that is built
	// in but finds no device returns an empty list (and may return an error saying why).
	Devices() ([]Info, error)
	// Open opens the device with the given index; a missing one gives an error wrapping ErrNoDevice.
	Open(index int) (Device, error)
}

// Device is one accelerator (or the host, for the CPU backend). Its methods are safe for
// concurrent use.
type Device interface {
	Info() Info
	// NewStream creates an ordered queue of work on the device.
	NewStream() (Stream, error)
	// Alloc allocates device memory of the given size (0 is allowed and gives an empty buffer).
	// Its contents are unspecified.
	Alloc(bytes int) (Buffer, error)
	// Close closes every stream still open on the device (waiting for their queued work) and
	// releases the device. Buffers must not be used afterwards.
	Close() error
}

// Buffer is device memory. Free must be called once no queued work uses the buffer any more
// (after a Synchronize or an event recorded after the last use); freeing twice gives ErrFreed.
type Buffer interface {
	Len() int
	Free() error
}

// Stream is an ordered queue of device work: copies, host functions (kernels of the CPU backend)
// and events run one after the other in the order they were enqueued, asynchronously to the
// caller. Its methods are safe for concurrent use, but work enqueued from several goroutines runs
// in whatever order the calls happened to reach the stream.
//
// Enqueue methods report invalid arguments (ranges, freed buffers, closed streams) at once; a
// failure while the work runs becomes the stream's sticky error, after which the stream skips
// further copies and host functions (events still complete, carrying the error) and Synchronize
// returns it.
type Stream interface {
	// CopyH2D enqueues a copy of src into dst at dstOff. src must stay untouched until an event
	// recorded after the copy has completed.
	CopyH2D(dst Buffer, dstOff int, src []byte) error
	// CopyD2H enqueues a copy of len(dst) bytes of src, from srcOff, into dst; dst must not be
	// read until an event recorded after the copy has completed.
	CopyD2H(dst []byte, src Buffer, srcOff int) error
	// Host enqueues fn to run in stream order on a host thread. fn must not enqueue work on the
	// stream it runs on and wait for it (that deadlocks). An error or panic from fn becomes the
	// stream's sticky error.
	Host(fn func() error) error
	// Record enqueues an event that completes when the stream reaches it.
	Record() (Event, error)
	// Wait makes work enqueued on this stream after the call wait until e has completed; the
	// caller does not block.
	Wait(e Event) error
	// Synchronize blocks until all work enqueued so far has run and returns the sticky error; if
	// ctx ends first it returns ctx's error and the work continues.
	Synchronize(ctx context.Context) error
	// Close waits for the queued work to finish and releases the stream; it returns the sticky
	// error. Later calls on the stream return ErrClosed.
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Synchronize blocks until the event has completed, and returns the error of the stream that
	// recorded it, if that stream had failed by then; or ctx's error if ctx ends first.
	Synchronize(ctx context.Context) error
	// Done reports whether the event has completed, without blocking.
	Done() bool
	// Elapsed is the device time from start to this event; both must have completed
	// (ErrNotReady otherwise) and come from the same device.
	Elapsed(start Event) (time.Duration, error)
}

var registry struct {
	mu       sync.Mutex
	backends []Backend
}

// Register adds a backend; a later registration with the same name replaces the earlier one.
// Backends call it from init.
func Register(b Backend) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.backends = slices.DeleteFunc(registry.backends, func(o Backend) bool { return o.Name() == b.Name() })
	registry.backends = append(registry.backends, b)
}

// Backends returns the backends built into this binary, sorted by name.
func Backends() []Backend {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	bs := slices.Clone(registry.backends)
	slices.SortFunc(bs, func(a, b Backend) int { return strings.Compare(a.Name(), b.Name()) })
	return bs
}

// Open opens a device by name: "cpu", "cuda" (the same as "cuda:0") or "cuda:N"; generally
// "backend" or "backend:index". A backend that is not built in gives an error wrapping
// ErrUnknownBackend (for "cuda" it says how to build package gpu/cuda in); a missing device,
// ErrNoDevice.
func Open(name string) (Device, error) {
	backend, index, err := parseName(name)
	if err != nil {
		return nil, err
	}
	registry.mu.Lock()
	i := slices.IndexFunc(registry.backends, func(b Backend) bool { return b.Name() == backend })
	var b Backend
	if i >= 0 {
		b = registry.backends[i]
	}
	registry.mu.Unlock()
	if b == nil {
		if backend == "cuda" {
			return nil, fmt.Errorf("gpu: %w %q: the CUDA backend is not in this binary; import _ %q and build with `-tags cuda` (needs cgo and CUDA's headers)",
				ErrUnknownBackend, name, "github.com/stoke-ml/stoke/gpu/cuda")
		}
		return nil, fmt.Errorf("gpu: %w %q (built in: %s)", ErrUnknownBackend, name, strings.Join(backendNames(), ", "))
	}
	d, err := b.Open(index)
	if err != nil {
		return nil, fmt.Errorf("gpu: open %q: %w", name, err)
	}
	return d, nil
}

func backendNames() []string {
	var names []string
	for _, b := range Backends() {
		names = append(names, b.Name())
	}
	return names
}

func parseName(name string) (backend string, index int, err error) {
	backend, idx, found := strings.Cut(strings.ToLower(name), ":")
	backend, idx = strings.TrimSpace(backend), strings.TrimSpace(idx)
	if backend == "" {
		return "", 0, fmt.Errorf("gpu: %w: empty device name %q", ErrUnknownBackend, name)
	}
	if !found {
		return backend, 0, nil
	}
	index, err = strconv.Atoi(idx)
	if err != nil || index < 0 {
		return "", 0, fmt.Errorf("gpu: %w: device %q: index must be a non-negative integer", ErrNoDevice, name)
	}
	return backend, index, nil
}

// HostBytes returns the Go memory behind a CPU-backend buffer, for CPU kernels running as Host
// functions; it returns false for buffers of other backends and for freed buffers.
func HostBytes(b Buffer) ([]byte, bool) {
	cb, ok := b.(*cpuBuffer)
	if !ok || cb.freed.Load() {
		return nil, false
	}
	return cb.data, true
}
