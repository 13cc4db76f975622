// Package gemm is Stoke's CPU matrix multiply: a single-precision GEMM with the BLAS semantics of
// Sgemm, built the GotoBLAS/BLIS way. Slivers of A and B are packed into contiguous, cache-sized
// blocks (a kc x NR sliver of B stays in L1 while an mc x kc block of A sits in L2), and a
// register-tiled micro-kernel multiplies an MR x kc sliver of A by a kc x NR sliver of B.
//
// The micro-kernel is chosen once, at start-up, from the CPU's features (golang.org/x/sys/cpu):
//
//   - amd64 with AVX-512F: a 12x32 Go assembly kernel (24 zmm accumulators), or its 8x32 variant
//     when m is a small multiple of 8 (the choice depends on m only); A and B^T are packed with
//     8x8 AVX transposes.
//   - amd64 with AVX2 and FMA: a 6x16 Go assembly kernel (12 ymm accumulators) that reads
//     row-major A in place through strides.
//   - anything else, or any CPU when built with the noasm tag: a 4x4 pure-Go kernel.
//
// kernels/ calls Sgemm for every matrix multiply of training; the package is internal because its
// only contract is that one function.
//
// # Determinism
//
// The result is bit-for-bit repeatable: the k dimension is cut into passes that depend only on k,
// every element of C is accumulated over those passes in increasing order by the same arithmetic
// (edge tiles run the same kernel on a padded copy), and C is split among goroutines along tile
// boundaries. Hence the result depends neither on goroutine timing nor on how many goroutines
// share the work (GOMAXPROCS, concurrent calls). The assembly kernels differ only in tile shape,
// so any amd64 CPU with FMA (AVX2 or AVX-512) gives the same bits; the pure-Go kernel rounds a
// multiply and an add separately and may differ from them in the last bits.
//
// # Concurrency
//
// Sgemm is safe for concurrent use (A and B may be shared; each call needs its own C). A problem
// of at least about a million multiply-adds is split over runtime.GOMAXPROCS(0) goroutines,
// divided by the number of Sgemm calls running at that moment, so that callers which already
// run multiplies in parallel do not oversubscribe the cores. The parts run on the calling
// goroutine and the workers of package par, which stay awake between calls; every part has
// finished before Sgemm returns.
//
// # Ownership
//
// Sgemm keeps no reference to a, b or c after it returns. Packing buffers (up to about 1 MiB for
// each goroutine that computes a part) are kept for reuse for the life of the process, at most
// 4*GOMAXPROCS of them, and per-call state comes from a sync.Pool, so repeated calls allocate
// nothing in steady state.
package gemm
