// Package gemm is Stoke's CPU matrix multiply: a single-precision GEMM with the BLAS semantics of
// Sgemm, built the GotoBLAS/BLIS way. Panels of A and B are packed into contiguous, cache-sized
// blocks (a kc x NR sliver of B stays in L1 while an mc x kc block of A streams from L2), and a
// register-tiled micro-kernel multiplies an MR x kc sliver of A by a kc x NR sliver of B. On amd64
// the micro-kernel is Go assembly (AVX-512 16x... see kernels below, or AVX2+FMA), chosen at run
// time from the CPU's features; elsewhere, or with the noasm build tag, a pure-Go kernel runs.
//
// kernels/ calls Sgemm for every matrix multiply of training; it is internal because its only
// contract is that one function.
//
// # Determinism
//
// The result is bit-for-bit repeatable: the k dimension is cut into blocks that depend only on k,
// every element of C is accumulated over those blocks in increasing order by the same micro-kernel
// arithmetic (edge tiles run the same kernel on a padded copy), and C is split among goroutines
// along tile boundaries. Hence the result does not depend on goroutine timing, nor even on
// GOMAXPROCS; it does depend on the kernel the CPU selects (FMA rounds differently from a multiply
// and an add), so two different machines may differ in the last bits.
//
// # Concurrency
//
// Sgemm is safe for concurrent use on distinct (or read-only shared) A and B and distinct C.
// Large problems are split over runtime.GOMAXPROCS(0) goroutines, which have all finished before
// Sgemm returns; the calling goroutine computes one part itself.
//
// # Ownership
//
// Sgemm keeps no reference to a, b or c after it returns. Packing buffers come from a sync.Pool,
// so repeated calls allocate nothing in steady state.
package gemm
