//go:build cuda

// NCCL, loaded at run time by New (nccl_cuda.go): every function this package calls, all of which
// the library must define. See internal/cudainc/stoke_dl.h.

#include <stoke_dl.h>

#define STOKE_NCCL_SYMBOLS(X, lib) \
	X(lib, ncclAllReduce) X(lib, ncclCommAbort) X(lib, ncclCommDestroy) X(lib, ncclCommGetAsyncError) \
	X(lib, ncclCommInitRank) X(lib, ncclGetErrorString) X(lib, ncclGetLastError) X(lib, ncclGetUniqueId)
STOKE_DL_LIBRARY(nccl, STOKE_NCCL_SYMBOLS, 1, 3) // ncclInternalError
