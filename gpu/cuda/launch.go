//go:build cuda

package cuda

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

#define STOKE_MAX_ARGS 32

// The argument-size descriptor after the NULL that ends kernelParams (see stoke_launch).
typedef struct {
	char magic[8];
	unsigned n;
	unsigned char size[STOKE_MAX_ARGS];
} stoke_arg_sizes;

// stoke_launch launches f with n 8-byte arguments and, when last is not NULL, a last argument
// of nlast 8-byte words (a struct passed by value). kernelParams holds the argument addresses,
// then a NULL, then the address of a descriptor of the argument sizes: a real driver reads only
// as many entries as the kernel has parameters and never sees the rest, while the CPU stand-in
// (internal/cudainc/sim) uses them to check the count and sizes against the kernel's signature.
// The driver copies the argument values before cuLaunchKernel returns.
static CUresult stoke_launch(uintptr_t f, unsigned grid, unsigned block, unsigned shared, uintptr_t stream,
	const uint64_t *args, int n, const uint64_t *last, int nlast) {
	void *params[STOKE_MAX_ARGS + 2];
	stoke_arg_sizes sizes;
	if (n + (last != NULL) > STOKE_MAX_ARGS || 8 * nlast > 255) return CUDA_ERROR_INVALID_VALUE;
	memcpy(sizes.magic, "stokearg", 8);
	for (int i = 0; i < n; i++) {
		params[i] = (void *)&args[i];
		sizes.size[i] = 8;
	}
	if (last) {
		params[n] = (void *)last;
		sizes.size[n] = (unsigned char)(8 * nlast);
		n++;
	}
	sizes.n = (unsigned)n;
	params[n] = NULL;
	params[n + 1] = &sizes;
	return cuLaunchKernel((CUfunction)f, grid, 1, 1, block, 1, 1, shared, (CUstream)stream, params, NULL);
}

static CUresult stoke_module_load(const char *ptx, uintptr_t *mod) {
	CUmodule m;
	CUresult r = cuModuleLoadData(&m, ptx);
	*mod = (uintptr_t)m;
	return r;
}

static CUresult stoke_function(uintptr_t mod, const char *name, uintptr_t *f) {
	CUfunction fn;
	CUresult r = cuModuleGetFunction(&fn, (CUmodule)mod, name);
	*f = (uintptr_t)fn;
	return r;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// Our own few lines of module loading and launching: gorgonia.org/cu's Function.Launch builds a
// kernelParams array of exactly the arguments given, without the end marker and size descriptor
// of stoke_launch.

// cudaFunction is a kernel of a loaded module (a CUfunction).
type cudaFunction C.uintptr_t

// loadKernels loads the PTX module and looks up the named kernels; call it on the context thread.
func loadKernels(ptx string, names []string) (map[string]cudaFunction, error) {
	cptx := C.CString(ptx)
	defer C.free(unsafe.Pointer(cptx))
	var mod C.uintptr_t
	if r := C.stoke_module_load(cptx, &mod); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuModuleLoadData: %w", cuError(r))
	}
	fns := make(map[string]cudaFunction, len(names))
	for _, name := range names {
		cname := C.CString(name)
		var f C.uintptr_t
		r := C.stoke_function(mod, cname, &f)
		C.free(unsafe.Pointer(cname))
		if r != C.CUDA_SUCCESS {
			return nil, fmt.Errorf("kernel %s: cuModuleGetFunction: %w", name, cuError(r))
		}
		fns[name] = cudaFunction(f)
	}
	return fns, nil
}

// maxLaunchArgs is STOKE_MAX_ARGS.
const maxLaunchArgs = 32

// maxByValueWords is the most 8-byte words of a struct argument (the descriptor's byte sizes).
const maxByValueWords = 31

// launch enqueues fn on s with a one-dimensional grid; every argument of args is 8 bytes (see
// ops.cu), and byValue, when not empty, is the kernel's last parameter: a struct of len(byValue)
// 8-byte words passed by value. Call it on the context thread.
func (fn cudaFunction) launch(s cu.Stream, grid, block int, args, byValue []uint64) error {
	n := len(args)
	if len(byValue) > 0 {
		n++
	}
	if n > maxLaunchArgs {
		return fmt.Errorf("%d kernel arguments; at most %d", n, maxLaunchArgs)
	}
	if len(byValue) > maxByValueWords {
		return fmt.Errorf("a %d-byte kernel argument; at most %d", 8*len(byValue), 8*maxByValueWords)
	}
	var argp, lastp *C.uint64_t
	if len(args) > 0 {
		argp = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	if len(byValue) > 0 {
		lastp = (*C.uint64_t)(unsafe.Pointer(&byValue[0]))
	}
	r := C.stoke_launch(C.uintptr_t(fn), C.unsigned(grid), C.unsigned(block), 0, C.uintptr_t(uintptr(unsafe.Pointer(s.C()))), argp, C.int(len(args)),
		lastp, C.int(len(byValue)))
	if r != C.CUDA_SUCCESS {
		return cuError(r)
	}
	return nil
}

// cuError names a CUresult of our own cgo calls.
func cuError(r C.CUresult) error {
	var name *C.char
	if C.cuGetErrorName(r, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("CUresult %d", int(r))
	}
	return fmt.Errorf("%s (%d)", C.GoString(name), int(r))
}
