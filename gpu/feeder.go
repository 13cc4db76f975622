package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoke-ml/stoke/pinned"
)

// ErrReleased: a DeviceBatch was released twice, or delivered after its release.
var ErrReleased = errors.New("batch already released")

// FeederConfig configures a Feeder. Zero values of optional fields mean their defaults.
type FeederConfig struct {
	// Device receives the batches; required.
	Device Device
	// Compute is the consumer's stream: DeviceBatch.Deliver makes it wait for the batch's copies,
	// and a buffer set is reused only after the work enqueued on it before DeviceBatch.Release.
	// nil means a host consumer: it must Synchronize DeviceBatch.Ready before reading the
	// buffers, and buffers are reused as soon as it releases them.
	Compute Stream
	// Sizes is the capacity in bytes of each device buffer of a batch, one per region of a slot
	// (for example images and labels); required, each > 0.
	Sizes []int
	// Ring is the number of device buffer sets; 0 means 3 (one being copied into, one ready, one
	// held by the consumer). The consumer can hold at most Ring batches at once.
	Ring int
	// Copied, when set, is called once for every batch whose copies have completed, in feed
	// order, by the feeder's goroutine that waits for them: the one place where a copy is seen to
	// complete, so that tracing it needs no wrapper around the device and no second wait. It must
	// be quick and must not call the feeder. Batches whose copies failed are not reported.
	Copied func(Copy)
}

// Copy describes one fed batch's host-to-device copies once they have completed.
type Copy struct {
	// Seq is the batch's number: Feed calls are numbered from 0 in call order (DeviceBatch.Seq).
	Seq int64
	// Bytes is what the copies moved.
	Bytes int64
	// Start and End bracket the copies: End is when the feeder saw them complete, Start is End
	// less the device time measured between the events recorded around them.
	Start, End time.Time
}

// Validate reports a configuration that NewFeeder would reject.
func (c FeederConfig) Validate() error {
	if c.Device == nil {
		return fmt.Errorf("gpu: feeder: no device: %w", ErrNoDevice)
	}
	if len(c.Sizes) == 0 {
		return fmt.Errorf("gpu: feeder: no buffer sizes: %w", ErrRange)
	}
	for i, n := range c.Sizes {
		if n <= 0 {
			return fmt.Errorf("gpu: feeder: buffer %d size %d; want > 0: %w", i, n, ErrRange)
		}
	}
	if c.Ring < 0 {
		return fmt.Errorf("gpu: feeder: ring %d; want >= 0: %w", c.Ring, ErrRange)
	}
	return nil
}

// Region is a byte range of a slot to copy to the device.
type Region struct{ Off, Len int }

// Feeder moves filled host slots to the device on its own copy stream, overlapping the copy of
// the next batch with the consumer's work on the current one. For every slot it enqueues the
// copies on the copy stream between two events, returns the slot to its pool when the copies have
// completed (in stream order, never on a guess), and hands back a DeviceBatch whose buffers come
// from a small ring; a buffer set is reused only after the compute stream has finished the work
// enqueued on it before the batch was released.
//
// # Concurrency
//
// Feed is meant to be called from one producer goroutine (batches are copied in the order of the
// calls); Deliver and Release from the consumer's. Stats and Flush may be called from anywhere.
//
// # Ownership
//
// Feed takes over the slot whatever its outcome. The feeder owns its copy stream and device
// buffers; Close frees them (buffers of batches still held are freed when they are released). It
// does not own the Device or the Compute stream.
type Feeder struct {
	cfg      FeederConfig
	copy     Stream
	ring     chan *ringEntry // free buffer sets
	closedCh chan struct{}
	feedMu   sync.Mutex // keeps one Feed's enqueues together
	feeds    atomic.Int64

	// The releaser goroutine waits for each copy's event, in order, releases the slot and
	// accounts the copy. It runs on a goroutine rather than as a host function on the copy
	// stream so that releasing (which may free memory through the device driver) never runs
	// inside a driver callback, and so that a failed stream cannot strand slots.
	wake       chan struct{} // capacity 1
	released   chan struct{} // closed when the releaser has returned
	streamGone context.Context
	stopWaits  context.CancelFunc // after the copy stream is closed no pending event can fire

	mu       sync.Mutex
	closed   bool
	stopping bool // the releaser returns once pending is empty
	pending  []pendingCopy
	relErr   error // first slot release failure
	entries  []*ringEntry
	stats    FeederStats
	first    time.Time     // first Feed
	done     int64         // batches whose copies the releaser has finished with
	progress chan struct{} // closed and replaced whenever done grows
}

