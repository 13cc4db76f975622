// Package nccl is the CUDA backend of collective's all-reduce: NVIDIA's NCCL, run by the GPUs on the
// stream that produced the data, for the gradients of a data-parallel step (and a synchronized
// BatchNorm's statistics). It needs the cuda build tag (and cgo and nccl.h); without it the
// package is empty. The binary loads libnccl.so.2 in New, which fails naming it where it is
// missing.
//
// A Comm is one rank's communicator. New takes the rank, the world size and the exchange of
// NCCL's 128-byte unique id from the process group (a *collective.Group: the id travels through its
// store, as PyTorch's ProcessGroupNCCL passes it); AllReduce enqueues ncclAllReduce in place, in
// float32, bfloat16 or float16, with collective.Sum or collective.Avg; Synchronize waits for the stream and
// surfaces NCCL's asynchronous errors; Close releases the communicator.
//
// NCCL allows one rank per GPU: every rank opens a different device (on one host, rank r usually
// opens cuda:r), and a process holds one rank. The CPU stand-in of scripts/cuda-sim.sh
// (internal/cudainc/sim/libnccl.cc) lets the ranks' processes share its one device, so that the
// 2- and 4-rank tests run without a GPU.
//
// # Concurrency
//
// A Comm's methods are safe for concurrent use. Every NCCL call that enqueues or creates runs on
// the device's context thread (cuda.Do), which also keeps them in call order. All ranks must
// enqueue the same all-reduces (count, type, operation) in the same order: NCCL matches them by
// order. Synchronize starts one goroutine (polling ncclCommGetAsyncError) and joins it before it
// returns.
//
// # Ownership
//
// AllReduce works in place on the caller's buffer and returns at once. The buffer stays the
// caller's, but until the stream has passed the all-reduce (Synchronize, or an event recorded on
// the stream after it) the caller must not free it, and work on other streams must not read or
// write it without waiting for such an event. NCCL keeps nothing of the caller's; Close releases
// the communicator, after which the caller frees its buffers and streams as usual.
package nccl
