// Package cuda is Stoke's CUDA backend, whole: the devices, memory, streams and events of package
// gpu over the CUDA driver API (gorgonia.org/cu), and the op set of package kernels over them (the
// kernels of ops.cu, compiled at run time by NVRTC for the device's architecture, and GEMM through
// cuBLAS). It needs the cuda build tag, cgo and CUDA's headers; without the tag the package is
// empty, so importing it costs a pure-Go build nothing.
//
// A program enables the backend by importing the package, as it would a database/sql driver or an
// image format, and building with -tags cuda:
//
//	import _ "github.com/stoke-ml/stoke/gpu/cuda"
//
// The package registers "cuda" with gpu.Register and kernels.Register from init, touching no
// hardware: gpu.Open("cuda:N") then opens a device and kernels.For(dev) gives its op set. The
// stoke command imports it. The binary links no CUDA library: the driver (libcuda.so.1) is loaded
// when a device is first listed or opened, NVRTC and cuBLAS when a device's op set is first made
// (see internal/cudainc/stoke_dl.h), so a cuda binary starts, and its CPU backend works, on a host
// without them, and opening a CUDA device there fails naming the missing library.
//
// Devices also implement pinned.Registerer, so that pinned host slots are registered with the
// driver (pinned.Registered) and copies from them are asynchronous. Pointer, DriverStream and Do
// give the driver objects behind gpu's interfaces to code that calls CUDA itself (collective/nccl).
//
// # Concurrency
//
// A CUDA context is current per OS thread, so every driver call for a device runs on one locked
// goroutine of its own (Do); devices, streams, events and op sets are safe for concurrent use. A
// host function (gpu.Stream.Host) runs on a driver thread when its stream reaches it.
//
// # Ownership
//
// As package gpu says for every backend. Freed device memory goes to a cache of size classes
// and is reused by later Allocs of the device (STOKE_CUDA_EXACT_ALLOC=1 allocates exact sizes);
// the cache and the op sets' staging memory are released when the device closes.
package cuda