type ringEntry struct {
	bufs  []Buffer
	after Event // compute-stream event the next copy into bufs waits for
	held  bool
}

// pendingCopy is a batch whose copies are enqueued: its slot goes back when done completes.
type pendingCopy struct {
	seq         int64
	slot        pinned.Slot
	start, done Event
	bytes       int64
}

// NewFeeder creates the copy stream, allocates Ring sets of device buffers of cfg.Sizes and
// starts the goroutine that releases slots after their copies; Close joins it.
func NewFeeder(cfg FeederConfig) (*Feeder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Ring == 0 {
		cfg.Ring = 3
	}
	cfg.Sizes = append([]int(nil), cfg.Sizes...)
	f := &Feeder{cfg: cfg, ring: make(chan *ringEntry, cfg.Ring), closedCh: make(chan struct{}),
		wake: make(chan struct{}, 1), released: make(chan struct{}), progress: make(chan struct{})}
	var err error
	if f.copy, err = cfg.Device.NewStream(); err != nil {
		return nil, fmt.Errorf("gpu: feeder: copy stream: %w", err)
	}
	f.streamGone, f.stopWaits = context.WithCancel(context.Background())
	go f.releaser()
	for range cfg.Ring {
		e := &ringEntry{}
		f.entries = append(f.entries, e)
		for _, n := range cfg.Sizes {
			var b Buffer
			if b, err = cfg.Device.Alloc(n); err != nil {
				return nil, errors.Join(fmt.Errorf("gpu: feeder: device buffers: %w", err), f.Close())
			}
			e.bufs = append(e.bufs, b)
		}
		f.ring <- e
	}
	return f, nil
}

// DeviceBatch is one batch on the device.
type DeviceBatch struct {
	// Buffers holds one device buffer per region, its data from offset 0; a buffer may be longer
	// than the region (Lens has the bytes copied).
	Buffers []Buffer
	Lens    []int
	// Ready completes when the batch's copies have completed.
	Ready Event
	// Seq numbers the batch among the feeder's Feed calls, from 0 (see Copy).
	Seq int64

	f     *Feeder
	entry *ringEntry
	mu    sync.Mutex
	done  bool
}

