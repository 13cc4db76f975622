/*
 * runtime.h: the simulator's internals shared by the stand-in driver (libcuda.cc) and the stand-in
 * cuBLAS (libcublas.cc): grid execution (runtime.cc), the guard-page allocator and the fault report.
 */
#ifndef STOKE_CUDASIM_RUNTIME_H
#define STOKE_CUDASIM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "cudasim_abi.h"

namespace cudasim {

// Launch is one kernel launch: the kernel, its parameters (copied at launch) and its geometry.
struct Launch {
	const Kernel *kernel;
	void **params;
	unsigned grid[3], block[3];
	unsigned shared; // dynamic shared memory bytes
};

// run_grid runs every block of l on the worker threads and returns when all have finished.
void run_grid(const Launch &l);

// Memory kinds of the guard-page allocator.
enum Kind { kDevice = 1, kHost = 2 };

// alloc maps n > 0 bytes whose last byte abuts an inaccessible page (device memory filled with
// 0xff bytes); NULL when out of memory.
void *alloc(size_t n, Kind kind);
// release makes an allocation inaccessible (kept so for a while, so a use after free faults);
// false if p is not the start of a live allocation of that kind.
bool release(void *p, Kind kind);
// within reports whether [p, p+n) lies inside one live allocation of one of kinds (a mask);
// exported for the stand-in NCCL's buffer checks.
CUDASIM_API bool within(uintptr_t p, size_t n, int kinds);
// describe writes what addr is (inside, past the end of, or freed) to buf.
void describe(uintptr_t addr, char *buf, size_t len);

// activity names what the calling thread does (a copy, a cuBLAS call) for the fault report while
// it touches device memory; kernels are named by the runtime itself.
struct CUDASIM_API Activity {
	explicit Activity(const char *what);
	~Activity();
};

// install_fault_handler reports an invalid access by simulated device work (kernel, copy, cuBLAS)
// with its context and aborts; other faults go to the handler installed before (Go's).
void install_fault_handler();

// die prints "cudasim: " and the message to stderr and aborts: a misuse that the real driver or
// cuBLAS would turn into undefined behaviour or a hang.
[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace cudasim

// Enqueues fn(data) as device work on stream s (cuBLAS uses it; exported by libcuda.so).
extern "C" int cudasim_enqueue(void *stream, void (*fn)(void *), void *data);

#endif
