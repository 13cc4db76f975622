/*
 * cudasim_abi.h: the table through which the stand-in driver (libcuda.so, runtime.cc) finds the
 * kernels of the simulator build of gpu/cuda/ops.cu (libcudasim_ops.so). scripts/cuda-sim.sh
 * generates the table from ops.cu's `extern "C" __global__ void NAME(` lines; the templates below
 * learn each kernel's parameter count, sizes and pointer-ness from its C++ signature and unpack the
 * driver's void** parameter array into typed arguments.
 */
#ifndef STOKE_CUDASIM_ABI_H
#define STOKE_CUDASIM_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <type_traits>
#include <utility>

namespace cudasim {

// CUDA's vector types, in this namespace so that the stand-in cuBLAS can also include NVIDIA's.
struct uint3 {
	unsigned int x, y, z;
};
struct dim3 {
	unsigned int x, y, z;
};

struct Block {
	uint3 idx;
	dim3 dim, grid;
};

// Thread is the part of a fiber that device code sees.
struct Thread {
	uint3 idx;
	const Block *block;
};

// The runtime's entry points for device code (libcuda.so exports them to libcudasim_ops.so).
#define CUDASIM_API __attribute__((visibility("default")))

// cur is the fiber running on this worker thread (a block never moves between worker threads).
extern CUDASIM_API thread_local Thread *cur __attribute__((tls_model("initial-exec")));

// Warp collective kinds, for the check that all lanes of one collective agree.
enum { kSyncwarp = 1, kShfl, kShflUp, kShflDown, kShflXor, kVote };

CUDASIM_API void syncthreads();
// warp_collective makes the calling lane wait for every lane of mask at a collective of the same
// kind; it returns the value that lane src passed (src < 0: the ballot of the lanes' values != 0).
CUDASIM_API uint64_t warp_collective(int kind, unsigned mask, uint64_t v, int src);
CUDASIM_API unsigned lane_id();
CUDASIM_API unsigned active_mask();
[[noreturn]] CUDASIM_API void fail(const char *what);


struct Kernel {
	const char *name; // NULL ends the table
	int nparams;
	const unsigned short *sizes;  // bytes of each parameter
	const unsigned char *pointer; // 1 where the parameter is a pointer
	void (*invoke)(void **params); // calls the kernel with *(T_i *)params[i]
};

// Dynamic shared memory (`extern __shared__ T name[]`): one array per distinct name.
struct Dynamic {
	void *(*addr)(); // the calling worker thread's instance
	size_t bytes;
};

constexpr size_t kMaxDynamicShared = 48 * 1024; // the default limit of a launch

template <class F>
struct Sig;
template <class... A>
struct Sig<void (*)(A...)> {
	static constexpr int n = sizeof...(A);
	static constexpr unsigned short sizes[sizeof...(A) + 1] = {(unsigned short)sizeof(A)..., 0};
	static constexpr unsigned char pointer[sizeof...(A) + 1] = {(unsigned char)std::is_pointer<A>::value..., 0};
	template <void (*F)(A...), size_t... I>
	static void call(void **p, std::index_sequence<I...>) {
		F(*static_cast<typename std::remove_cv<A>::type *>(p[I])...);
	}
	template <void (*F)(A...)>
	static void invoke(void **p) {
		call<F>(p, std::index_sequence_for<A...>{});
	}
};

} // namespace cudasim

#define CUDASIM_KERNEL(name)                                                                          \
	{ #name, cudasim::Sig<decltype(&name)>::n, cudasim::Sig<decltype(&name)>::sizes,                  \
	  cudasim::Sig<decltype(&name)>::pointer, &cudasim::Sig<decltype(&name)>::template invoke<&name> }

extern "C" const cudasim::Kernel cudasim_kernels[];
extern "C" const cudasim::Dynamic cudasim_dynamic[];

#endif
