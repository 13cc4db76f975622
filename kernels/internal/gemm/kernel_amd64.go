//go:build !noasm

package gemm

import "golang.org/x/sys/cpu"

// avx2 is the 6x16 AVX2+FMA kernel: 12 ymm accumulators, two for the B row, one broadcast. It
// reads A through strides, so row-major A needs no packing, and packs B^T with 8x8 transposes.
var avx2 = &kernel{name: "avx2-6x16", mr: 6, nr: 16, fn: kernelAVX2, packBT: packBTAVX, scatter: scatterRows}

// avx512 is the 12x32 AVX-512 kernel: 24 zmm accumulators, two for the B row, six broadcasts.
var avx512 = &kernel{name: "avx512-12x32", mr: 12, nr: 32, fn: kernelAVX512, packBT: packBTAVX, packA: packA12AVX, scatter: scatterRows, narrow: avx512x8}

// avx512x8 is the 8x32 variant (16 accumulators), a little slower per multiply-add but without
// the padding 12 rows cost when m is a small multiple of 8 (the 32 or 64 channels of a CNN).
var avx512x8 = &kernel{name: "avx512-8x32", mr: 8, nr: 32, fn: kernel8x32AVX512, packBT: packBTAVX, packA: packA8AVX, scatter: scatterRows}

// supported lists the kernels this CPU can run, the fastest first.
var supported = func() []*kernel {
	var ks []*kernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512, avx512x8)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2)
	}
	return append(ks, generic)
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

// sgemm12x32AVX512 is implemented in kernel_amd64.s, like sgemm6x16AVX2.
//
//go:noescape
func sgemm12x32AVX512(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)

func kernelAVX512(k int, a []float32, rs, ps int, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[11*rs+(k-1)*ps], b[32*k-1], c[11*ldc+31]
	sgemm12x32AVX512(k, &a[0], rs, ps, &b[0], &c[0], ldc, alpha, beta)
}

// sgemm8x32AVX512 is implemented in kernel_amd64.s, like sgemm12x32AVX512.
//
//go:noescape
func sgemm8x32AVX512(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)

func kernel8x32AVX512(k int, a []float32, rs, ps int, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[7*rs+(k-1)*ps], b[32*k-1], c[7*ldc+31]
	sgemm8x32AVX512(k, &a[0], rs, ps, &b[0], &c[0], ldc, alpha, beta)
}

// packA8AVX packs an 8 x kc sliver of row-major A with one 8x8 transpose per 8 columns.
func packA8AVX(dst, a []float32, lda, kc int) {
	n8 := kc / 8
	if n8 > 0 {
		_, _ = dst[8*kc-1], a[7*lda+kc-1]
		packBT8AVX(&dst[0], &a[0], lda, n8, 8)
	}
	for p := n8 * 8; p < kc; p++ {
		for r := range 8 {
			dst[p*8+r] = a[r*lda+p]
		}
	}
}

// transpose8 is Transpose's 8x8 block transpose, where the CPU has AVX.
var transpose8 = func() func(dst, src *float32, ld, n8, nr int) {
	if cpu.X86.HasAVX {
		return packBT8AVX
	}
	return nil
}()

// packBT8AVX is implemented in kernel_amd64.s; it needs only AVX.
//
//go:noescape
func packBT8AVX(dst, src *float32, ld, n8, nr int)

// packBTAVX packs kc columns of the first w (<= nr) rows of b (leading dimension ldb, starting
// at b[0]) into a kc x nr sliver, 8 rows by 8 columns at a time in assembly; columns w to nr of
// the sliver are zero.
func packBTAVX(dst, b []float32, ldb, kc, nr, w int) {
	n8, w8 := kc/8, w/8*8
	if n8 > 0 && w8 > 0 {
		_, _ = dst[nr*kc-1], b[(w8-1)*ldb+kc-1]
		for c := 0; c < w8; c += 8 {
			packBT8AVX(&dst[c], &b[c*ldb], ldb, n8, nr)
		}
	}
	for p := n8 * 8; p < kc; p++ {
		for c := range w8 {
			dst[p*nr+c] = b[c*ldb+p]
		}
	}
	for c := w8; c < w; c++ {
		for p, v := range b[c*ldb : c*ldb+kc] {
			dst[p*nr+c] = v
		}
	}
	for c := w; c < nr; c++ {
		for p := range kc {
			dst[p*nr+c] = 0
		}
	}
}

// packA12AVX packs a 12 x kc sliver of row-major A as two overlapping 8-row transposes (rows 0-7
// and 4-11; columns 4-7 are written twice with the same values).
func packA12AVX(dst, a []float32, lda, kc int) {
	n8 := kc / 8
	if n8 > 0 {
		_, _ = dst[12*kc-1], a[11*lda+kc-1]
		packBT8AVX(&dst[0], &a[0], lda, n8, 12)
		packBT8AVX(&dst[4], &a[4*lda], lda, n8, 12)
	}
	for p := n8 * 8; p < kc; p++ {
		for r := range 12 {
			dst[p*12+r] = a[r*lda+p]
		}
	}
}

// scatterAVX is implemented in kernel_amd64.s; it needs only AVX.
//
//go:noescape
func scatterAVX(dst, src *float32, n, dstStride, srcStride, w2 int)

// scatterRows copies n rows of w floats (w even) from src (row i at i*srcStride) to
// dst (row i at i*dstStride).
func scatterRows(dst, src []float32, n, dstStride, srcStride, w int) {
	if n == 0 {
		return
	}
	_, _ = dst[(n-1)*dstStride+w-1], src[(n-1)*srcStride+w-1]
	scatterAVX(&dst[0], &src[0], n, dstStride, srcStride, w/2)
}
