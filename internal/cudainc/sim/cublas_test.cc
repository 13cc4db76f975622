/*
 * cublas_test.cc: checks the stand-in cuBLAS against the API's documented rules, through the
 * stand-in driver (scripts/cuda-sim.sh builds and runs it before the Go tests): argument checks,
 * column-major products with every transpose against a naive triple loop, beta == 0 not reading C,
 * strided batches, stream order, and cublasGemmEx / cublasGemmStridedBatchedEx with bf16 and fp16
 * inputs. Exit status 0 when every check passes; each failure is printed.
 */
#include <cublas_v2.h>
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

static int failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "cublas_test: %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static CUstream stream;

static float *upload(const std::vector<float> &v) {
	CUdeviceptr p;
	cuMemAlloc(&p, v.size() * 4);
	cuMemcpyHtoDAsync(p, v.data(), v.size() * 4, stream);
	return (float *)p;
}

static std::vector<float> download(const float *p, size_t n) {
	std::vector<float> v(n);
	cuMemcpyDtoHAsync(v.data(), (CUdeviceptr)p, n * 4, stream); // pageable: synchronous
	return v;
}

// ref is C = alpha*op(A)*op(B) + beta*C, column-major, in double.
static std::vector<float> ref(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float> &a, int lda,
	const std::vector<float> &b, int ldb, float beta, std::vector<float> c, int ldc) {
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int l = 0; l < k; l++) s += (double)(ta ? a[l + i * lda] : a[i + l * lda]) * (tb ? b[j + l * ldb] : b[l + j * ldb]);
			c[i + j * ldc] = (float)(alpha * s + (beta == 0 ? 0 : beta * c[i + j * ldc]));
		}
	return c;
}

static std::vector<float> seq(size_t n, int seed) {
	std::vector<float> v(n);
	for (size_t i = 0; i < n; i++) v[i] = (float)((i * 37 + seed * 11) % 17) / 8.0f - 1.0f;
	return v;
}

static float max_diff(const std::vector<float> &x, const std::vector<float> &y) {
	float d = 0;
	for (size_t i = 0; i < x.size(); i++) d = fmaxf(d, fabsf(x[i] - y[i]));
	return d;
}

static uint16_t to_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

