//go:build !amd64 || noasm

package cpu

// normKernels lists the SIMD kernels of NormalizeU8 this CPU can run, the fastest first: none
// here, where the Go loop does all the work (see normalize_amd64.go).
var normKernels []*normKernel

var normalizeKernel *normKernel