// Feed copies regions of slot, acquired from its pool and filled (still Filling: Feed marks it
// Ready, then InFlight, so that a slot's life after its filling is driven from here alone), into
// the next free buffer set, region i into buffer i. It blocks while the consumer holds every
// buffer set, until ctx ends or the feeder closes. Feed takes over the slot whatever the outcome:
// on success the slot goes back to its pool once its copies have completed (its event, not a
// guess); on error it is released as soon as nothing can read it.
func (f *Feeder) Feed(ctx context.Context, slot pinned.Slot, regions ...Region) (*DeviceBatch, error) {
	seq := f.feeds.Add(1) - 1
	mem := slot.Bytes()
	if err := f.checkRegions(mem, regions); err != nil {
		return nil, errors.Join(fmt.Errorf("gpu: feed slot %d: %w", slot.Index(), err), slot.Release())
	}
	var e *ringEntry
	select {
	case e = <-f.ring:
	case <-ctx.Done():
		return nil, errors.Join(fmt.Errorf("gpu: feed slot %d: %w", slot.Index(), ctx.Err()), slot.Release())
	case <-f.closedCh:
		return nil, errors.Join(fmt.Errorf("gpu: feed slot %d: %w", slot.Index(), ErrClosed), slot.Release())
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock() // Close frees e: it is not held
		return nil, errors.Join(fmt.Errorf("gpu: feed slot %d: %w", slot.Index(), ErrClosed), slot.Release())
	}
	e.held = true
	after := e.after
	e.after = nil
	if f.first.IsZero() {
		f.first = time.Now()
	}
	f.mu.Unlock()

	b := &DeviceBatch{Buffers: e.bufs, Lens: make([]int, len(regions)), Seq: seq, f: f, entry: e}
	t := pendingCopy{seq: seq, slot: slot}
	err := slot.Ready()
	if err == nil {
		err = slot.InFlight()
	}
	f.feedMu.Lock()
	if err == nil && after != nil {
		err = f.copy.Wait(after)
	}
	if err == nil {
		t.start, err = f.copy.Record()
	}
	for i, r := range regions {
		if err != nil {
			break
		}
		err = f.copy.CopyH2D(e.bufs[i], 0, mem[r.Off:r.Off+r.Len])
		b.Lens[i] = r.Len
		t.bytes += int64(r.Len)
	}
	if err == nil {
		t.done, err = f.copy.Record()
	}
	if err != nil {
		f.feedMu.Unlock()
		// Whatever was enqueued must finish before the slot may be reused.
		serr := f.copy.Synchronize(context.Background())
		return nil, errors.Join(fmt.Errorf("gpu: feed slot %d: %w", slot.Index(), err), serr, slot.Release(), f.put(e, after))
	}
	b.Ready = t.done
	f.mu.Lock()
	// Still under feedMu: Close stops the releaser only after taking feedMu, so it sees this.
	f.pending = append(f.pending, t)
	f.stats.Batches++
	if f.stats.Batches == 1 {
		f.stats.Pinned = slot.Pinned()
	} else {
		f.stats.Pinned = f.stats.Pinned && slot.Pinned()
	}
	f.mu.Unlock()
	f.feedMu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return b, nil
}

func (f *Feeder) checkRegions(mem []byte, regions []Region) error {
	if mem == nil {
		return fmt.Errorf("slot: %w", pinned.ErrReleased)
	}
	if len(regions) != len(f.cfg.Sizes) {
		return fmt.Errorf("%d regions for %d buffers: %w", len(regions), len(f.cfg.Sizes), ErrRange)
	}
	for i, r := range regions {
		if r.Off < 0 || r.Len < 0 || r.Off > len(mem) || r.Len > len(mem)-r.Off || r.Len > f.cfg.Sizes[i] {
			return fmt.Errorf("region %d %+v of a %d-byte slot into a %d-byte buffer: %w", i, r, len(mem), f.cfg.Sizes[i], ErrRange)
		}
	}
	return nil
}

// releaser releases each fed slot once its copy's event has completed, in feed order, accounts
// the copy's bytes and time, and reports it to Copied.
func (f *Feeder) releaser() {
	defer close(f.released)
	for {
		f.mu.Lock()
		for len(f.pending) == 0 {
			if f.stopping {
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			<-f.wake
			f.mu.Lock()
		}
		p := f.pending[0]
		f.pending[0] = pendingCopy{}
		f.pending = f.pending[1:]
		f.mu.Unlock()
		// Events complete even on a failed stream; streamGone ends the wait for one that
		// cannot complete any more because the copy stream is closed.
		err := p.done.Synchronize(f.streamGone)
		rerr := p.slot.Release()
		var d time.Duration
		if err == nil {
			d, err = p.done.Elapsed(p.start)
		}
		end := time.Now()
		if err == nil && f.cfg.Copied != nil {
			f.cfg.Copied(Copy{Seq: p.seq, Bytes: p.bytes, Start: end.Add(-d), End: end})
		}
		f.mu.Lock()
		if err == nil {
			f.stats.CopyTime += d
			f.stats.Bytes += p.bytes
		}
		if rerr != nil && f.relErr == nil {
			f.relErr = rerr
		}
		f.done++
		close(f.progress)
		f.progress = make(chan struct{})
		f.mu.Unlock()
	}
}

// Flush waits until the feeder is done with every batch fed so far: its copies have completed,
// its slot is back in its pool, Copied has been called for it and Stats counts it. It returns
// early with ctx's error, or with ErrClosed once the feeder has closed.
func (f *Feeder) Flush(ctx context.Context) error {
	f.mu.Lock()
	target := f.stats.Batches
	for f.done < target {
		ch := f.progress
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-f.released:
			return fmt.Errorf("gpu: feeder flush: %w", ErrClosed)
		}
		f.mu.Lock()
	}
	f.mu.Unlock()
	return nil
}

