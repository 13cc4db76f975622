//go:build cuda

package cuda

/*
#include <stdint.h>
#include <cublas_v2.h>

// Our own few lines of cuBLAS: gorgonia.org/cu/blas has no cublasSetStream, so its calls would
// run on the legacy default stream and serialise with every other stream.
static cublasStatus_t stoke_blas_create(uintptr_t *h) {
	cublasHandle_t handle;
	cublasStatus_t st = cublasCreate(&handle);
	*h = (uintptr_t)handle;
	return st;
}
static cublasStatus_t stoke_blas_destroy(uintptr_t h) { return cublasDestroy((cublasHandle_t)h); }

// Column-major, as cuBLAS is; pointers are device addresses. c is float; a and b are float
// (ab == CUDA_R_32F: Sgemm) or 16-bit (ab == CUDA_R_16BF or CUDA_R_16F: GemmEx with fp32
// compute and output, the mixed-precision GEMM).
static cublasStatus_t stoke_gemm_batched(uintptr_t h, uintptr_t stream, int ta, int tb, int m, int n, int k,
	float alpha, uintptr_t a, int lda, long long sa, uintptr_t b, int ldb, long long sb, float beta,
	uintptr_t c, int ldc, long long sc, int batch, int ab) {
	cublasHandle_t handle = (cublasHandle_t)h;
	cublasStatus_t st = cublasSetStream(handle, (cudaStream_t)stream);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	cudaDataType t = (cudaDataType)ab;
	if (t != CUDA_R_32F) {
		if (batch == 1)
			return cublasGemmEx(handle, oa, ob, m, n, k, &alpha, (const void *)a, t, lda, (const void *)b, t, ldb,
				&beta, (void *)c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		return cublasGemmStridedBatchedEx(handle, oa, ob, m, n, k, &alpha, (const void *)a, t, lda, sa,
			(const void *)b, t, ldb, sb, &beta, (void *)c, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
			CUBLAS_GEMM_DEFAULT);
	}
	if (batch == 1)
		return cublasSgemm(handle, oa, ob, m, n, k, &alpha, (const float *)a, lda, (const float *)b, ldb, &beta,
			(float *)c, ldc);
	return cublasSgemmStridedBatched(handle, oa, ob, m, n, k, &alpha, (const float *)a, lda, sa,
		(const float *)b, ldb, sb, &beta, (float *)c, ldc, sc, batch);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/kernels"
)

// cublasHandle is one cuBLAS handle per op set; it is only used on the device's context thread,
// which also serialises the SetStream + Sgemm pair.
type cublasHandle C.uintptr_t

func newCublas(dev *cudaDevice) (cublasHandle, error) {
	if err := cublasLib.Load(); err != nil {
		return 0, err
	}
	var h C.uintptr_t
	var st C.cublasStatus_t
	if err := dev.th.do(func() error { st = C.stoke_blas_create(&h); return nil }); err != nil {
		return 0, err
	}
	if st != C.CUBLAS_STATUS_SUCCESS {
		return 0, fmt.Errorf("cuda: cublasCreate on %s: status %d", dev.Info(), int(st))
	}
	return cublasHandle(h), nil
}

// destroy releases the handle; it runs on the device's context thread, before the context goes.
func (h cublasHandle) destroy() error {
	if st := C.stoke_blas_destroy(C.uintptr_t(h)); st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublasDestroy: status %d", int(st))
	}
	return nil
}

// gemmBatch is row-major C_i = alpha*op(A_i)*op(B_i) + beta*C_i for i < batch, the i-th operand
// starting stride elements after the previous (stride 0: the same matrix for all). A row-major
// product is the column-major product of the transposes with the operands swapped. C is float32;
// A and B are float32, or 16-bit values of precision half (BF16 or FP16) multiplied by GemmEx.
type gemmBatch struct {
	transA, transB            bool
	m, n, k                   int
	alpha, beta               float32
	a, b, c                   cu.DevicePtr
	strideA, strideB, strideC int
	batch                     int
	half                      kernels.Precision
}

func (h cublasHandle) gemm(dev *cudaDevice, s cu.Stream, g gemmBatch) error {
	if g.m == 0 || g.n == 0 || g.batch == 0 {
		return nil
	}
	// Leading dimensions of the row-major operands; at least 1 even for k == 0, when cuBLAS reads
	// neither a nor b and computes c = beta*c, as the CPU op set does.
	lda, ldb := max(g.k, 1), g.n
	if g.transA {
		lda = g.m
	}
	if g.transB {
		ldb = max(g.k, 1)
	}
	ab, name := C.int(C.CUDA_R_32F), "cublasSgemm"
	switch g.half {
	case kernels.BF16:
		ab, name = C.CUDA_R_16BF, "cublasGemmEx (bf16)"
	case kernels.FP16:
		ab, name = C.CUDA_R_16F, "cublasGemmEx (fp16)"
	}
	var st C.cublasStatus_t
	err := dev.th.do(func() error {
		st = C.stoke_gemm_batched(C.uintptr_t(h), C.uintptr_t(uintptr(unsafe.Pointer(s.C()))), cbool(g.transB), cbool(g.transA),
			C.int(g.n), C.int(g.m), C.int(g.k), C.float(g.alpha),
			C.uintptr_t(g.b), C.int(ldb), C.longlong(g.strideB),
			C.uintptr_t(g.a), C.int(lda), C.longlong(g.strideA), C.float(g.beta),
			C.uintptr_t(g.c), C.int(g.n), C.longlong(g.strideC), C.int(g.batch), ab)
		return nil
	})
	if err != nil {
		return err
	}
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cuda: %s %dx%dx%d (batch %d) on %s: status %d", name, g.m, g.n, g.k, g.batch, dev.Info(), int(st))
	}
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
