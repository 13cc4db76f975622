package pinned

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// State is where a slot is in its lifecycle: Free -> Filling -> Ready -> InFlight -> Free.
type State uint8

const (
	// Free: in the pool, waiting for Acquire.
	Free State = iota
	// Filling: acquired by a producer that writes a batch into it.
	Filling
	// Ready: filled, waiting for its copy to the device.
	Ready
	// InFlight: a copy reads it; it is released when that copy has completed.
	InFlight
)

// String returns "free", "filling", "ready" or "in flight".
func (s State) String() string {
	switch s {
	case Free:
		return "free"
	case Filling:
		return "filling"
	case Ready:
		return "ready"
	case InFlight:
		return "in flight"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// PoisonByte fills released slots when Config.Poison is set.
const PoisonByte = 0xA5

// Config configures a Pool. The zero value of each field but SlotSize means its default.
type Config struct {
	// SlotSize is the size of one slot in bytes (one batch); required.
	SlotSize int
	// Prefetch is how many filled slots may wait for their copy; 0 means 2.
	Prefetch int
	// InFlight is how many slots may be being copied at once; 0 means 1.
	InFlight int
	// Allocator provides the memory; nil means Locked().
	Allocator Allocator
	// Poison fills every released slot with PoisonByte, so that a reader that uses a slot
	// after its release sees garbage instead of plausible stale data. It costs a memset per
	// release; meant for debugging and tests.
	Poison bool
}

func (c Config) withDefaults() Config {
	if c.Prefetch == 0 {
		c.Prefetch = 2
	}
	if c.InFlight == 0 {
		c.InFlight = 1
	}
	if c.Allocator == nil {
		c.Allocator = Locked()
	}
	return c
}

// Validate reports a configuration that NewPool would reject.
func (c Config) Validate() error {
	switch {
	case c.SlotSize <= 0:
		return fmt.Errorf("pinned: %w: slot size %d; want > 0", ErrSize, c.SlotSize)
	case c.Prefetch < 0:
		return fmt.Errorf("pinned: %w: prefetch %d; want >= 0", ErrSize, c.Prefetch)
	case c.InFlight < 0:
		return fmt.Errorf("pinned: %w: in flight %d; want >= 0", ErrSize, c.InFlight)
	case c.Prefetch > MaxSlots || c.InFlight > MaxSlots || c.Slots() > MaxSlots:
		return fmt.Errorf("pinned: %w: prefetch %d and in flight %d make more than %d slots", ErrSize, c.Prefetch, c.InFlight, MaxSlots)
	}
	return nil
}

// MaxSlots is the most slots a pool holds (Config.Slots).
const MaxSlots = 1 << 20

// Slots is the number of slots a pool with this configuration holds: Prefetch + InFlight + 1
// (the one being filled), after defaults. Memory is bounded by Slots() * SlotSize whatever the
// speed of the producer and of the consumer.
func (c Config) Slots() int {
	c = c.withDefaults()
	return c.Prefetch + c.InFlight + 1
}

type slotRec struct {
	block Block
	state State
	gen   uint64 // incremented on every Acquire; a handle with another gen is stale
	freed bool   // memory returned to the allocator (pool closed)
}

// Pool is a fixed set of equally sized host-memory slots, allocated once by NewPool. Producers
// Acquire a slot, fill it, mark it Ready; the copier marks it InFlight and Releases it when the
// copy that reads it has completed.
//
// Misuse (double release, use after release, a transition out of order, slots still in use at
// Close) returns errors wrapping ErrReleased, ErrState or ErrLeaked; built with the
// stoke_invariants tag, it panics instead, to stop at the first violation in tests.
//
// A Pool is safe for concurrent use.
type Pool struct {
	cfg      Config
	free     chan int // indices of free slots; capacity len(slots), so sends never block
	closedCh chan struct{}

	mu       sync.Mutex
	slots    []slotRec
	closed   bool
	inUse    int
	maxInUse int
	acquired uint64
	waited   time.Duration
}

// NewPool allocates cfg.Slots() slots of cfg.SlotSize bytes each.
func NewPool(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := cfg.Slots()
	p := &Pool{cfg: cfg, free: make(chan int, n), closedCh: make(chan struct{}), slots: make([]slotRec, n)}
	for i := range p.slots {
		b, err := cfg.Allocator.Alloc(cfg.SlotSize)
		if err != nil {
			errs := []error{fmt.Errorf("pinned: allocate slot %d of %d (%d bytes): %w", i, n, cfg.SlotSize, err)}
			for _, s := range p.slots[:i] {
				errs = append(errs, cfg.Allocator.Free(s.block))
			}
			return nil, errors.Join(errs...)
		}
		p.slots[i].block = b
		p.free <- i
	}
	return p, nil
}

// Acquire takes a free slot for filling, blocking until one is released, ctx ends (ctx's error)
// or the pool is closed (ErrClosed). The slot's contents are whatever was there before (poison,
// if Config.Poison).
func (p *Pool) Acquire(ctx context.Context) (Slot, error) {
	var i int
	select {
	case i = <-p.free:
	default:
		start := time.Now()
		select {
		case i = <-p.free:
		case <-ctx.Done():
			return Slot{}, fmt.Errorf("pinned: acquire slot: %w", ctx.Err())
		case <-p.closedCh:
			return Slot{}, fmt.Errorf("pinned: acquire slot: %w", ErrClosed)
		}
		p.mu.Lock()
		p.waited += time.Since(start)
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Slot{}, fmt.Errorf("pinned: acquire slot: %w", ErrClosed)
	}
	rec := &p.slots[i]
	rec.state = Filling
	rec.gen++
	p.acquired++
	p.inUse++
	p.maxInUse = max(p.maxInUse, p.inUse)
	return Slot{pool: p, index: i, gen: rec.gen}, nil
}

// Len is the number of slots, Config.Slots().
func (p *Pool) Len() int { return len(p.slots) }

// Pinned reports whether every slot is pinned; when not, Stats().Reason says why and how to fix
// it (typically: raise RLIMIT_MEMLOCK).
func (p *Pool) Pinned() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.slots {
		if !s.block.Pinned {
			return false
		}
	}
	return true
}

// SlotSize is the size of every slot in bytes.
func (p *Pool) SlotSize() int { return p.cfg.SlotSize }

// Stats is a snapshot of a pool.
type Stats struct {
	Slots    int
	SlotSize int
	// Pinned is true when every slot is pinned; Reason says why not (from the allocator).
	Pinned bool
	Reason string
	// Slots in each state now.
	Free, Filling, Ready, InFlight int
	// Acquired counts Acquire calls that returned a slot; MaxInUse is the most slots out of the
	// pool at once; AcquireWait is the total time Acquire blocked waiting for a free slot (the
	// producer outrunning the consumer).
	Acquired    uint64
	MaxInUse    int
	AcquireWait time.Duration
}

// Stats returns a snapshot; it is safe to call while the pool is in use.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Slots: len(p.slots), SlotSize: p.cfg.SlotSize, Pinned: true,
		Acquired: p.acquired, MaxInUse: p.maxInUse, AcquireWait: p.waited}
	for _, s := range p.slots {
		if !s.block.Pinned {
			st.Pinned = false
			if st.Reason == "" {
				st.Reason = s.block.Reason
			}
		}
		switch s.state {
		case Free:
			st.Free++
		case Filling:
			st.Filling++
		case Ready:
			st.Ready++
		case InFlight:
			st.InFlight++
		}
	}
	return st
}