// Deliver makes the compute stream wait for the batch's copies (Compute.Wait(Ready)). Call it on
// the consumer's goroutine when the batch is handed over, after the consumer has enqueued its work
// on earlier batches: a Wait enqueued earlier, from the producer, would hold back that work too
// and serialize copies with compute. Without a Compute stream it does nothing.
func (b *DeviceBatch) Deliver() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return fmt.Errorf("gpu: deliver: %w", ErrReleased)
	}
	if b.f.cfg.Compute == nil {
		return nil
	}
	if err := b.f.cfg.Compute.Wait(b.Ready); err != nil {
		return fmt.Errorf("gpu: deliver: compute stream: %w", err)
	}
	return nil
}

// Release hands the batch's buffers back to the feeder: the next copy into them waits for the work
// enqueued on the compute stream so far. A second Release returns an error wrapping ErrReleased.
func (b *DeviceBatch) Release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return fmt.Errorf("gpu: release batch: %w", ErrReleased)
	}
	b.done = true
	var after Event
	if c := b.f.cfg.Compute; c != nil {
		// A closed or failed stream runs nothing more that could read the buffers.
		after, _ = c.Record()
	}
	return b.f.put(b.entry, after)
}

func (f *Feeder) put(e *ringEntry, after Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.held, e.after = false, after
	if f.closed {
		return freeEntry(e)
	}
	f.ring <- e // never blocks: the ring has room for every entry
	return nil
}

func freeEntry(e *ringEntry) error {
	var errs []error
	if e.after != nil {
		errs = append(errs, e.after.Synchronize(context.Background()))
	}
	for _, b := range e.bufs {
		errs = append(errs, b.Free())
	}
	e.bufs = nil
	return errors.Join(errs...)
}

// FeederStats describes the feeder's work so far.
type FeederStats struct {
	// Batches counts the batches enqueued. Bytes and CopyTime cover the copies that have
	// completed: bytes moved and device time between the events around each batch's copies.
	Batches  int64
	Bytes    int64
	CopyTime time.Duration
	// Elapsed runs from the first Feed to the snapshot.
	Elapsed time.Duration
	// Pinned is true when every slot fed so far was pinned.
	Pinned bool
}

// GBps is the achieved copy bandwidth, Bytes/CopyTime in GB/s; 0 before a copy has completed.
func (s FeederStats) GBps() float64 {
	if s.CopyTime <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.CopyTime.Seconds() / 1e9
}

// Stats returns a snapshot; safe to call while the feeder runs.
func (f *Feeder) Stats() FeederStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	if !f.first.IsZero() {
		st.Elapsed = time.Since(f.first)
	}
	return st
}

// Close waits for the enqueued copies, so that every fed slot is back in its pool, closes the copy
// stream, joins the releaser goroutine and frees the device buffers; buffers of batches the
// consumer still holds are freed when it releases them. Feeds blocked waiting for buffers return
// ErrClosed. A second Close returns nil.
func (f *Feeder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	close(f.closedCh)
	f.mu.Unlock()
	var errs []error
	if f.copy != nil {
		f.feedMu.Lock() // let a Feed that is enqueueing finish
		errs = append(errs, f.copy.Close())
		f.feedMu.Unlock()
		f.stopWaits()
		f.mu.Lock()
		f.stopping = true
		f.mu.Unlock()
		select {
		case f.wake <- struct{}{}:
		default:
		}
		<-f.released
	}
	f.mu.Lock()
	errs = append(errs, f.relErr)
	for _, e := range f.entries {
		if !e.held && e.bufs != nil {
			errs = append(errs, freeEntry(e))
		}
	}
	f.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gpu: feeder close: %w", err)
	}
	return nil
}
