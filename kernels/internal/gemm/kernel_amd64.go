//go:build !noasm

package gemm

import "golang.org/x/sys/cpu"

// avx2 is the 6x16 AVX2+FMA kernel: 12 ymm accumulators, two for the B row, one broadcast.
var avx2 = &kernel{name: "avx2-6x16", mr: 6, nr: 16, fn: kernelAVX2}

// supported lists the kernels this CPU can run, the fastest first.
var supported = func() []*kernel {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []*kernel{avx2, generic}
	}
	return []*kernel{generic}
}()

func selectKernel() *kernel { return supported[0] }

// sgemm6x16AVX2 is implemented in kernel_amd64.s; it trusts its caller on bounds.
//
//go:noescape
func sgemm6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)

func kernelAVX2(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[6*k-1], b[16*k-1], c[5*ldc+15]
	sgemm6x16AVX2(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}
