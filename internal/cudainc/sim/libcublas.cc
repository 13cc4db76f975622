/*
 * libcublas.cc: a CPU stand-in for the cuBLAS calls Stoke makes, written as a plain reference with
 * the real API's semantics, so that a call that would be wrong on a GPU is wrong here too:
 *
 *   - column-major operands; op(X) = X, X^T (CUBLAS_OP_T and, for real types, CUBLAS_OP_C);
 *   - the argument checks of the cuBLAS documentation, answered with CUBLAS_STATUS_INVALID_VALUE:
 *     m, n, k or batchCount < 0, an unknown operation, lda < max(1, m) for op N (max(1, k)
 *     otherwise), ldb < max(1, k) for op N (max(1, n) otherwise), ldc < max(1, m), a NULL alpha
 *     or beta; a NULL or destroyed handle gives CUBLAS_STATUS_NOT_INITIALIZED;
 *   - C = alpha*op(A)*op(B) + beta*C accumulated in float in k order; with beta == 0, C is not read
 *     (NaN there does not propagate); with k == 0 or alpha == 0, A and B are not read;
 *   - alpha and beta are read from host memory when the call is made (CUBLAS_POINTER_MODE_HOST);
 *   - the work runs in order on the stream set by cublasSetStream, asynchronously to the host;
 *   - cublasGemmEx and cublasGemmStridedBatchedEx take CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF
 *     inputs (A and B of one type) with C of the input type or CUDA_R_32F and
 *     CUBLAS_COMPUTE_32F (or its _PEDANTIC and _FAST_16F/16BF/TF32 variants, computed here in
 *     plain FP32); other combinations give CUBLAS_STATUS_NOT_SUPPORTED.
 *
 * Operands are read and written through the guard-page memory of the stand-in driver, so a wrong
 * leading dimension or transpose that reaches past an operand faults and is reported naming the
 * cuBLAS call.
 */
#define _GNU_SOURCE 1
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "halfconv.h"
#include "runtime.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace cudasim;

namespace {

constexpr unsigned kMagic = 0x5354424c; // "STBL"

struct Handle {
	unsigned magic;
	cudaStream_t stream;
};

Handle *handle_of(cublasHandle_t h) {
	Handle *p = reinterpret_cast<Handle *>(h);
	return p && p->magic == kMagic ? p : nullptr;
}

float load(cudaDataType t, const void *p, long long i) {
	switch (t) {
	case CUDA_R_16F: return half_to_float(static_cast<const uint16_t *>(p)[i]);
	case CUDA_R_16BF: return bf16_to_float(static_cast<const uint16_t *>(p)[i]);
	default: return static_cast<const float *>(p)[i];
	}
}

void store(cudaDataType t, void *p, long long i, float v) {
	switch (t) {
	case CUDA_R_16F: static_cast<uint16_t *>(p)[i] = float_to_half(v); break;
	case CUDA_R_16BF: static_cast<uint16_t *>(p)[i] = float_to_bf16(v); break;
	default: static_cast<float *>(p)[i] = v;
	}
}

size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

struct Gemm {
	const char *api;
	cublasOperation_t ta, tb;
	int m, n, k;
	float alpha, beta;
	const void *a, *b;
	void *c;
	cudaDataType at, ct;
	int lda, ldb, ldc;
	long long sa, sb, sc;
	int batch;
};

// run is the reference: op(A) and op(B) gathered into dense float column-major copies, then
// C(:,j) = alpha * sum_l op(A)(:,l) * op(B)(l,j) + beta * C(:,j), summed in l order.
void run(void *arg) {
	Gemm *g = static_cast<Gemm *>(arg);
	Activity act(g->api);
	int m = g->m, n = g->n, k = g->k;
	bool products = k > 0 && g->alpha != 0;
	std::vector<float> a(products ? (size_t)m * k : 0), b(products ? (size_t)k * n : 0), acc(m);
	size_t es = type_size(g->at), cs = type_size(g->ct);
	for (int s = 0; s < g->batch; s++) {
		const char *ap = static_cast<const char *>(g->a) + (size_t)s * g->sa * es;
		const char *bp = static_cast<const char *>(g->b) + (size_t)s * g->sb * es;
		char *cp = static_cast<char *>(g->c) + (size_t)s * g->sc * cs;
		if (products) {
			for (int l = 0; l < k; l++)
				for (int i = 0; i < m; i++)
					a[(size_t)l * m + i] = load(g->at, ap, g->ta == CUBLAS_OP_N ? i + (long long)l * g->lda : l + (long long)i * g->lda);
			for (int j = 0; j < n; j++)
				for (int l = 0; l < k; l++)
					b[(size_t)j * k + l] = load(g->at, bp, g->tb == CUBLAS_OP_N ? l + (long long)j * g->ldb : j + (long long)l * g->ldb);
		}
		for (int j = 0; j < n; j++) {
			for (int i = 0; i < m; i++) acc[i] = 0;
			if (products) {
				for (int l = 0; l < k; l++) {
					float bv = b[(size_t)j * k + l];
					const float *col = &a[(size_t)l * m];
					for (int i = 0; i < m; i++) acc[i] += col[i] * bv;
				}
			}
			for (int i = 0; i < m; i++) {
				long long at = i + (long long)j * g->ldc;
				float v = g->alpha * acc[i];
				if (g->beta != 0) v += g->beta * load(g->ct, cp, at);
				store(g->ct, cp, at, v);
			}
		}
	}
	delete g;
}

bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }

cublasStatus_t gemm(cublasHandle_t handle, Gemm g, const float *alpha, const float *beta) {
	Handle *h = handle_of(handle);
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	int rows_a = g.ta == CUBLAS_OP_N ? g.m : g.k, rows_b = g.tb == CUBLAS_OP_N ? g.k : g.n;
	if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0 || !op_ok(g.ta) || !op_ok(g.tb) || g.lda < (rows_a > 1 ? rows_a : 1) ||
		g.ldb < (rows_b > 1 ? rows_b : 1) || g.ldc < (g.m > 1 ? g.m : 1) || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;
	g.alpha = *alpha;
	g.beta = *beta;
	if (!h->stream) {
		fprintf(stderr, "cudasim: %s on the legacy default stream: not emulated (call cublasSetStream)\n", g.api);
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	Gemm *p = new Gemm(g);
	if (cudasim_enqueue(h->stream, run, p) != 0) {
		delete p;
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemm_ex(cublasHandle_t handle, Gemm g, cudaDataType bt, cublasComputeType_t compute, const void *alpha, const void *beta) {
	bool in_ok = g.at == CUDA_R_32F || g.at == CUDA_R_16F || g.at == CUDA_R_16BF;
	bool out_ok = g.ct == g.at || g.ct == CUDA_R_32F;
	bool compute_ok = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC || compute == CUBLAS_COMPUTE_32F_FAST_16F ||
		compute == CUBLAS_COMPUTE_32F_FAST_16BF || compute == CUBLAS_COMPUTE_32F_FAST_TF32;
	if (!handle_of(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!in_ok || bt != g.at || !out_ok || !compute_ok) return CUBLAS_STATUS_NOT_SUPPORTED;
	return gemm(handle, g, static_cast<const float *>(alpha), static_cast<const float *>(beta));
}

} // namespace

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
	if (!h) return CUBLAS_STATUS_INVALID_VALUE;
	*h = reinterpret_cast<cublasHandle_t>(new Handle{kMagic, nullptr});
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
	Handle *h = handle_of(handle);
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	h->magic = 0; // kept allocated: a later use reports NOT_INITIALIZED instead of reading freed memory
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t s) {
	Handle *h = handle_of(handle);
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	h->stream = s;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *s) {
	Handle *h = handle_of(handle);
	if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
	*s = h->stream;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
	const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc) {
	return gemm(handle, Gemm{"cublasSgemm", ta, tb, m, n, k, 0, 0, a, b, c, CUDA_R_32F, CUDA_R_32F, lda, ldb, ldc, 0, 0, 0, 1}, alpha, beta);
}

EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	const float *alpha, const float *a, int lda, long long sa, const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
	long long sc, int batch) {
	return gemm(handle, Gemm{"cublasSgemmStridedBatched", ta, tb, m, n, k, 0, 0, a, b, c, CUDA_R_32F, CUDA_R_32F, lda, ldb, ldc, sa, sb, sc, batch},
		alpha, beta);
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
	const void *a, cudaDataType at, int lda, const void *b, cudaDataType bt, int ldb, const void *beta, void *c, cudaDataType ct, int ldc,
	cublasComputeType_t compute, cublasGemmAlgo_t) {
	return gemm_ex(handle, Gemm{"cublasGemmEx", ta, tb, m, n, k, 0, 0, a, b, c, at, ct, lda, ldb, ldc, 0, 0, 0, 1}, bt, compute, alpha, beta);
}

EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
	const void *alpha, const void *a, cudaDataType at, int lda, long long sa, const void *b, cudaDataType bt, int ldb, long long sb,
	const void *beta, void *c, cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
	return gemm_ex(handle, Gemm{"cublasGemmStridedBatchedEx", ta, tb, m, n, k, 0, 0, a, b, c, at, ct, lda, ldb, ldc, sa, sb, sc, batch}, bt,
		compute, alpha, beta);
}
