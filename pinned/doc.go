// Package pinned provides page-locked ("pinned") host memory and the fixed pool of batch slots
// that the loader fills and the gpu Feeder copies to the device.
//
// An Allocator provides the memory: Locked (the default) maps anonymous pages and locks them with
// mlock, falling back to unlocked memory with a Reason saying how to raise RLIMIT_MEMLOCK; Heap
// is ordinary Go memory; Registered additionally registers each block with a device that
// implements Registerer (the CUDA backend), so the driver can DMA from it.
//
// A Pool holds Config.Slots() = Prefetch + InFlight + 1 slots of one batch each, allocated once,
// so memory stays bounded whatever the speed of either side. A slot's lifecycle is
// Free -> Filling (Acquire) -> Ready -> InFlight -> Free (Release). What a slot contains (the
// layout of images and labels in it) is the caller's business.
//
// # Concurrency
//
// Pool and Slot methods are safe for concurrent use. Acquire blocks while every slot is in use,
// until a Release, the end of its context, or Close.
//
// # Ownership
//
// Acquire hands a slot to the producer. Whoever holds the slot's handle releases it exactly once:
// the producer if it abandons the slot, otherwise the copier, and only after the copy that reads
// the slot has completed (an event, never a guess). After Release the slot's Bytes must not be
// touched; handles to it go stale. Close frees the memory of free slots at once and of leaked
// ones when they are finally released, so memory a copy may still read is never unmapped.
package pinned
