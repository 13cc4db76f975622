package gpu

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/bytesize"
	"github.com/stoke-ml/stoke/pinned"
)

func init() { Register(cpuBackend{}) }

// cpuBackend is the default, pure-Go device: device memory is Go memory and every stream is an
// ordered executor goroutine, so ordering and overlap behave as on a GPU.
type cpuBackend struct{}

var _ Backend = cpuBackend{}

func (cpuBackend) Name() string { return "cpu" }

func (cpuBackend) Devices() ([]Info, error) { return []Info{cpuInfo()}, nil }

func (cpuBackend) Open(index int) (Device, error) {
	if index != 0 {
		return nil, fmt.Errorf("gpu: %w: cpu:%d (the cpu backend has one device, cpu:0)", ErrNoDevice, index)
	}
	return &cpuDevice{info: cpuInfo(), avail: pinned.AvailableMemory(), streams: make(map[*cpuStream]struct{})}, nil
}

func cpuInfo() Info {
	return Info{
		Backend: "cpu",
		Name:    fmt.Sprintf("host %s/%s, %d cores", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Memory:  pinned.SystemMemory(),
	}
}

// bufferAlign is the alignment of CPU device buffers, so that SIMD kernels see aligned rows.
const bufferAlign = 64

type cpuDevice struct {
	info Info
	// avail is the host memory available when the device opened (0: unknown), the bound of the
	// bytes its live buffers hold, used: an allocation past it is ErrOutOfMemory, as on a GPU,
	// not a crash of the process when the host runs out.
	avail   int64
	used    atomic.Int64
	mu      sync.Mutex
	closed  bool
	streams map[*cpuStream]struct{}
}

var _ Device = (*cpuDevice)(nil)

func (d *cpuDevice) Info() Info { return d.info }

func (d *cpuDevice) NewStream() (Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("gpu: new stream on %s: %w", d.info, ErrClosed)
	}
	s := &cpuStream{dev: d, wake: make(chan struct{}, 1), done: make(chan struct{})}
	d.streams[s] = struct{}{}
	go s.run()
	return s, nil
}

func (d *cpuDevice) Alloc(n int) (Buffer, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: %w", n, d.info, ErrClosed)
	}
	if n < 0 {
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: %w", n, d.info, ErrRange)
	}
	for {
		used := d.used.Load()
		if d.avail > 0 && used+int64(n) > d.avail {
			return nil, fmt.Errorf("gpu: alloc %s on %s: %w (%s in use, %s available when it opened)", bytesize.Format(int64(n)), d.info, ErrOutOfMemory,
				bytesize.Format(used), bytesize.Format(d.avail))
		}
		if d.used.CompareAndSwap(used, used+int64(n)) {
			break
		}
	}
	raw := make([]byte, n+bufferAlign-1)
	skip := 0
	if n > 0 {
		if rem := uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % bufferAlign; rem != 0 {
			skip = int(bufferAlign - rem)
		}
	}
	return &cpuBuffer{dev: d, data: raw[skip : skip+n : skip+n]}, nil
}

func (d *cpuDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	streams := make([]*cpuStream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	d.mu.Unlock()
	var first error
	for _, s := range streams {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type cpuBuffer struct {
	dev   *cpuDevice
	data  []byte // never written after Alloc, so HostBytes may read it without a lock
	freed atomic.Bool
}

var _ Buffer = (*cpuBuffer)(nil)

func (b *cpuBuffer) Len() int { return len(b.data) }

// Free marks the buffer freed; the Go memory goes back to the garbage collector once nothing
// (such as a still-queued copy) refers to it, so a premature Free cannot corrupt memory.
func (b *cpuBuffer) Free() error {
	if !b.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("gpu: free buffer of %d bytes: %w", len(b.data), ErrFreed)
	}
	b.dev.used.Add(-int64(len(b.data)))
	return nil
}

type opKind uint8

const (
	opH2D opKind = iota
	opD2H
	opHost
	opRecord
	opWait
)

// op is one unit of stream work; a plain struct in a reused slice, so that enqueuing a copy or
// an event costs no allocation beyond the event itself.
type op struct {
	kind opKind
	buf  *cpuBuffer
	off  int
	host []byte
	fn   func() error
	ev   *cpuEvent
}

type cpuStream struct {
	dev    *cpuDevice
	mu     sync.Mutex
	queue  []op
	closed bool
	wake   chan struct{} // capacity 1: a pending wake-up survives until the executor looks
	done   chan struct{} // closed when the executor goroutine has returned
	sticky error         // owned by the executor goroutine; read by others only after done
}

var _ Stream = (*cpuStream)(nil)

func (s *cpuStream) enqueue(o op) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("gpu: enqueue on stream of %s: %w", s.dev.info, ErrClosed)
	}
	s.queue = append(s.queue, o)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

func (s *cpuStream) run() {
	defer close(s.done)
	var batch []op
	for {
		s.mu.Lock()
		for len(s.queue) == 0 {
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		for i := range batch {
			s.exec(&batch[i])
			batch[i] = op{} // drop references so buffers and closures can be collected
		}
	}
}

func (s *cpuStream) exec(o *op) {
	switch o.kind {
	case opRecord:
		o.ev.fire(s.sticky)
		return
	case opWait:
		<-o.ev.done
		return
	}
	if s.sticky != nil {
		return
	}
	switch o.kind {
	case opH2D:
		if o.buf.freed.Load() {
			s.sticky = fmt.Errorf("gpu: copy host to device: destination %w while the copy was queued", ErrFreed)
			return
		}
		copy(o.buf.data[o.off:], o.host)
	case opD2H:
		if o.buf.freed.Load() {
			s.sticky = fmt.Errorf("gpu: copy device to host: source %w while the copy was queued", ErrFreed)
			return
		}
		copy(o.host, o.buf.data[o.off:])
	case opHost:
		s.sticky = RunHost(o.fn)
	}
}

// RunHost runs fn as Stream.Host promises for every backend: it returns fn's error, or fn's panic
// as an error with its stack, for the stream to make its sticky error. A backend's stream calls it
// when it reaches a host function.
func RunHost(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gpu: host function panicked: %v\n%s", r, debug.Stack())
		}
	}()
	if err := fn(); err != nil {
		return fmt.Errorf("gpu: host function: %w", err)
	}
	return nil
}