// Close returns the memory of every free slot to the allocator. Slots still in use are reported
// in an error wrapping ErrLeaked and keep their memory (a copy may still be reading it) until
// they are released. Later Acquires return ErrClosed; a second Close returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closedCh)
	var errs []error
	var leaked []string
	for i := range p.slots {
		rec := &p.slots[i]
		if rec.state != Free {
			leaked = append(leaked, fmt.Sprintf("slot %d (%s)", i, rec.state))
			continue
		}
		errs = append(errs, p.freeLocked(i))
	}
	p.mu.Unlock()
	if len(leaked) > 0 {
		errs = append(errs, violation(fmt.Errorf("pinned: %w: %d of %d slots still in use at Close: %s", ErrLeaked, len(leaked), len(p.slots), strings.Join(leaked,
			", "))))
	}
	return errors.Join(errs...)
}

func (p *Pool) freeLocked(i int) error {
	rec := &p.slots[i]
	rec.freed = true
	if err := p.cfg.Allocator.Free(rec.block); err != nil {
		return fmt.Errorf("pinned: free slot %d: %w", i, err)
	}
	return nil
}

// Slot is a handle to one acquired slot. Handles are small values: copy them freely. Once the
// slot is released every handle to that acquisition is stale: its methods return ErrReleased
// and Bytes returns nil, even after the slot is acquired again.
type Slot struct {
	pool  *Pool
	index int
	gen   uint64
}

