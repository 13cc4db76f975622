package pinned

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Sentinel errors callers check with errors.Is.
var (
	// ErrSize: a size or count is out of range.
	ErrSize = errors.New("invalid size")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("pool closed")
	// ErrReleased: a slot handle was used after its slot was released (double release, or use
	// after release).
	ErrReleased = errors.New("slot already released")
	// ErrState: a slot moved out of its lifecycle order (free -> filling -> ready -> in flight
	// -> free).
	ErrState = errors.New("slot lifecycle violation")
	// ErrLeaked: the pool was closed while slots were still in use.
	ErrLeaked = errors.New("slots leaked")
)

// Block is one allocation of host memory.
type Block struct {
	// Bytes is the memory; Free must receive the Block unchanged.
	Bytes []byte
	// Pinned reports whether the memory is page-locked (and, for a Registered allocator,
	// registered with the device), so that a device can copy from it by DMA.
	Pinned bool
	// Reason says why the memory is not pinned and how to fix it; empty when Pinned.
	Reason string
}

// Allocator provides host memory for slot pools. Implementations are safe for concurrent use.
type Allocator interface {
	// Alloc returns size bytes (size > 0) of zeroed host memory.
	Alloc(size int) (Block, error)
	// Free releases a block returned by Alloc; nothing may use its Bytes afterwards.
	Free(b Block) error
}

// Heap returns an allocator of ordinary garbage-collected memory that is never pinned; it is
// the baseline that pinned memory is measured against.
func Heap() Allocator { return heapAllocator{} }

type heapAllocator struct{}

var _ Allocator = heapAllocator{}

func (heapAllocator) Alloc(size int) (Block, error) {
	if size <= 0 {
		return Block{}, fmt.Errorf("pinned: %w: alloc %d bytes", ErrSize, size)
	}
	return Block{Bytes: make([]byte, size), Reason: "ordinary heap memory (pinned.Heap)"}, nil
}

func (heapAllocator) Free(Block) error { return nil }

// Registerer is implemented by devices that can register host memory with their driver (the
// CUDA backend: cuMemHostRegister), making it usable for asynchronous DMA copies.
type Registerer interface {
	RegisterHost(b []byte) error
	UnregisterHost(b []byte) error
}

// Registered wraps base so that every block is also registered with r (which page-locks it for
// the device, as cuMemHostRegister does): a registered block is Pinned. A block whose
// registration fails is still returned, not pinned, with the registration error as its Reason:
// copies from it work, only slower.
func Registered(base Allocator, r Registerer) Allocator {
	return &registeredAllocator{base: base, r: r, registered: make(map[*byte]bool)}
}

type registeredAllocator struct {
	base       Allocator
	r          Registerer
	mu         sync.Mutex
	registered map[*byte]bool // blocks to unregister on Free, by address
}

var _ Allocator = (*registeredAllocator)(nil)

func (a *registeredAllocator) Alloc(size int) (Block, error) {
	b, err := a.base.Alloc(size)
	if err != nil {
		return b, err
	}
	if err := a.r.RegisterHost(b.Bytes); err != nil {
		b.Pinned = false
		b.Reason = fmt.Sprintf("pinned: registering %d bytes with the device failed (%v); copies use pageable memory", size, err)
		return b, nil
	}
	a.mu.Lock()
	a.registered[unsafe.SliceData(b.Bytes)] = true
	a.mu.Unlock()
	b.Pinned, b.Reason = true, ""
	return b, nil
}

func (a *registeredAllocator) Free(b Block) error {
	a.mu.Lock()
	reg := a.registered[unsafe.SliceData(b.Bytes)]
	delete(a.registered, unsafe.SliceData(b.Bytes))
	a.mu.Unlock()
	var uerr error
	if reg {
		if err := a.r.UnregisterHost(b.Bytes); err != nil {
			uerr = fmt.Errorf("pinned: unregister %d bytes: %w", len(b.Bytes), err)
		}
	}
	return errors.Join(uerr, a.base.Free(b))
}
