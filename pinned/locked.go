package pinned

import "fmt"

// Locked returns the default allocator: page-aligned anonymous memory from mmap, page-locked
// with mlock so that it never swaps and a device can copy from it by DMA. When locking fails
// (typically because RLIMIT_MEMLOCK is lower than the pool), the allocator falls back to the same
// memory unlocked: the block works, reports Pinned false, and its Reason says how to raise the
// limit. On systems without mmap/mlock support it returns ordinary memory, never pinned.
func Locked() Allocator { return &lockedAllocator{lock: mlock} }

type lockedAllocator struct {
	lock func([]byte) error // mlock; replaced in tests
}

var _ Allocator = (*lockedAllocator)(nil)

func (a *lockedAllocator) Alloc(size int) (Block, error) {
	if size <= 0 {
		return Block{}, fmt.Errorf("pinned: %w: alloc %d bytes", ErrSize, size)
	}
	mem, err := mapAnon(size)
	if err != nil {
		return Block{}, fmt.Errorf("pinned: map %d bytes: %w", size, err)
	}
	if err := a.lock(mem); err != nil {
		return Block{Bytes: mem, Reason: fmt.Sprintf("pinned: locking %d bytes failed (%v); %s; using pageable memory", size, err, lockAdvice())}, nil
	}
	return Block{Bytes: mem, Pinned: true}, nil
}

// Free unmaps the block (which also unlocks it).
func (a *lockedAllocator) Free(b Block) error {
	if err := unmap(b.Bytes); err != nil {
		return fmt.Errorf("pinned: unmap %d bytes: %w", len(b.Bytes), err)
	}
	return nil
}
