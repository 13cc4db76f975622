//go:build !noasm

package cpu

import "golang.org/x/sys/cpu"

// normalizeAVX2 sets dst[i] = float32(src[i])*mul + add for i < n (n a multiple of 8): 8 bytes
// widened to int32, converted, multiplied and added (two roundings, as normalizeGo), 32 per loop.
//
//go:noescape
func normalizeAVX2(dst *float32, src *uint8, n int, mul, add float32)

// normalizeAVX512 is normalizeAVX2 16 lanes wide (n a multiple of 16), 64 per loop.
//
//go:noescape
func normalizeAVX512(dst *float32, src *uint8, n int, mul, add float32)

// normKernels lists the SIMD kernels of NormalizeU8 this CPU can run, the fastest first (detected
// at start-up with x/sys/cpu); tests run each against the Go loop. Build with -tags noasm to leave
// them out.
var normKernels = func() []*normKernel {
	var ks []*normKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, &normKernel{"avx512", 16, normalizeAVX512})
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, &normKernel{"avx2", 8, normalizeAVX2})
	}
	return ks
}()

// normalizeKernel is the kernel normalizeRow uses (nil: the Go loop).
var normalizeKernel = first(normKernels)

func first(ks []*normKernel) *normKernel {
	if len(ks) == 0 {
		return nil
	}
	return ks[0]
}