int main() {
	CUcontext ctx;
	CUdevice dev;
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) || cuStreamCreate(&stream, 0)) {
		fprintf(stderr, "cublas_test: no stand-in device\n");
		return 1;
	}
	cublasHandle_t h;
	CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
	CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
	float one = 1, zero = 0, half = 0.5f, quarter = 0.25f;

	// Every transpose, with leading dimensions larger than the minimum.
	const int m = 7, n = 5, k = 9;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
			std::vector<float> a = seq((size_t)lda * (ta ? m : k), 1), b = seq((size_t)ldb * (tb ? k : n), 2), c = seq((size_t)ldc * n, 3);
			float *da = upload(a), *db = upload(b), *dc = upload(c);
			cublasStatus_t st = cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &half, da, lda, db, ldb,
				&quarter, dc, ldc);
			CHECK(st == CUBLAS_STATUS_SUCCESS, "sgemm ta=%d tb=%d: status %d", ta, tb, st);
			float d = max_diff(download(dc, c.size()), ref(ta, tb, m, n, k, half, a, lda, b, ldb, quarter, c, ldc));
			CHECK(d < 1e-5f, "sgemm ta=%d tb=%d: max difference %g from the reference", ta, tb, d);
		}

	// The documented argument checks.
	{
		std::vector<float> a = seq(64, 1);
		float *d = upload(a);
		struct {
			cublasOperation_t ta, tb;
			int m, n, k, lda, ldb, ldc;
			const float *alpha;
		} bad[] = {
			{CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 2, 2, 2, 2, &one}, // m < 0
			{CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 2, 3, 2, 4, &one},  // lda < m for op N
			{CUBLAS_OP_T, CUBLAS_OP_N, 4, 2, 3, 2, 3, 4, &one},  // lda < k for op T
			{CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, 2, 2, 2, &one},  // ldb < k for op N
			{CUBLAS_OP_N, CUBLAS_OP_T, 2, 3, 2, 2, 2, 2, &one},  // ldb < n for op T
			{CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 2, 3, 2, 2, &one},  // ldc < m
			{(cublasOperation_t)7, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, &one},
			{CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, nullptr},
		};
		for (auto &t : bad) {
			cublasStatus_t st = cublasSgemm(h, t.ta, t.tb, t.m, t.n, t.k, t.alpha, d, t.lda, d, t.ldb, &one, d, t.ldc);
			CHECK(st == CUBLAS_STATUS_INVALID_VALUE, "sgemm m=%d n=%d k=%d lda=%d ldb=%d ldc=%d: status %d; want INVALID_VALUE", t.m, t.n, t.k, t.lda,
				t.ldb, t.ldc, st);
		}
		cublasStatus_t st = cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, 4, d, 2, 4, &one, d, 2, 4, -1);
		CHECK(st == CUBLAS_STATUS_INVALID_VALUE, "batchCount -1: status %d; want INVALID_VALUE", st);
		CHECK(cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, 1, d, 1, &one, d, 1) == CUBLAS_STATUS_NOT_INITIALIZED,
			"a NULL handle: want NOT_INITIALIZED");
	}

	// beta == 0: C is not read, so NaN there does not propagate; k == 0 scales C by beta.
	{
		std::vector<float> a = seq(4, 1), b = seq(4, 2), c(4, NAN);
		float *da = upload(a), *db = upload(b), *dc = upload(c);
		cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, da, 2, db, 2, &zero, dc, 2);
		std::vector<float> got = download(dc, 4), want = ref(false, false, 2, 2, 2, 1, a, 2, b, 2, 0, std::vector<float>(4, 0), 2);
		CHECK(max_diff(got, want) < 1e-6f, "beta=0 with NaN in C: got %g %g %g %g", got[0], got[1], got[2], got[3]);
		std::vector<float> c2 = {1, 2, 3, 4};
		float *dc2 = upload(c2);
		cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 0, &one, da, 2, db, 2, &half, dc2, 2);
		got = download(dc2, 4);
		CHECK(got[0] == 0.5f && got[3] == 2, "k=0: C = beta*C; got %g .. %g", got[0], got[3]);
	}

	// Strided batches, the A operand shared (stride 0), and stream order: the batch reads the C
	// that an earlier product on the same stream wrote.
	{
		const int batch = 3, mm = 4, nn = 3, kk = 5;
		std::vector<float> a = seq(mm * kk, 4), b = seq(kk * nn * batch, 5), c(mm * nn * batch, 0);
		float *da = upload(a), *db = upload(b), *dc = upload(c);
		cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, mm, nn, kk, &one, da, mm, 0, db, kk, kk * nn, &zero, dc, mm, mm * nn, batch);
		cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, mm, nn, kk, &one, da, mm, 0, db, kk, kk * nn, &one, dc, mm, mm * nn, batch);
		std::vector<float> got = download(dc, c.size());
		for (int s = 0; s < batch; s++) {
			std::vector<float> bs(b.begin() + s * kk * nn, b.begin() + (s + 1) * kk * nn);
			std::vector<float> want = ref(false, false, mm, nn, kk, 2, a, mm, bs, kk, 0, std::vector<float>(mm * nn, 0), mm);
			std::vector<float> gs(got.begin() + s * mm * nn, got.begin() + (s + 1) * mm * nn);
			CHECK(max_diff(gs, want) < 1e-5f, "strided batch %d: max difference %g", s, max_diff(gs, want));
		}
	}

	// GemmEx: bf16 and fp16 inputs (values exact in both), float output, FP32 compute; and a
	// combination cuBLAS does not support.
	{
		const int mm = 6, nn = 4, kk = 8;
		std::vector<float> a = seq(mm * kk, 6), b = seq(kk * nn, 7);
		std::vector<uint16_t> a16(a.size()), b16(b.size()), ah(a.size()), bh(b.size());
		for (size_t i = 0; i < a.size(); i++) a16[i] = to_bf16(a[i]);
		for (size_t i = 0; i < b.size(); i++) b16[i] = to_bf16(b[i]);
		std::vector<float> want = ref(false, true, mm, nn, kk, 1, a, mm, b, nn, 0, std::vector<float>(mm * nn, 0), mm);
		CUdeviceptr pa, pb, pc;
		cuMemAlloc(&pa, a16.size() * 2);
		cuMemAlloc(&pb, b16.size() * 2);
		cuMemAlloc(&pc, mm * nn * 4);
		cuMemcpyHtoDAsync(pa, a16.data(), a16.size() * 2, stream);
		cuMemcpyHtoDAsync(pb, b16.data(), b16.size() * 2, stream);
		cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, mm, nn, kk, &one, (void *)pa, CUDA_R_16BF, mm, (void *)pb, CUDA_R_16BF, nn,
			&zero, (void *)pc, CUDA_R_32F, mm, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		CHECK(st == CUBLAS_STATUS_SUCCESS, "gemmEx bf16: status %d", st);
		float d = max_diff(download((float *)pc, mm * nn), want);
		CHECK(d < 1e-5f, "gemmEx bf16: max difference %g", d);
		// The same values as fp16 (multiples of 1/8 in [-1, 1]: exact in both formats).
		auto to_half = [](float f) -> uint16_t {
			if (f == 0) return 0;
			uint32_t x;
			memcpy(&x, &f, 4);
			return (uint16_t)(((x >> 16) & 0x8000) | (((x >> 23) & 0xff) - 112) << 10 | ((x >> 13) & 0x3ff));
		};
		for (size_t i = 0; i < a.size(); i++) ah[i] = to_half(a[i]);
		for (size_t i = 0; i < b.size(); i++) bh[i] = to_half(b[i]);
		cuMemcpyHtoDAsync(pa, ah.data(), ah.size() * 2, stream);
		cuMemcpyHtoDAsync(pb, bh.data(), bh.size() * 2, stream);
		st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, mm, nn, kk, &one, (void *)pa, CUDA_R_16F, mm, 0, (void *)pb, CUDA_R_16F, nn, 0,
			&zero, (void *)pc, CUDA_R_32F, mm, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		CHECK(st == CUBLAS_STATUS_SUCCESS, "gemmStridedBatchedEx fp16: status %d", st);
		d = max_diff(download((float *)pc, mm * nn), want);
		CHECK(d < 1e-5f, "gemmStridedBatchedEx fp16: max difference %g", d);
		st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, (void *)pa, CUDA_R_16BF, 2, (void *)pb, CUDA_R_16F, 2, &zero, (void *)pc,
			CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
		CHECK(st == CUBLAS_STATUS_NOT_SUPPORTED, "gemmEx bf16 x fp16: status %d; want NOT_SUPPORTED", st);
	}

	cuStreamSynchronize(stream);
	if (failures) {
		fprintf(stderr, "cublas_test: %d checks failed\n", failures);
		return 1;
	}
	printf("cublas_test: ok\n");
	return 0;
}