// check returns the slot's record if the handle is current; p.mu must be held. Its error goes
// through violation only after the lock is released, so that an invariants panic leaves the pool
// usable.
func (s Slot) check(op string) (*slotRec, error) {
	rec := &s.pool.slots[s.index]
	if rec.gen != s.gen || rec.state == Free {
		return nil, fmt.Errorf("pinned: slot %d: %s: %w", s.index, op, ErrReleased)
	}
	return rec, nil
}

func zeroSlot(op string) error {
	return violation(fmt.Errorf("pinned: %s: zero Slot: %w", op, ErrState))
}

// Index is the slot's position in the pool, in [0, Len()).
func (s Slot) Index() int { return s.index }

// Bytes is the slot's memory, SlotSize bytes; nil for a stale handle. The memory must not be
// touched after the slot is released.
func (s Slot) Bytes() []byte {
	if s.pool == nil {
		return nil
	}
	s.pool.mu.Lock()
	rec, err := s.check("bytes")
	s.pool.mu.Unlock()
	if err != nil {
		violation(err)
		return nil
	}
	return rec.block.Bytes
}

// Pinned reports whether the slot's memory is pinned.
func (s Slot) Pinned() bool {
	if s.pool == nil {
		return false
	}
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return s.pool.slots[s.index].block.Pinned
}

// State returns the slot's state, or an error wrapping ErrReleased for a stale handle.
func (s Slot) State() (State, error) {
	if s.pool == nil {
		return Free, fmt.Errorf("pinned: state: zero Slot: %w", ErrState)
	}
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	rec := &s.pool.slots[s.index]
	if rec.gen != s.gen || rec.state == Free {
		return Free, fmt.Errorf("pinned: slot %d: state: %w", s.index, ErrReleased)
	}
	return rec.state, nil
}

// Ready marks a filled slot (Filling -> Ready).
func (s Slot) Ready() error { return s.move(Filling, Ready, "ready") }

// InFlight marks a slot whose copy has been enqueued (Ready -> InFlight).
func (s Slot) InFlight() error { return s.move(Ready, InFlight, "in flight") }

func (s Slot) move(from, to State, op string) error {
	if s.pool == nil {
		return zeroSlot(op)
	}
	s.pool.mu.Lock()
	rec, err := s.check(op)
	if err == nil {
		if rec.state != from {
			err = fmt.Errorf("pinned: slot %d: %s: %w: slot is %s; want %s", s.index, op, ErrState, rec.state, from)
		} else {
			rec.state = to
		}
	}
	s.pool.mu.Unlock()
	if err != nil {
		return violation(err)
	}
	return nil
}

// Release returns the slot to the pool, from any state but Free: a producer abandoning a slot
// it filled (cancellation), or the copier once the copy reading it has completed. Releasing twice
// returns an error wrapping ErrReleased. With Config.Poison the memory is overwritten with
// PoisonByte first.
func (s Slot) Release() error {
	if s.pool == nil {
		return zeroSlot("release")
	}
	p := s.pool
	p.mu.Lock()
	rec, err := s.check("release")
	if err != nil {
		p.mu.Unlock()
		return violation(err)
	}
	rec.state = Free
	p.inUse--
	if p.cfg.Poison {
		// Under the lock: Close must not unmap the slot while it is being poisoned.
		b := rec.block.Bytes
		for i := range b {
			b[i] = PoisonByte
		}
	}
	if p.closed {
		err := p.freeLocked(s.index)
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()
	p.free <- s.index
	return nil
}
