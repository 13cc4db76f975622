/*
 * cuda.h: Stoke's wrapper around the CUDA driver API header.
 *
 * gorgonia.org/cu v0.9.6 calls five driver functions whose signatures changed in CUDA 13.0.
 * This file is found first on the include path (CGO_CFLAGS="-I<repo>/internal/cudainc ...",
 * never "-include", which breaks runtime/cgo), includes the real cuda.h and, for
 * CUDA_VERSION >= 13000, points those five names at static inline shims that keep the
 * CUDA 12 signatures and call the new entry points.
 *
 * For every version it also defers cuInit: gorgonia.org/cu calls cuInit from its package init and
 * prints and os.Exit(1)s when that fails (no GPU, no device node), so a binary built with
 * -tags cuda could not even start on such a machine. Here cuInit is a no-op that succeeds; Stoke's
 * CUDA backend (gpu/cuda/device.go) #undefs the macro and calls the driver's cuInit itself the first
 * time a device is asked for, and reports a failure as an error from gpu.Open("cuda").
 *
 * Run `go clean -cache` after editing: the go build cache does not track this file.
 */
#ifndef STOKE_CUDAINC_CUDA_H
#define STOKE_CUDAINC_CUDA_H

#include_next <cuda.h>

static inline CUresult stoke_cuInitDeferred(unsigned int flags) {
	(void)flags;
	return CUDA_SUCCESS;
}
#define cuInit stoke_cuInitDeferred

#if CUDA_VERSION >= 13000
#include <stddef.h>

/* The old API spelled "the host" as the device ordinal CU_DEVICE_CPU. */
static inline CUmemLocation stoke_cuMemLocation(CUdevice dev) {
	CUmemLocation loc;
	if (dev == CU_DEVICE_CPU) {
		loc.type = CU_MEM_LOCATION_TYPE_HOST;
		loc.id = 0;
	} else {
		loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
		loc.id = (int)dev;
	}
	return loc;
}

/* cuCtxCreate(pctx, flags, dev): _v4 takes optional creation parameters; none is the old behaviour. */
static inline CUresult stoke_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
	return cuCtxCreate_v4(pctx, NULL, flags, dev);
}
#undef cuCtxCreate
#define cuCtxCreate stoke_cuCtxCreate

/* cuMemAdvise(devPtr, count, advice, device): _v2 names the device as a CUmemLocation. */
static inline CUresult stoke_cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice dev) {
	return cuMemAdvise_v2(devPtr, count, advice, stoke_cuMemLocation(dev));
}
#undef cuMemAdvise
#define cuMemAdvise stoke_cuMemAdvise

/* cuMemPrefetchAsync(devPtr, count, dstDevice, stream): _v2 takes a location and flags (must be 0). */
static inline CUresult stoke_cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream) {
	return cuMemPrefetchAsync_v2(devPtr, count, stoke_cuMemLocation(dstDevice), 0, hStream);
}
#undef cuMemPrefetchAsync
#define cuMemPrefetchAsync stoke_cuMemPrefetchAsync

/* cuGraphAddDependencies(g, from, to, n): no edge data means default edges, as before. */
static inline CUresult stoke_cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to, size_t numDependencies) {
	return cuGraphAddDependencies_v2(hGraph, from, to, NULL, numDependencies);
}
#undef cuGraphAddDependencies
#define cuGraphAddDependencies stoke_cuGraphAddDependencies

/* cuGraphGetEdges(g, from, to, n): without edge data the driver reports CUDA_ERROR_LOSSY_QUERY
 * for non-default edges, which the old API could not create. */
static inline CUresult stoke_cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges) {
	return cuGraphGetEdges_v2(hGraph, from, to, NULL, numEdges);
}
#undef cuGraphGetEdges
#define cuGraphGetEdges stoke_cuGraphGetEdges

#endif /* CUDA_VERSION >= 13000 */
#endif /* STOKE_CUDAINC_CUDA_H */
