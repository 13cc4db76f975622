/*
 * cudasim.h: what CUDA C++ device code needs to compile as host C++ and run on the CPU stand-in
 * (internal/cudainc/sim). scripts/cuda-sim.sh force-includes it (g++ -include cudasim.h) when it
 * compiles gpu/cuda/ops.cu itself, the very file NVRTC compiles for the GPU: no kernel has a
 * second copy.
 *
 * Execution model (runtime.cc): every CUDA thread of a block is a fiber with its own stack, so a
 * block runs with its real blockDim threads. threadIdx, blockIdx, blockDim and gridDim read the
 * running fiber. __syncthreads is a real barrier: a fiber runs until it reaches a barrier, a warp
 * collective or its end, then the next fiber runs; the barrier releases once every thread of the
 * block that has not exited arrived. Warp collectives (__shfl_*_sync, votes, __syncwarp) wait for
 * every lane named in the mask, with CUDA's 32-lane rules (a lane outside the mask, an exited lane
 * or lanes passing different masks is an error, reported with the kernel, block and thread).
 * __shared__ variables are per block: each worker thread runs one block at a time, and the runtime
 * fills all shared memory with 0xff bytes (NaN as float) before each block, so that a read before
 * the write that a missing __syncthreads would allow gives a wrong result instead of last block's
 * value.
 *
 * Only what gpu/cuda/ops.cu and its likely successors use is here; an intrinsic that is
 * missing fails to compile, loudly.
 */
#ifndef STOKE_CUDASIM_H
#define STOKE_CUDASIM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "cudasim_abi.h"

namespace cudasim {

template <class T>
inline uint64_t to_bits(T v) {
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffle of a type wider than 8 bytes");
	uint64_t b = 0;
	memcpy(&b, &v, sizeof v);
	return b;
}
template <class T>
inline T from_bits(uint64_t b) {
	T v;
	memcpy(&v, &b, sizeof v);
	return v;
}

// The source lane of a shuffle within groups of width lanes; a source outside the caller's group
// gives the caller its own value, as on the GPU.
inline int shfl_src(int kind, int lane, int arg, int width) {
	if (width <= 0 || width > 32 || (width & (width - 1)))
		fail("warp shuffle width must be a power of two <= 32");
	int base = lane & ~(width - 1);
	switch (kind) {
	case kShfl: return base + (arg & (width - 1));
	case kShflUp: return lane - base >= arg ? lane - arg : lane;
	case kShflDown: return lane - base + arg < width ? lane + arg : lane;
	default: { // xor
		int s = lane ^ arg;
		return s < base + width ? s : lane;
	}
	}
}

template <class T>
inline T shfl(int kind, unsigned mask, T v, int arg, int width) {
	return from_bits<T>(warp_collective(kind, mask, to_bits(v), shfl_src(kind, (int)lane_id(), arg, width)));
}

} // namespace cudasim

using cudasim::dim3;
using cudasim::uint3;

#define threadIdx (cudasim::cur->idx)
#define blockIdx (cudasim::cur->block->idx)
#define blockDim (cudasim::cur->block->dim)
#define gridDim (cudasim::cur->block->grid)
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// A block-scope thread_local is implicitly static: one instance per worker thread, i.e. per
// running block. `extern __shared__ T name[]` (dynamic shared memory) resolves to the storage the
// generated kernel table defines for each such name (scripts/cuda-sim.sh).
#define __shared__ thread_local __attribute__((tls_model("initial-exec")))

inline void __syncthreads() { cudasim::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { cudasim::warp_collective(cudasim::kSyncwarp, mask, 0, 0); }
inline unsigned __activemask() { return cudasim::active_mask(); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) { return cudasim::shfl(cudasim::kShfl, mask, v, src, width); }
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) { return cudasim::shfl(cudasim::kShflUp, mask, v, (int)d, width); }
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) { return cudasim::shfl(cudasim::kShflDown, mask, v, (int)d, width); }
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) { return cudasim::shfl(cudasim::kShflXor, mask, v, lm, width); }
inline unsigned __ballot_sync(unsigned mask, int p) { return (unsigned)cudasim::warp_collective(cudasim::kVote, mask, p != 0, -1); }
inline int __any_sync(unsigned mask, int p) { return __ballot_sync(mask, p) != 0; }
inline int __all_sync(unsigned mask, int p) { return __ballot_sync(mask, p) == mask; }

// Atomics: blocks of one launch run on several worker threads, so global memory needs real ones.
template <class T>
inline T atomicAdd(T *p, T v) {
	if constexpr (std::is_floating_point<T>::value) {
		T old, sum;
		__atomic_load(p, &old, __ATOMIC_RELAXED);
		do {
			sum = old + v;
		} while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
		return old;
	} else {
		return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
	}
}
template <class T>
inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <class T>
inline T atomicExch(T *p, T v) {
	T old;
	__atomic_exchange(p, &v, &old, __ATOMIC_SEQ_CST);
	return old;
}
template <class T>
inline T atomicCAS(T *p, T cmp, T v) {
	__atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return cmp;
}
template <class T>
inline T atomicMin(T *p, T v) {
	T old = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
	}
	return old;
}
template <class T>
inline T atomicMax(T *p, T v) {
	T old = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (v > old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
	}
	return old;
}
template <class T>
inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T>
inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T>
inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }

// Integer min/max as CUDA's device overloads (the usual arithmetic conversions).
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b) { return b < a ? b : a; }
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b) { return a < b ? b : a; }

// Math intrinsics: the fast variants as their accurate counterparts (ops.cu is compiled with
// --fmad=false and uses none of them today).
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x < 0 ? 0.0f : (x > 1 ? 1.0f : x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __int_as_float(int v) { return cudasim::from_bits<float>((uint32_t)v); }
inline int __float_as_int(float v) { return (int)(uint32_t)cudasim::to_bits(v); }
inline float __uint_as_float(unsigned v) { return cudasim::from_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return (unsigned)cudasim::to_bits(v); }
inline double __longlong_as_double(long long v) { return cudasim::from_bits<double>((uint64_t)v); }
inline long long __double_as_longlong(double v) { return (long long)cudasim::to_bits(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
template <class T>
inline T __ldg(const T *p) { return *p; }

#endif /* STOKE_CUDASIM_H */
