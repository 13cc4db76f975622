// Package gpu is Stoke's backend-neutral device runtime: devices, device memory, streams, events
// and asynchronous copies, plus the Feeder that moves batches from pinned host slots to the
// device while the previous batch computes.
//
// Devices are opened by name with Open ("cpu", "cuda", "cuda:N"). The CPU backend is always built
// in and is a real device, not a mock: device memory is Go memory (64-byte aligned), each stream
// is an ordered executor goroutine, copies and host functions run when the stream reaches them,
// events complete when reached, and a stream that waits on another stream's event really waits.
// Kernels of the CPU backend are Host functions over HostBytes. Other backends live in packages of
// their own and register themselves (Register) when imported: the CUDA backend is package
// gpu/cuda, built with -tags cuda (import _ "github.com/stoke-ml/stoke/gpu/cuda"); a user's
// backend registers the same way. This package exports no backend's internals. A device that
// knows its peak float32 FLOP/s says so as a Peaker (PeakFLOPS): the CPU backend's from its cores,
// clock and vector width, the CUDA backend's from its multiprocessors and clock; a run's model
// FLOPs utilization is measured against it.
//
// The Feeder is the data path's last step. Per batch the producer (the loader) fills a
// pinned.Slot and calls Feed, which enqueues the slot's regions on the feeder's copy stream
// between two events and returns a DeviceBatch; the slot returns to its pool when the copy stream
// has passed the copies. The consumer calls Deliver on its own goroutine (its compute stream then
// waits for the copies), works on the buffers, and calls Release (the buffers are reused after
// the compute work enqueued so far). The feeder's own goroutine waits for each batch's copies,
// returns its slot and reports the copy (FeederConfig.Copied: bytes, start and end) in feed order;
// Flush waits until every batch fed so far is through; Stats gives bytes, copy time, GB/s and
// whether slots were pinned.
//
// # Concurrency
//
// Devices, streams and events are safe for concurrent use. Work on one stream runs in enqueue
// order; work on different streams runs concurrently unless ordered by Stream.Wait. Enqueueing
// never blocks on the work itself. Stream.Close and Device.Close wait for queued work and join
// the executor goroutines, so a host function that never returns makes them hang.
//
// # Ownership
//
// Host memory handed to CopyH2D or CopyD2H belongs to the stream until an event recorded after
// the copy has completed. A slot handed to Feeder.Feed belongs to the feeder, which releases it;
// a DeviceBatch's buffers belong to the consumer from Feed to Release, then to the feeder again. A
// Buffer belongs to whoever allocated it, who frees it once no queued
// work uses it any more. A stream's sticky error (a failed host function or copy) makes it skip
// later copies and host functions; events still complete and report the error.
package gpu