func (s *cpuStream) buffer(b Buffer, what string) (*cpuBuffer, error) {
	cb, ok := b.(*cpuBuffer)
	if !ok || cb == nil {
		return nil, fmt.Errorf("gpu: %s: buffer %T: %w", what, b, ErrForeign)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("gpu: %s: %w", what, ErrFreed)
	}
	return cb, nil
}

func (s *cpuStream) CopyH2D(dst Buffer, dstOff int, src []byte) error {
	b, err := s.buffer(dst, "copy host to device")
	if err != nil {
		return err
	}
	if dstOff < 0 || dstOff > len(b.data) || len(src) > len(b.data)-dstOff {
		return fmt.Errorf("gpu: copy %d bytes host to device at offset %d of a %d-byte buffer: %w", len(src), dstOff, len(b.data), ErrRange)
	}
	return s.enqueue(op{kind: opH2D, buf: b, off: dstOff, host: src})
}

func (s *cpuStream) CopyD2H(dst []byte, src Buffer, srcOff int) error {
	b, err := s.buffer(src, "copy device to host")
	if err != nil {
		return err
	}
	if srcOff < 0 || srcOff > len(b.data) || len(dst) > len(b.data)-srcOff {
		return fmt.Errorf("gpu: copy %d bytes device to host from offset %d of a %d-byte buffer: %w", len(dst), srcOff, len(b.data), ErrRange)
	}
	return s.enqueue(op{kind: opD2H, buf: b, off: srcOff, host: dst})
}

func (s *cpuStream) Host(fn func() error) error {
	if fn == nil {
		return fmt.Errorf("gpu: host function: nil function: %w", ErrRange)
	}
	return s.enqueue(op{kind: opHost, fn: fn})
}

func (s *cpuStream) Record() (Event, error) {
	e := newCPUEvent(s.dev)
	if err := s.enqueue(op{kind: opRecord, ev: e}); err != nil {
		return nil, err
	}
	return e, nil
}

func (s *cpuStream) Wait(e Event) error {
	ce, ok := e.(*cpuEvent)
	if !ok || ce == nil {
		return fmt.Errorf("gpu: stream wait: event %T: %w", e, ErrForeign)
	}
	if ce.Done() {
		return nil // nothing to wait for: keep the queue short
	}
	return s.enqueue(op{kind: opWait, ev: ce})
}

func (s *cpuStream) Synchronize(ctx context.Context) error {
	e, err := s.Record()
	if err != nil {
		return err
	}
	return e.Synchronize(ctx)
}

func (s *cpuStream) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
	if !already {
		s.dev.mu.Lock()
		delete(s.dev.streams, s)
		s.dev.mu.Unlock()
	}
	return s.sticky
}

type cpuEvent struct {
	dev  *cpuDevice
	done chan struct{}
	at   time.Time // written before done is closed
	err  error     // the recording stream's sticky error when the event fired
}

var _ Event = (*cpuEvent)(nil)

func newCPUEvent(d *cpuDevice) *cpuEvent {
	return &cpuEvent{dev: d, done: make(chan struct{})}
}

func (e *cpuEvent) fire(err error) {
	e.at = time.Now()
	e.err = err
	close(e.done)
}

func (e *cpuEvent) Done() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *cpuEvent) Synchronize(ctx context.Context) error {
	select {
	case <-e.done:
		return e.err
	default:
	}
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return fmt.Errorf("gpu: event synchronize: %w", ctx.Err())
	}
}

func (e *cpuEvent) Elapsed(start Event) (time.Duration, error) {
	s, ok := start.(*cpuEvent)
	if !ok || s == nil || s.dev != e.dev {
		return 0, fmt.Errorf("gpu: elapsed: start event %T: %w", start, ErrForeign)
	}
	if !e.Done() || !s.Done() {
		return 0, fmt.Errorf("gpu: elapsed: %w", ErrNotReady)
	}
	return e.at.Sub(s.at), nil
}
