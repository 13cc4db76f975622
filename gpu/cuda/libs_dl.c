//go:build cuda

// NVRTC and cuBLAS, loaded at run time by the op set (libs.go): every function this package and
// gorgonia.org/cu/nvrtc call. Each library must define all of them. See
// internal/cudainc/stoke_dl.h.

#include <stoke_dl.h>

#define STOKE_NVRTC_SYMBOLS(X, lib) \
	X(lib, nvrtcAddNameExpression) X(lib, nvrtcCompileProgram) X(lib, nvrtcCreateProgram) X(lib, nvrtcDestroyProgram) \
	X(lib, nvrtcGetLoweredName) X(lib, nvrtcGetNumSupportedArchs) X(lib, nvrtcGetPTX) X(lib, nvrtcGetPTXSize) \
	X(lib, nvrtcGetProgramLog) X(lib, nvrtcGetProgramLogSize) X(lib, nvrtcGetSupportedArchs) X(lib, nvrtcVersion)
STOKE_DL_LIBRARY(nvrtc, STOKE_NVRTC_SYMBOLS, 1, 11) // NVRTC_ERROR_INTERNAL_ERROR

#define STOKE_CUBLAS_SYMBOLS(X, lib) \
	X(lib, cublasCreate_v2) X(lib, cublasDestroy_v2) X(lib, cublasGemmEx) X(lib, cublasGemmStridedBatchedEx) X(lib, cublasSetStream_v2) \
	X(lib, cublasSgemmStridedBatched) X(lib, cublasSgemm_v2)
STOKE_DL_LIBRARY(cublas, STOKE_CUBLAS_SYMBOLS, 1, 1) // CUBLAS_STATUS_NOT_INITIALIZED
