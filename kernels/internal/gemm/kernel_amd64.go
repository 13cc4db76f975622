//go:build !noasm

package gemm

import "golang.org/x/sys/cpu"

// avx2 is the 6x16 AVX2+FMA kernel: 12 ymm accumulators, two for the B row, one broadcast. It
// reads A through strides, so row-major A needs no packing, and packs B^T with an 8x8 transpose.
var avx2 = &kernel{name: "avx2-6x16", mr: 6, nr: 16, fn: kernelAVX2, packBT: packBTAVX2}

// supported lists the kernels this CPU can run, the fastest first.
var supported = func() []*kernel {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []*kernel{avx2, generic}
	}
	return []*kernel{generic}
}()

func selectKernel() *kernel { return supported[0] }

// sgemm6x16AVX2 is implemented in kernel_amd64.s; it trusts its caller on bounds. Strides are
// in elements.
//
//go:noescape
func sgemm6x16AVX2(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)

func kernelAVX2(k int, a []float32, rs, ps int, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[5*rs+(k-1)*ps], b[16*k-1], c[5*ldc+15]
	sgemm6x16AVX2(k, &a[0], rs, ps, &b[0], &c[0], ldc, alpha, beta)
}

// packBT16AVX2 is implemented in kernel_amd64.s.
//
//go:noescape
func packBT16AVX2(dst, src *float32, ld, n8 int)

// packBTAVX2 packs kc columns of 16 rows of b (leading dimension ldb, starting at b[0]) into a
// kc x 16 sliver, the first kc/8*8 columns in assembly.
func packBTAVX2(dst, b []float32, ldb, kc int) {
	n8 := kc / 8
	if n8 > 0 {
		_, _ = dst[16*kc-1], b[15*ldb+kc-1]
		packBT16AVX2(&dst[0], &b[0], ldb, n8)
	}
	for p := n8 * 8; p < kc; p++ {
		for c := range 16 {
			dst[p*16+c] = b[c*ldb+p]
		}
	}
}
