//go:build cuda

// The CUDA driver (libcuda.so.1), loaded at run time by loadDriver (device.go): every driver
// function this package and gorgonia.org/cu call, for CUDA 12 and 13 headers (the union
// of `nm -u` over their cgo objects; a function missing here fails the link of
// scripts/cuda-check.sh, whose stub libcuda.so is empty). A function the loaded driver lacks
// returns CUDA_ERROR_NOT_FOUND (500). See internal/cudainc/stoke_dl.h.

#include <stoke_dl.h>

// clang-format off
#define STOKE_DRIVER_SYMBOLS(X, lib) \
	X(lib, cuArray3DCreate_v2) X(lib, cuArray3DGetDescriptor_v2) X(lib, cuArrayCreate_v2) X(lib, cuArrayDestroy) \
	X(lib, cuArrayGetDescriptor_v2) X(lib, cuCtxCreate_v2) X(lib, cuCtxCreate_v4) X(lib, cuCtxDestroy_v2) \
	X(lib, cuCtxDisablePeerAccess) X(lib, cuCtxEnablePeerAccess) X(lib, cuCtxGetApiVersion) X(lib, cuCtxGetCacheConfig) \
	X(lib, cuCtxGetCurrent) X(lib, cuCtxGetDevice) X(lib, cuCtxGetFlags) X(lib, cuCtxGetLimit) \
	X(lib, cuCtxGetSharedMemConfig) X(lib, cuCtxGetStreamPriorityRange) X(lib, cuCtxPopCurrent_v2) X(lib, cuCtxPushCurrent_v2) \
	X(lib, cuCtxResetPersistingL2Cache) X(lib, cuCtxSetCacheConfig) X(lib, cuCtxSetCurrent) X(lib, cuCtxSetLimit) \
	X(lib, cuCtxSetSharedMemConfig) X(lib, cuCtxSynchronize) X(lib, cuDeviceCanAccessPeer) X(lib, cuDeviceGet) \
	X(lib, cuDeviceGetAttribute) X(lib, cuDeviceGetCount) X(lib, cuDeviceGetName) X(lib, cuDeviceGetP2PAttribute) \
	X(lib, cuDeviceGetUuid) X(lib, cuDeviceGetUuid_v2) X(lib, cuDevicePrimaryCtxGetState) X(lib, cuDevicePrimaryCtxRelease_v2) \
	X(lib, cuDevicePrimaryCtxReset_v2) X(lib, cuDevicePrimaryCtxRetain) X(lib, cuDevicePrimaryCtxSetFlags_v2) X(lib, cuDeviceTotalMem_v2) \
	X(lib, cuDriverGetVersion) X(lib, cuEventCreate) X(lib, cuEventDestroy_v2) X(lib, cuEventElapsedTime) \
	X(lib, cuEventElapsedTime_v2) X(lib, cuEventQuery) X(lib, cuEventRecord) X(lib, cuEventSynchronize) \
	X(lib, cuFuncGetAttribute) X(lib, cuFuncSetCacheConfig) X(lib, cuFuncSetSharedMemConfig) X(lib, cuGetErrorName) \
	X(lib, cuGraphAddChildGraphNode) X(lib, cuGraphAddDependencies) X(lib, cuGraphAddDependencies_v2) X(lib, cuGraphAddEmptyNode) \
	X(lib, cuGraphAddHostNode) X(lib, cuGraphAddKernelNode_v2) X(lib, cuGraphAddMemcpyNode) X(lib, cuGraphAddMemsetNode) \
	X(lib, cuGraphClone) X(lib, cuGraphCreate) X(lib, cuGraphDestroy) X(lib, cuGraphDestroyNode) \
	X(lib, cuGraphExecDestroy) X(lib, cuGraphGetEdges) X(lib, cuGraphGetEdges_v2) X(lib, cuInit) \
	X(lib, cuLaunchHostFunc) X(lib, cuLaunchKernel) X(lib, cuLinkAddData_v2) X(lib, cuLinkAddFile_v2) \
	X(lib, cuLinkComplete) X(lib, cuLinkCreate_v2) X(lib, cuLinkDestroy) X(lib, cuMemAdvise) \
	X(lib, cuMemAdvise_v2) X(lib, cuMemAllocManaged) X(lib, cuMemAllocPitch_v2) X(lib, cuMemAlloc_v2) \
	X(lib, cuMemFreeHost) X(lib, cuMemFree_v2) X(lib, cuMemGetAddressRange_v2) X(lib, cuMemGetInfo_v2) \
	X(lib, cuMemHostAlloc) X(lib, cuMemHostGetDevicePointer_v2) X(lib, cuMemHostRegister_v2) X(lib, cuMemHostUnregister) \
	X(lib, cuMemPrefetchAsync) X(lib, cuMemPrefetchAsync_v2) X(lib, cuMemcpy) X(lib, cuMemcpy2DAsync_v2) \
	X(lib, cuMemcpy2DUnaligned_v2) X(lib, cuMemcpy2D_v2) X(lib, cuMemcpy3DAsync_v2) X(lib, cuMemcpy3DPeer) \
	X(lib, cuMemcpy3DPeerAsync) X(lib, cuMemcpy3D_v2) X(lib, cuMemcpyAsync) X(lib, cuMemcpyAtoA_v2) \
	X(lib, cuMemcpyAtoD_v2) X(lib, cuMemcpyAtoHAsync_v2) X(lib, cuMemcpyAtoH_v2) X(lib, cuMemcpyDtoA_v2) \
	X(lib, cuMemcpyDtoDAsync_v2) X(lib, cuMemcpyDtoD_v2) X(lib, cuMemcpyDtoHAsync_v2) X(lib, cuMemcpyDtoH_v2) \
	X(lib, cuMemcpyHtoAAsync_v2) X(lib, cuMemcpyHtoA_v2) X(lib, cuMemcpyHtoDAsync_v2) X(lib, cuMemcpyHtoD_v2) \
	X(lib, cuMemcpyPeer) X(lib, cuMemcpyPeerAsync) X(lib, cuMemsetD16Async) X(lib, cuMemsetD16_v2) \
	X(lib, cuMemsetD2D16Async) X(lib, cuMemsetD2D16_v2) X(lib, cuMemsetD2D32Async) X(lib, cuMemsetD2D32_v2) \
	X(lib, cuMemsetD2D8Async) X(lib, cuMemsetD2D8_v2) X(lib, cuMemsetD32Async) X(lib, cuMemsetD32_v2) \
	X(lib, cuMemsetD8Async) X(lib, cuMemsetD8_v2) X(lib, cuModuleGetFunction) X(lib, cuModuleGetGlobal_v2) \
	X(lib, cuModuleGetSurfRef) X(lib, cuModuleGetTexRef) X(lib, cuModuleLoad) X(lib, cuModuleLoadData) \
	X(lib, cuModuleLoadDataEx) X(lib, cuModuleLoadFatBinary) X(lib, cuModuleUnload) X(lib, cuOccupancyMaxActiveBlocksPerMultiprocessor) \
	X(lib, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) X(lib, cuPointerGetAttribute) X(lib, cuPointerSetAttribute) X(lib, cuStreamAttachMemAsync) \
	X(lib, cuStreamCreate) X(lib, cuStreamCreateWithPriority) X(lib, cuStreamDestroy_v2) X(lib, cuStreamGetFlags) \
	X(lib, cuStreamGetPriority) X(lib, cuStreamQuery) X(lib, cuStreamSynchronize) X(lib, cuStreamWaitEvent) \
	X(lib, cuStreamWaitValue32_v2) X(lib, cuStreamWriteValue32_v2) X(lib, cuSurfRefGetArray) X(lib, cuSurfRefSetArray) \
	X(lib, cuTexRefGetAddressMode) X(lib, cuTexRefGetAddress_v2) X(lib, cuTexRefGetArray) X(lib, cuTexRefGetBorderColor) \
	X(lib, cuTexRefGetFilterMode) X(lib, cuTexRefGetFlags) X(lib, cuTexRefGetFormat) X(lib, cuTexRefGetMaxAnisotropy) \
	X(lib, cuTexRefSetAddress2D_v3) X(lib, cuTexRefSetAddressMode) X(lib, cuTexRefSetAddress_v2) X(lib, cuTexRefSetArray) \
	X(lib, cuTexRefSetBorderColor) X(lib, cuTexRefSetFilterMode) X(lib, cuTexRefSetFlags) X(lib, cuTexRefSetFormat) \
	X(lib, cuTexRefSetMaxAnisotropy) X(lib, cuTexRefSetMipmapFilterMode) X(lib, cuTexRefSetMipmapLevelBias) X(lib, cuTexRefSetMipmapLevelClamp)

// clang-format on

STOKE_DL_LIBRARY(driver, STOKE_DRIVER_SYMBOLS, 0, 500)
