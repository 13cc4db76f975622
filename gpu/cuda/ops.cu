// ops.cu: the CUDA kernels of Stoke's op set (kernels.Ops); the GEMMs are cuBLAS and Copy a
// device-to-device copy, so neither is here.
//
// Compiled at run time by NVRTC for the device's own architecture (gpu/cuda/compile.go), with
// --fmad=false so that elementwise float arithmetic rounds as Go's does and matches the CPU op set
// bit for bit where the operation order is the same.
//
// Conventions, because Stoke's launcher (gpu/cuda/launch.go) passes every argument as 8 bytes
// (the CPU stand-in checks each against the C++ signature):
//   - every parameter is 8 bytes wide: pointers, long long for integers, double for scalars
//     (a float32 scalar widened to double and narrowed back is exact); the one exception is a
//     struct dims passed by value as a kernel's last parameter (the strided kernels);
//   - element counts and indices are long long; grids are grid-stride loops;
//   - reductions run in one block in a fixed order: results do not depend on timing (no float
//     atomics), so every run gives the same bits.

typedef long long i64;
typedef unsigned long long u64;

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// Block reductions, in a fixed order and three barriers whatever the block size (blockDim.x a
// multiple of 32, at most 256): each value into part, then thread t < 32 folds values t+32, t+64,
// ... into value t in turn (fold32), then the 32 folds are combined pairwise (sum32).

// fold32 folds each of the nt rows of part (blockDim.x values each) into its first 32 values.
// The barriers before (part written) and after (the folds read) are the caller's.
__device__ void fold32(double *part, int nt) {
	if (threadIdx.x >= 32) return;
	for (int t = 0; t < nt; t++) {
		double *row = part + t * blockDim.x, s = row[threadIdx.x];
		for (int i = threadIdx.x + 32; i < blockDim.x; i += 32) s += row[i];
		row[threadIdx.x] = s;
	}
}

// sum32 is the sum of the first 32 values of row, pairwise: (row[0]+row[1]) + (row[2]+row[3]),
// and so on up (five dependent additions, not 31).
__device__ double sum32(const double *row) {
	double r[16];
	for (int i = 0; i < 16; i++) r[i] = row[2 * i] + row[2 * i + 1];
	for (int w = 8; w > 0; w /= 2)
		for (int i = 0; i < w; i++) r[i] = r[2 * i] + r[2 * i + 1];
	return r[0];
}

// Sum of v over the block; every thread gets the result.
__device__ double block_sum(double *part, double v) {
	part[threadIdx.x] = v;
	__syncthreads();
	fold32(part, 1);
	__syncthreads();
	double r = sum32(part);
	__syncthreads();
	return r;
}

extern "C" __global__ void fill_f32(float *x, i64 n, double v) {
	float f = (float)v;
	GRID_STRIDE(i, n) x[i] = f;
}

extern "C" __global__ void axpy_f32(float *y, const float *x, i64 n, double alpha) {
	float a = (float)alpha;
	GRID_STRIDE(i, n) y[i] += a * x[i];
}

extern "C" __global__ void scale_f32(float *x, i64 n, double alpha) {
	float a = (float)alpha;
	GRID_STRIDE(i, n) x[i] *= a;
}

extern "C" __global__ void mul_f32(float *z, const float *x, const float *y, i64 n) {
	GRID_STRIDE(i, n) z[i] = x[i] * y[i];
}

// x viewed as [outer][c][inner]: x += bias[channel].
extern "C" __global__ void bias_add_f32(float *x, const float *bias, i64 outer, i64 c, i64 inner) {
	GRID_STRIDE(i, outer * c * inner) x[i] += bias[(i / inner) % c];
}

// One block per channel; each thread sums a fixed strided subset in double, then block_sum.
extern "C" __global__ void bias_grad_f32(float *dbias, const float *dy, i64 outer, i64 c, i64 inner) {
	__shared__ double part[256];
	i64 ch = blockIdx.x;
	double s = 0;
	for (i64 j = threadIdx.x; j < outer * inner; j += blockDim.x) {
		i64 o = j / inner, k = j % inner;
		s += (double)dy[(o * c + ch) * inner + k];
	}
	s = block_sum(part, s);
	if (threadIdx.x == 0) dbias[ch] = (float)s;
}

extern "C" __global__ void relu_f32(float *y, const float *x, i64 n) {
	GRID_STRIDE(i, n) {
		float v = x[i];
		y[i] = v > 0 ? v : 0.0f;
	}
}

extern "C" __global__ void relu_grad_f32(float *dx, const float *dy, const float *y, i64 n) {
	GRID_STRIDE(i, n) dx[i] = y[i] > 0 ? dy[i] : 0.0f;
}

// bad points at two ints in mapped host memory, bad[0] preset to n by the host: the first row
// with a label outside [0, classes) is left in bad[0] and its label in bad[1] (by report_bad).
__device__ void flag_labels(int *bad, const int *labels, i64 n, i64 classes) {
	for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
		int l = labels[i];
		if (l < 0 || l >= classes) atomicMin(bad, (int)i);
	}
}

__device__ void report_bad(int *bad, int row, const int *labels) {
	if (threadIdx.x == 0) {
		bad[1] = labels[row];
		bad[0] = row;
	}
}

__device__ int row_argmax(const float *row, i64 classes) {
	int best = 0;
	for (i64 j = 1; j < classes; j++)
		if (row[j] > row[best]) best = (int)j;
	return best;
}

extern "C" __global__ void argmax_f32(int *dst, const float *logits, i64 n, i64 classes) {
	GRID_STRIDE(i, n) dst[i] = row_argmax(logits + i * classes, classes);
}

// One block; counts are integers, so the order of the sum does not matter.
extern "C" __global__ void count_correct_f32(int *count, const float *logits, const int *labels, i64 n, i64 classes,
	int *bad) {
	__shared__ int sbad, total;
	if (threadIdx.x == 0) {
		sbad = (int)n;
		total = 0;
	}
	__syncthreads();
	flag_labels(&sbad, labels, n, classes);
	__syncthreads();
	if (sbad < n) {
		report_bad(bad, sbad, labels);
		return;
	}
	int c = 0;
	for (i64 i = threadIdx.x; i < n; i += blockDim.x)
		if (row_argmax(logits + i * classes, classes) == labels[i]) c++;
	atomicAdd(&total, c);
	__syncthreads();
	if (threadIdx.x == 0) *count += total;
}

// im2col_at is element i of the column matrix [n][inC*kh*kw][oh*ow] of x, as the CPU op set lays
// out its workspace.
__device__ float im2col_at(const float *x, i64 i, i64 inC, i64 inH, i64 inW, i64 kh, i64 kw, i64 stride, i64 pad,
	i64 oh, i64 ow) {
	i64 cols = oh * ow, rows = inC * kh * kw;
	i64 p = i % cols, r = (i / cols) % rows, s = i / (cols * rows);
	i64 kj = r % kw, ki = (r / kw) % kh, c = r / (kw * kh);
	i64 iy = (p / ow) * stride - pad + ki, ix = (p % ow) * stride - pad + kj;
	if (iy >= 0 && iy < inH && ix >= 0 && ix < inW) return x[((s * inC + c) * inH + iy) * inW + ix];
	return 0;
}

extern "C" __global__ void im2col_f32(float *col, const float *x, i64 n, i64 inC, i64 inH, i64 inW, i64 kh, i64 kw,
	i64 stride, i64 pad, i64 oh, i64 ow) {
	GRID_STRIDE(i, n * inC * kh * kw * oh * ow) col[i] = im2col_at(x, i, inC, inH, inW, kh, kw, stride, pad, oh, ow);
}

// Mixed precision: float -> bfloat16 or IEEE half bits, rounded to nearest with ties to even as
// the hardware's conversions (and kernels.Precision's emulation on the CPU) do. Hand-written so
// that NVRTC needs no cuda_bf16.h and the CPU stand-in runs the same code.
__device__ unsigned int f32_bits(float f) {
	union {
		float f;
		unsigned int u;
	} v;
	v.f = f;
	return v.u;
}

__device__ unsigned short f32_to_bf16(float f) {
	unsigned int b = f32_bits(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40); // NaN stays (quiet) NaN
	return (unsigned short)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

__device__ unsigned short f32_to_f16(float f) {
	unsigned int b = f32_bits(f), a = b & 0x7fffffffu, sign = (b >> 16) & 0x8000u;
	if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u); // NaN
	if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); // 65520 and up round to Inf
	if (a >= 0x38800000u) // normal: rebias the exponent (127 -> 15), keep 10 significand bits
		return (unsigned short)(sign | ((a + 0xfffu + ((a >> 13) & 1) - 0x38000000u) >> 13));
	if (a <= 0x33000000u) return (unsigned short)sign; // up to 2^-25 (a tie with 0): zero
	unsigned int shift = 126 - (a >> 23), m = (a & 0x7fffffu) | 0x800000u; // subnormal: units of 2^-24
	unsigned int q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1))) q++;
	return (unsigned short)(sign | q);
}

__device__ unsigned short to_16(float f, i64 fp16) { return fp16 ? f32_to_f16(f) : f32_to_bf16(f); }

// to_x16 converts n floats to bf16 (fp16 == 0) or fp16 (fp16 == 1) bits.
extern "C" __global__ void to_x16(unsigned short *dst, const float *src, i64 n, i64 fp16) {
	GRID_STRIDE(i, n) dst[i] = to_16(src[i], fp16);
}

// f16_to_f32 widens IEEE half bits to float (exactly: subnormals, Inf and NaN payloads included).
__device__ float f16_to_f32(unsigned short h) {
	unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (m << 13)); // Inf, NaN
	if (e) return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));    // normal: rebias 15 -> 127
	return __uint_as_float(sign | f32_bits((float)m * 5.9604644775390625e-8f)); // zero, subnormal: m * 2^-24
}

// x16_to_f32 widens n bf16 (fp16 == 0) or fp16 (fp16 == 1) values to float32 (exactly).
extern "C" __global__ void x16_to_f32(float *dst, const unsigned short *src, i64 n, i64 fp16) {
	GRID_STRIDE(i, n) dst[i] = fp16 ? f16_to_f32(src[i]) : __uint_as_float((unsigned int)src[i] << 16);
}

// im2col_x16 is im2col_f32 writing bf16 (fp16 == 0) or fp16 (fp16 == 1) columns.
extern "C" __global__ void im2col_x16(unsigned short *col, const float *x, i64 n, i64 inC, i64 inH, i64 inW, i64 kh,
	i64 kw, i64 stride, i64 pad, i64 oh, i64 ow, i64 fp16) {
	GRID_STRIDE(i, n * inC * kh * kw * oh * ow) col[i] = to_16(im2col_at(x, i, inC, inH, inW, kh, kw, stride, pad, oh, ow), fp16);
}

// count_nonfinite_f32 adds the number of Inf and NaN elements of x to *count.
extern "C" __global__ void count_nonfinite_f32(int *count, const float *x, i64 n) {
	__shared__ int total;
	if (threadIdx.x == 0) total = 0;
	__syncthreads();
	int c = 0;
	GRID_STRIDE(i, n) if (x[i] - x[i] != 0.0f) c++; // Inf - Inf and NaN - NaN are NaN
	if (c) atomicAdd(&total, c);
	__syncthreads();
	if (threadIdx.x == 0 && total) atomicAdd(count, total);
}

// The adjoint of im2col as a gather: each dx element sums its column entries in (ki, kj) order,
// the order in which the CPU's col2im adds them.
extern "C" __global__ void col2im_f32(float *dx, const float *col, i64 n, i64 inC, i64 inH, i64 inW, i64 kh, i64 kw,
	i64 stride, i64 pad, i64 oh, i64 ow) {
	i64 cols = oh * ow, rows = inC * kh * kw;
	GRID_STRIDE(i, n * inC * inH * inW) {
		i64 ix = i % inW, iy = (i / inW) % inH, c = (i / (inW * inH)) % inC, s = i / (inW * inH * inC);
		float acc = 0;
		for (i64 ki = 0; ki < kh; ki++) {
			i64 ty = iy + pad - ki;
			if (ty < 0 || ty % stride != 0 || ty / stride >= oh) continue;
			for (i64 kj = 0; kj < kw; kj++) {
				i64 tx = ix + pad - kj;
				if (tx < 0 || tx % stride != 0 || tx / stride >= ow) continue;
				i64 r = (c * kh + ki) * kw + kj;
				acc += col[(s * rows + r) * cols + (ty / stride) * ow + tx / stride];
			}
		}
		dx[i] = acc;
	}
}

// One thread per output; arg is the index of the maximum within its H*W plane, first wins.
extern "C" __global__ void maxpool_f32(float *y, int *arg, const float *x, i64 planes, i64 h, i64 w, i64 k, i64 stride,
	i64 oh, i64 ow) {
	GRID_STRIDE(i, planes * oh * ow) {
		i64 ox = i % ow, oy = (i / ow) % oh, p = i / (ow * oh);
		const float *plane = x + p * h * w;
		i64 best = oy * stride * w + ox * stride;
		for (i64 ky = 0; ky < k; ky++)
			for (i64 kx = 0; kx < k; kx++) {
				i64 j = (oy * stride + ky) * w + ox * stride + kx;
				if (plane[j] > plane[best]) best = j;
			}
		y[i] = plane[best];
		arg[i] = (int)best;
	}
}

// Gather form of the backward pass: each input sums the dy of the windows (in output order)
// whose maximum it was.
extern "C" __global__ void maxpool_grad_f32(float *dx, const float *dy, const int *arg, i64 planes, i64 h, i64 w, i64 k,
	i64 stride, i64 oh, i64 ow) {
	GRID_STRIDE(i, planes * h * w) {
		i64 j = i % (h * w), p = i / (h * w), iy = j / w, ix = j % w;
		i64 oy0 = iy >= k ? (iy - k) / stride + 1 : 0, ox0 = ix >= k ? (ix - k) / stride + 1 : 0;
		i64 oy1 = iy / stride < oh - 1 ? iy / stride : oh - 1, ox1 = ix / stride < ow - 1 ? ix / stride : ow - 1;
		float acc = 0;
		for (i64 oy = oy0; oy <= oy1; oy++)
			for (i64 ox = ox0; ox <= ox1; ox++) {
				i64 o = (p * oh + oy) * ow + ox;
				if (arg[o] == j) acc += dy[o];
			}
		dx[i] = acc;
	}
}

// rng.Mix(seed, i) of internal/rng: splitmix64 chained over the words.
__device__ u64 splitmix(u64 x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

extern "C" __global__ void dropout_f32(float *y, float *mask, const float *x, i64 n, double p, u64 seed) {
	float pf = (float)p, scale = 1.0f / (1.0f - pf);
	u64 hs = splitmix(0x9e3779b97f4a7c15ull ^ splitmix(seed));
	GRID_STRIDE(i, n) {
		u64 h = splitmix(hs ^ splitmix((u64)i));
		float u = (float)(h >> 40) / 16777216.0f;
		float m = u >= pf ? scale : 0.0f;
		mask[i] = m;
		y[i] = x[i] * m;
	}
}

// dst viewed as [rows][inner], channel = row % channels; tab holds mul[channels] then
// add[channels] (mul = 1/(255*std), add = -mean/std, computed by the host as the CPU op set does).
// tab is mapped host memory: each block reads it once into shared memory, not once per pixel.
#define MAX_NORM_CHANNELS 128
extern "C" __global__ void normalize_u8(float *dst, const unsigned char *src, i64 n, i64 channels, i64 inner,
	const float *tab) {
	__shared__ float stab[2 * MAX_NORM_CHANNELS];
	for (i64 t = threadIdx.x; t < 2 * channels; t += blockDim.x) stab[t] = tab[t];
	__syncthreads();
	GRID_STRIDE(i, n) {
		i64 c = (i / inner) % channels;
		dst[i] = (float)src[i] * stab[c] + stab[channels + c];
	}
}

extern "C" __global__ void sgd_f32(float *w, const float *g, float *v, i64 n, double lr, double momentum, double wd,
	i64 nesterov) {
	float l = (float)lr, m = (float)momentum, d = (float)wd;
	GRID_STRIDE(i, n) {
		float u = g[i] + d * w[i];
		if (m != 0) {
			float vi = m * v[i] + u;
			v[i] = vi;
			u = nesterov ? u + m * vi : vi;
		}
		w[i] -= l * u;
	}
}

// torch.optim.AdamW's step in torch's order (see kernels.AdamW). The host computes the scalars
// as the CPU op set does and passes their float32 values: keep = 1-lr*wd, b1 and c1 = 1-b1, b2
// and c2 = 1-b2, size = lr/(1-b1^step), root = sqrt(1-b2^step). vmax is read only with amsgrad;
// its max keeps a NaN of either side, as torch.maximum (and Go's max).
extern "C" __global__ void adamw_f32(float *w, const float *g, float *m, float *v, float *vmax, i64 n, double keep,
	double beta1, double c1, double beta2, double c2, double size, double root, double eps, i64 amsgrad) {
	float k = (float)keep, a1 = (float)beta1, k1 = (float)c1, a2 = (float)beta2, k2 = (float)c2;
	float st = (float)size, r = (float)root, e = (float)eps;
	GRID_STRIDE(i, n) {
		float gi = g[i];
		float mi = a1 * m[i] + k1 * gi;
		float vi = a2 * v[i] + k2 * gi * gi;
		m[i] = mi;
		v[i] = vi;
		if (amsgrad) {
			float vm = vmax[i];
			vi = (vm != vm || vi <= vm) ? vm : vi;
			vmax[i] = vi;
		}
		float d = (float)sqrt((double)vi) / r + e;
		w[i] = w[i] * k - st * mi / d;
	}
}

// torch.optim.RMSprop: eps outside the root, weight decay added to the gradient. b is read only
// with momentum, ga only when centered. alpha comes as the host's float64, so that 1-alpha rounds
// as torch's.
extern "C" __global__ void rmsprop_f32(float *w, const float *g, float *sq, float *b, float *ga, i64 n, double lr,
	double alpha, double eps, double wd, double momentum, i64 centered) {
	float l = (float)lr, a = (float)alpha, c = (float)(1 - alpha), e = (float)eps, d = (float)wd, m = (float)momentum;
	GRID_STRIDE(i, n) {
		float gi = g[i] + d * w[i];
		float s = a * sq[i] + c * gi * gi;
		sq[i] = s;
		if (centered) {
			float ai = a * ga[i] + c * gi;
			ga[i] = ai;
			s -= ai * ai;
		}
		float u = gi / ((float)sqrt((double)s) + e);
		if (m != 0) {
			u += m * b[i];
			b[i] = u;
		}
		w[i] -= l * u;
	}
}

// ---- Classifier ops: residual add, batch norm, global average pooling, label smoothing, padded
// max pooling. Same conventions as above; the per-channel reductions run one block per channel
// with a fixed-order tree in double.

extern "C" __global__ void add_f32(float *z, const float *x, const float *y, i64 n) {
	GRID_STRIDE(i, n) z[i] = x[i] + y[i];
}

// Channel ch of x viewed as [n][c][hw]: element j of the channel's n*hw values.
#define BN_AT(p, j) (p)[((j) / hw * c + ch) * hw + (j) % hw]

// One block per channel: mean and biased variance over n*hw values, saved mean and 1/sqrt(var+eps),
// running statistics (unbiased variance), then y = x*a + b with a = inv*gamma, b = beta - mean*a.
extern "C" __global__ void bn_train_f32(float *y, const float *x, const float *gamma, const float *beta, float *rmean,
	float *rvar, float *smean, float *sinv, i64 n, i64 c, i64 hw, double momentum, double eps) {
	__shared__ double part[256];
	i64 ch = blockIdx.x, m = n * hw;
	double s = 0;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) s += (double)BN_AT(x, j);
	double mean = block_sum(part, s) / (double)m;
	double ss = 0;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) {
		double d = (double)BN_AT(x, j) - mean;
		ss += d * d;
	}
	ss = block_sum(part, ss);
	double var = ss / (double)m;
	float inv = (float)(1.0 / sqrt(var + (double)(float)eps));
	float fm = (float)mean, mom = (float)momentum;
	if (threadIdx.x == 0) {
		double unbiased = m > 1 ? ss / (double)(m - 1) : var;
		smean[ch] = fm;
		sinv[ch] = inv;
		rmean[ch] = (1 - mom) * rmean[ch] + mom * fm;
		rvar[ch] = (1 - mom) * rvar[ch] + mom * (float)unbiased;
	}
	float a = inv * gamma[ch], b = beta[ch] - fm * a;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) BN_AT(y, j) = BN_AT(x, j) * a + b;
}

extern "C" __global__ void bn_eval_f32(float *y, const float *x, const float *gamma, const float *beta,
	const float *rmean, const float *rvar, i64 n, i64 c, i64 hw, double eps) {
	GRID_STRIDE(i, n * c * hw) {
		i64 ch = (i / hw) % c;
		float inv = (float)(1.0 / sqrt((double)rvar[ch] + (double)(float)eps));
		float a = inv * gamma[ch], b = beta[ch] - rmean[ch] * a;
		y[i] = x[i] * a + b;
	}
}

// One block per channel: dbeta = sum dy, dgamma = sum dy*xhat, then (dx not null)
// dx = gamma*inv * (dy - dbeta/m - xhat*dgamma/m).
extern "C" __global__ void bn_backward_f32(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
	const float *gamma, const float *smean, const float *sinv, i64 n, i64 c, i64 hw) {
	__shared__ double part[256];
	i64 ch = blockIdx.x, m = n * hw;
	float mean = smean[ch], inv = sinv[ch];
	double sdy = 0, sdyx = 0;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) {
		float d = BN_AT(dy, j);
		sdy += (double)d;
		sdyx += (double)d * (double)((BN_AT(x, j) - mean) * inv);
	}
	sdy = block_sum(part, sdy);
	sdyx = block_sum(part, sdyx);
	if (threadIdx.x == 0) {
		dbeta[ch] = (float)sdy;
		dgamma[ch] = (float)sdyx;
	}
	if (dx == 0) return;
	float k = gamma[ch] * inv, bmean = (float)(sdy / (double)m), bx = (float)(sdyx / (double)m);
	for (i64 j = threadIdx.x; j < m; j += blockDim.x)
		BN_AT(dx, j) = k * (BN_AT(dy, j) - bmean - (BN_AT(x, j) - mean) * inv * bx);
}

// The batch norm of several batches (SyncBatchNorm), one record of 2c+1 values per batch: the
// means [c], the sums of squared deviations [c], the count. bn_stats_f32: one block per channel.
extern "C" __global__ void bn_stats_f32(float *stats, const float *x, i64 n, i64 c, i64 hw) {
	__shared__ double part[256];
	i64 ch = blockIdx.x, m = n * hw;
	double s = 0;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) s += (double)BN_AT(x, j);
	double mean = block_sum(part, s) / (double)(m > 0 ? m : 1);
	double ss = 0;
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) {
		double d = (double)BN_AT(x, j) - mean;
		ss += d * d;
	}
	ss = block_sum(part, ss);
	if (threadIdx.x == 0) {
		stats[ch] = (float)mean;
		stats[c + ch] = (float)ss;
		if (ch == 0) stats[2 * c] = (float)m;
	}
}

// One block per channel: thread 0 combines the w records in order (Chan et al.'s update, in
// double, as the CPU does), then bn_train_f32's saves, running statistics and y = x*a + b.
extern "C" __global__ void bn_train_stats_f32(float *y, const float *x, const float *gamma, const float *beta, float *rmean,
	float *rvar, float *smean, float *sinv, const float *stats, i64 w, i64 n, i64 c, i64 hw, double momentum, double eps) {
	__shared__ float ab[2];
	__shared__ int any;
	i64 ch = blockIdx.x, m = n * hw;
	if (threadIdx.x == 0) {
		double cnt = 0, mean = 0, ss = 0;
		for (i64 r = 0; r < w; r++) {
			const float *rec = stats + r * (2 * c + 1);
			double k = (double)rec[2 * c];
			if (k == 0) continue;
			double d = (double)rec[ch] - mean, t = cnt + k;
			mean += d * k / t;
			ss += (double)rec[c + ch] + d * d * cnt * k / t;
			cnt = t;
		}
		any = cnt > 0;
		if (any) {
			double var = ss / cnt, unbiased = cnt > 1 ? ss / (cnt - 1) : var;
			float inv = (float)(1.0 / sqrt(var + (double)(float)eps)), fm = (float)mean, mom = (float)momentum;
			smean[ch] = fm;
			sinv[ch] = inv;
			rmean[ch] = (1 - mom) * rmean[ch] + mom * fm;
			rvar[ch] = (1 - mom) * rvar[ch] + mom * (float)unbiased;
			ab[0] = inv * gamma[ch];
			ab[1] = beta[ch] - fm * ab[0];
		}
	}
	__syncthreads();
	if (!any) return; // no value in any batch: the channel is left as it is, as on the CPU
	float a = ab[0], b = ab[1];
	for (i64 j = threadIdx.x; j < m; j += blockDim.x) BN_AT(y, j) = BN_AT(x, j) * a + b;
}

// dx from the sums over every batch: sums = [sum dy*xhat (c)][sum dy (c)][count].
extern "C" __global__ void bn_backward_input_f32(float *dx, const float *dy, const float *x, const float *gamma,
	const float *smean, const float *sinv, const float *sums, i64 n, i64 c, i64 hw) {
	double m = (double)sums[2 * c];
	GRID_STRIDE(i, n * c * hw) {
		i64 ch = (i / hw) % c;
		float mean = smean[ch], inv = sinv[ch];
		float k = gamma[ch] * inv, bmean = (float)((double)sums[c + ch] / m), bx = (float)((double)sums[ch] / m);
		dx[i] = k * (dy[i] - bmean - (x[i] - mean) * inv * bx);
	}
}

// y[r] = mean of row r of x [rows][inner], summed as on the CPU (cpu.sums): in double, value j
// into partial j%16, the partials added in order, the sum divided by inner and rounded once.
extern "C" __global__ void gap_f32(float *y, const float *x, i64 rows, i64 inner) {
	GRID_STRIDE(r, rows) {
		double p[16] = {0};
		for (i64 j = 0; j < inner; j++) p[j & 15] += (double)x[r * inner + j];
		double s = 0;
		for (int k = 0; k < 16; k++) s += p[k];
		y[r] = (float)(s / (double)inner);
	}
}

extern "C" __global__ void gap_grad_f32(float *dx, const float *dy, i64 rows, i64 inner) {
	float inv = 1.0f / (float)inner;
	GRID_STRIDE(i, rows * inner) dx[i] = dy[i / inner] * inv;
}

// Launched as one block of 1024 threads: warp w handles rows w, w+32, ...; each warp's loss
// is summed in row order, then the warps in warp order.
// The targets are (1-smoothing)*onehot + smoothing/classes (smoothing 0: one-hot).
extern "C" __global__ void softmax_ce_f32(float *loss, float *dlogits, const float *logits, const int *labels,
	i64 n, i64 classes, double smoothing, int *bad) {
	__shared__ double wsum[32];
	__shared__ int sbad;
	if (threadIdx.x == 0) sbad = (int)n;
	__syncthreads();
	flag_labels(&sbad, labels, n, classes);
	__syncthreads();
	if (sbad < n) {
		report_bad(bad, sbad, labels);
		return;
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
	double inv = 1.0 / (double)n, acc = 0, eps = smoothing, uni = eps / (double)classes;
	for (i64 r = warp; r < n; r += nwarps) {
		const float *row = logits + r * classes;
		float *drow = dlogits + r * classes;
		float mx = row[0];
		for (i64 j = lane; j < classes; j += 32) mx = fmaxf(mx, row[j]);
		for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
		double sum = 0, tot = 0;
		for (i64 j = lane; j < classes; j += 32) {
			sum += exp((double)(row[j] - mx));
			tot += (double)(row[j] - mx);
		}
		for (int o = 16; o > 0; o /= 2) {
			sum += __shfl_xor_sync(0xffffffffu, sum, o);
			tot += __shfl_xor_sync(0xffffffffu, tot, o);
		}
		double lse = log(sum);
		for (i64 j = lane; j < classes; j += 32)
			drow[j] = (float)(exp((double)(row[j] - mx) - lse) * inv) - (float)(inv * uni);
		__syncwarp();
		if (lane == 0) {
			int l = labels[r];
			drow[l] -= (float)(inv * (1 - eps));
			acc += lse - (1 - eps) * (double)(row[l] - mx) - eps * tot / (double)classes;
		}
	}
	if (lane == 0) wsum[warp] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0;
		for (int w = 0; w < nwarps; w++) t += wsum[w];
		*loss = (float)(t * inv);
	}
}

// Max pooling over an input padded with pad pixels of -Inf (pad <= k/2: every window holds an
// input pixel); arg is the maximum's index within its H*W plane, first wins.
extern "C" __global__ void maxpool_pad_f32(float *y, int *arg, const float *x, i64 planes, i64 h, i64 w, i64 k,
	i64 stride, i64 oh, i64 ow, i64 pad) {
	GRID_STRIDE(i, planes * oh * ow) {
		i64 ox = i % ow, oy = (i / ow) % oh, p = i / (ow * oh);
		const float *plane = x + p * h * w;
		i64 y0 = oy * stride - pad, x0 = ox * stride - pad;
		i64 ky0 = y0 < 0 ? -y0 : 0, kx0 = x0 < 0 ? -x0 : 0;
		i64 ky1 = h - y0 < k ? h - y0 : k, kx1 = w - x0 < k ? w - x0 : k;
		i64 best = (y0 + ky0) * w + x0 + kx0;
		for (i64 ky = ky0; ky < ky1; ky++)
			for (i64 kx = kx0; kx < kx1; kx++) {
				i64 j = (y0 + ky) * w + x0 + kx;
				if (plane[j] > plane[best]) best = j;
			}
		y[i] = plane[best];
		arg[i] = (int)best;
	}
}

// Gather form: each input sums, in output order, the dy of the windows whose maximum it was.
extern "C" __global__ void maxpool_pad_grad_f32(float *dx, const float *dy, const int *arg, i64 planes, i64 h, i64 w,
	i64 k, i64 stride, i64 oh, i64 ow, i64 pad) {
	GRID_STRIDE(i, planes * h * w) {
		i64 j = i % (h * w), p = i / (h * w), iy = j / w + pad, ix = j % w + pad;
		i64 oy0 = iy >= k ? (iy - k) / stride + 1 : 0, ox0 = ix >= k ? (ix - k) / stride + 1 : 0;
		i64 oy1 = iy / stride < oh - 1 ? iy / stride : oh - 1, ox1 = ix / stride < ow - 1 ? ix / stride : ow - 1;
		float acc = 0;
		for (i64 oy = oy0; oy <= oy1; oy++)
			for (i64 ox = ox0; ox <= ox1; ox++) {
				i64 o = (p * oh + oy) * ow + ox;
				if (arg[o] == j) acc += dy[o];
			}
		dx[i] = acc;
	}
}

__device__ double softplus_d(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

// The losses over float targets (kernels.LossKind: 1 soft-target cross-entropy, 2 binary
// cross-entropy on logits with pos_weight pw, which may be null, 3 MSE, 4 smooth L1 with beta).
// Launched as one block of 1024 threads: warp w handles rows w, w+32, ...; a row's loss is
// summed over its lanes, each warp's in row order, then the warps in warp order.
extern "C" __global__ void float_loss_f32(float *loss, float *d, const float *x, const float *t, const float *pw,
	i64 n, i64 dim, i64 kind, double beta) {
	__shared__ double wsum[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
	double inv = kind == 1 ? 1.0 / (double)n : 1.0 / ((double)n * (double)dim), acc = 0;
	for (i64 r = warp; r < n; r += nwarps) {
		const float *xr = x + r * dim, *tr = t + r * dim;
		float *dr = d + r * dim;
		double l = 0;
		if (kind == 1) {
			float mx = xr[0];
			for (i64 j = lane; j < dim; j += 32) mx = fmaxf(mx, xr[j]);
			for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
			double sum = 0, tsum = 0;
			for (i64 j = lane; j < dim; j += 32) {
				sum += exp((double)(xr[j] - mx));
				tsum += (double)tr[j];
			}
			for (int o = 16; o > 0; o /= 2) {
				sum += __shfl_xor_sync(0xffffffffu, sum, o);
				tsum += __shfl_xor_sync(0xffffffffu, tsum, o);
			}
			double lse = log(sum);
			for (i64 j = lane; j < dim; j += 32) {
				double z = (double)(xr[j] - mx) - lse;
				l -= (double)tr[j] * z;
				dr[j] = (float)((exp(z) * tsum - (double)tr[j]) * inv);
			}
		} else {
			for (i64 j = lane; j < dim; j += 32) {
				double xv = (double)xr[j], tv = (double)tr[j], e = xv - tv;
				if (kind == 2) {
					double w = pw ? (double)pw[j] : 1.0;
					l += w * tv * softplus_d(-xv) + (1 - tv) * softplus_d(xv);
					double sig = 1 / (1 + exp(-xv));
					dr[j] = (float)((sig * (w * tv + 1 - tv) - w * tv) * inv);
				} else if (kind == 3) {
					l += e * e;
					dr[j] = (float)(2 * e * inv);
				} else {
					double a = fabs(e);
					if (a < beta) {
						l += 0.5 * e * e / beta;
						dr[j] = (float)(e / beta * inv);
					} else {
						l += a - 0.5 * beta;
						dr[j] = (float)((e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0)) * inv);
					}
				}
			}
		}
		for (int o = 16; o > 0; o /= 2) l += __shfl_xor_sync(0xffffffffu, l, o);
		acc += l;
	}
	if (lane == 0) wsum[warp] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		double s = 0;
		for (int w = 0; w < nwarps; w++) s += wsum[w];
		*loss = (float)(s * inv);
	}
}

// ---- The differentiable core's ops (package nn): elementwise functions, broadcasting, strided
// copies, softmax, layer norm. Same conventions as above; elementwise functions are computed in
// double and rounded to float once; row reductions run one block per row (blockDim a multiple of 32,
// at most 256) in double in block_sum's fixed order.

// Maximum of v over the block, in block_sum's order; every thread gets the result.
__device__ float block_max(double *part, float v) {
	part[threadIdx.x] = v;
	__syncthreads();
	if (threadIdx.x < 32) {
		double m = part[threadIdx.x];
		for (int i = threadIdx.x + 32; i < blockDim.x; i += 32) m = fmax(m, part[i]);
		part[threadIdx.x] = m;
	}
	__syncthreads();
	double r = part[0];
	for (int i = 1; i < 32; i++) r = fmax(r, part[i]);
	__syncthreads();
	return (float)r;
}

// The values of kernels.UnaryFunc and kernels.BinaryFunc.
enum {
	U_EXP = 1, U_LOG, U_SQRT, U_RSQRT, U_SIGMOID, U_TANH, U_GELU, U_GELU_TANH, U_SILU, U_HARDSWISH,
	U_HARDSIGMOID, U_RELU6
};
enum { B_ADD = 1, B_SUB, B_MUL, B_DIV };

#define SQRT1_2 0.70710678118654752440     // 1/sqrt(2)
#define INV_SQRT_2PI 0.39894228040143267794 // 1/sqrt(2*pi)
#define GELU_BETA 0.79788456080286535588    // sqrt(2/pi)
#define GELU_KAPPA 0.044715

// Sigmoid without overflow: exp of a negative argument only.
__device__ double sigmoid_d(double x) {
	if (x >= 0) return 1 / (1 + exp(-x));
	double e = exp(x);
	return e / (1 + e);
}

__device__ double relu6_d(double x) { return x < 0 ? 0 : (x > 6 ? 6 : x); }

__device__ double unary_d(i64 f, double x) {
	switch (f) {
	case U_EXP: return exp(x);
	case U_LOG: return log(x);
	case U_SQRT: return sqrt(x);
	case U_RSQRT: return 1 / sqrt(x);
	case U_SIGMOID: return sigmoid_d(x);
	case U_TANH: return tanh(x);
	case U_GELU: return 0.5 * x * (1 + erf(x * SQRT1_2));
	case U_GELU_TANH: return 0.5 * x * (1 + tanh(GELU_BETA * (x + GELU_KAPPA * x * x * x)));
	case U_SILU: return x * sigmoid_d(x);
	case U_HARDSWISH: return x * relu6_d(x + 3) / 6;
	case U_HARDSIGMOID: return relu6_d(x + 3) / 6;
	default: return relu6_d(x); // U_RELU6
	}
}

// f'(x); at the kinks of Hardswish, Hardsigmoid and ReLU6 PyTorch's choices (its
// hardswish_backward, hardsigmoid_backward and hardtanh_backward).
__device__ double unary_grad_d(i64 f, double x) {
	switch (f) {
	case U_EXP: return exp(x);
	case U_LOG: return 1 / x;
	case U_SQRT: return 0.5 / sqrt(x);
	case U_RSQRT: {
		double r = 1 / sqrt(x);
		return -0.5 * r * r * r;
	}
	case U_SIGMOID: {
		double s = sigmoid_d(x);
		return s * (1 - s);
	}
	case U_TANH: {
		double t = tanh(x);
		return 1 - t * t;
	}
	case U_GELU: return 0.5 * (1 + erf(x * SQRT1_2)) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
	case U_GELU_TANH: {
		double t = tanh(GELU_BETA * (x + GELU_KAPPA * x * x * x));
		return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_BETA * (1 + 3 * GELU_KAPPA * x * x);
	}
	case U_SILU: {
		double s = sigmoid_d(x);
		return s * (1 + x * (1 - s));
	}
	case U_HARDSWISH: return x < -3 ? 0 : (x <= 3 ? x / 3 + 0.5 : 1);
	case U_HARDSIGMOID: return x > -3 && x < 3 ? 1.0 / 6 : 0;
	default: return x <= 0 || x >= 6 ? 0 : 1; // U_RELU6 (NaN passes dy through, as on the CPU)
	}
}

extern "C" __global__ void unary_f32(float *y, const float *x, i64 n, i64 f) {
	GRID_STRIDE(i, n) y[i] = (float)unary_d(f, (double)x[i]);
}

extern "C" __global__ void unary_grad_f32(float *dx, const float *dy, const float *x, i64 n, i64 f) {
	GRID_STRIDE(i, n) dx[i] = (float)((double)dy[i] * unary_grad_d(f, (double)x[i]));
}

// An index space of rank dimensions (kernels.MaxRank at most; row-major, the last fastest) and the
// element strides s0 and s1 of two operands over it. Passed by value: 200 bytes.
#define MAX_RANK 8
struct dims {
	i64 rank;
	i64 shape[MAX_RANK];
	i64 s0[MAX_RANK], s1[MAX_RANK];
};

// z (packed) = f(x, y) over d's index space: x's element of index i at Σ i_k·s0[k], y's at Σ i_k·s1[k].
extern "C" __global__ void binary_f32(float *z, const float *x, const float *y, i64 n, i64 f, dims d) {
	GRID_STRIDE(i, n) {
		i64 rem = i, xo = 0, yo = 0;
		for (int k = (int)d.rank - 1; k >= 0; k--) {
			i64 c = rem % d.shape[k];
			rem /= d.shape[k];
			xo += c * d.s0[k];
			yo += c * d.s1[k];
		}
		float a = x[xo], b = y[yo];
		z[i] = f == B_ADD ? a + b : (f == B_SUB ? a - b : (f == B_MUL ? a * b : a / b));
	}
}

// dst[Σ i_k·s0[k]] = src[Σ i_k·s1[k]] for every index i of d's index space.
extern "C" __global__ void copy_strided_f32(float *dst, const float *src, i64 n, dims d) {
	GRID_STRIDE(i, n) {
		i64 rem = i, po = 0, so = 0;
		for (int k = (int)d.rank - 1; k >= 0; k--) {
			i64 c = rem % d.shape[k];
			rem /= d.shape[k];
			po += c * d.s0[k];
			so += c * d.s1[k];
		}
		dst[po] = src[so];
	}
}

// y (packed, m elements) = x (packed of d.shape, strides s0) summed over the dimensions with
// s1[k] == 0 (r elements for each of y's); s1 holds y's strides, nonzero on the dimensions y
// keeps. One block per element of y: each thread sums a fixed strided subset in double, then
// block_sum's fixed order.
extern "C" __global__ void sum_to_f32(float *y, const float *x, i64 m, i64 r, dims d) {
	__shared__ double part[256];
	for (i64 o = blockIdx.x; o < m; o += gridDim.x) {
		i64 rem = o, base = 0;
		for (int k = (int)d.rank - 1; k >= 0; k--)
			if (d.s1[k]) {
				base += rem % d.shape[k] * d.s0[k];
				rem /= d.shape[k];
			}
		double s = 0;
		for (i64 j = threadIdx.x; j < r; j += blockDim.x) {
			i64 jr = j, off = base;
			for (int k = (int)d.rank - 1; k >= 0; k--)
				if (!d.s1[k]) {
					off += jr % d.shape[k] * d.s0[k];
					jr /= d.shape[k];
				}
			s += (double)x[off];
		}
		s = block_sum(part, s);
		if (threadIdx.x == 0) y[o] = (float)s;
	}
}

// One block per row of x [rows][cols] (cols >= 1): y = exp(x - max) · (1 / Σ exp(x - max)), as the
// CPU op set rounds it; y may be x.
extern "C" __global__ void softmax_f32(float *y, const float *x, i64 rows, i64 cols) {
	__shared__ double part[256];
	for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float mx = xr[0];
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
		mx = block_max(part, mx);
		double s = 0;
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += exp((double)(xr[j] - mx));
		double inv = 1 / block_sum(part, s);
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = (float)(exp((double)(xr[j] - mx)) * inv);
	}
}

// One block per row: dx = y·(dy − Σ dy·y) in double; dx may be dy.
extern "C" __global__ void softmax_grad_f32(float *dx, const float *dy, const float *y, i64 rows, i64 cols) {
	__shared__ double part[256];
	for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *dyr = dy + r * cols, *yr = y + r * cols;
		float *dxr = dx + r * cols;
		double s = 0;
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += (double)dyr[j] * (double)yr[j];
		s = block_sum(part, s);
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) dxr[j] = (float)((double)yr[j] * ((double)dyr[j] - s));
	}
}

// One block per row of x [rows][cols]: mean and biased variance (two passes, in double), saved
// mean and rstd = 1/sqrt(var+eps), y = (x-mean)·rstd·gamma + beta (gamma, beta null: 1 and 0).
extern "C" __global__ void layer_norm_f32(float *y, float *mean, float *rstd, const float *x, const float *gamma,
	const float *beta, i64 rows, i64 cols, double eps) {
	__shared__ double part[256];
	for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		double s = 0;
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) s += (double)xr[j];
		double mu = block_sum(part, s) / (double)cols, ss = 0;
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
			double dv = (double)xr[j] - mu;
			ss += dv * dv;
		}
		double var = block_sum(part, ss) / (double)cols;
		float fm = (float)mu, fr = (float)(1.0 / sqrt(var + (double)(float)eps));
		if (threadIdx.x == 0) {
			mean[r] = fm;
			rstd[r] = fr;
		}
		for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
			float v = (xr[j] - fm) * fr;
			if (gamma) v *= gamma[j];
			if (beta) v += beta[j];
			yr[j] = v;
		}
	}
}

// The backward pass of layer_norm_f32 with xhat = (x-mean)·rstd and g = dy·gamma (both rounded
// to float, as on the CPU); a null output is skipped. Blocks (blockDim a power of two in
// [32, 256]) have two roles, the host launching one at a time:
//   - rows (dx): one block per row, dx = rstd·(g − Σg/cols − xhat·Σ(g·xhat)/cols), sums in double;
//   - columns (dgamma = Σ_rows dy·xhat, dbeta = Σ_rows dy): one block per 32 columns, warp w of
//     the block's W summing rows w, w+W, ... in double, then the warps' sums in warp order.
extern "C" __global__ void layer_norm_grad_f32(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
	const float *gamma, const float *mean, const float *rstd, i64 rows, i64 cols) {
	__shared__ double part[256], part2[256];
	if (dx)
		for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
			const float *xr = x + r * cols, *dyr = dy + r * cols;
			float *dxr = dx + r * cols;
			float mu = mean[r], rs = rstd[r];
			double sg = 0, sgx = 0;
			for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
				float g = gamma ? dyr[j] * gamma[j] : dyr[j];
				sg += (double)g;
				sgx += (double)g * (double)((xr[j] - mu) * rs);
			}
			double mg = block_sum(part, sg) / (double)cols, mgx = block_sum(part, sgx) / (double)cols;
			for (i64 j = threadIdx.x; j < cols; j += blockDim.x) {
				float g = gamma ? dyr[j] * gamma[j] : dyr[j];
				dxr[j] = (float)((double)rs * ((double)g - mg - (double)((xr[j] - mu) * rs) * mgx));
			}
		}
	if (!dgamma && !dbeta) return;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
	for (i64 c0 = (i64)blockIdx.x * 32; c0 < cols; c0 += (i64)gridDim.x * 32) {
		i64 c = c0 + lane;
		double sg = 0, sb = 0;
		if (c < cols)
			for (i64 r = warp; r < rows; r += nwarps) {
				float d = dy[r * cols + c];
				sb += (double)d;
				sg += (double)d * (double)((x[r * cols + c] - mean[r]) * rstd[r]);
			}
		part[threadIdx.x] = sg;
		part2[threadIdx.x] = sb;
		__syncthreads();
		if (warp == 0 && c < cols) {
			double tg = 0, tb = 0;
			for (int w = 0; w < nwarps; w++) {
				tg += part[w * 32 + lane];
				tb += part2[w * 32 + lane];
			}
			if (dgamma) dgamma[c] = (float)tg;
			if (dbeta) dbeta[c] = (float)tb;
		}
		__syncthreads();
	}
}

// Depthwise convolution (kernels.Depthwise2D): x [n][c][h][w], w [c][k][k], y [n][c][oh][ow].
// One thread per output: bias (or 0) plus the window's products in float32, taps in row-major
// order, padding taps left out (the CPU op set's order: the same bits).
extern "C" __global__ void dwconv_f32(float *y, const float *x, const float *w, const float *bias, i64 n, i64 c, i64 h,
	i64 wd, i64 k, i64 stride, i64 pad, i64 oh, i64 ow) {
	GRID_STRIDE(i, n * c * oh * ow) {
		i64 ox = i % ow, oy = (i / ow) % oh, p = i / (ow * oh), ch = p % c;
		const float *xp = x + p * h * wd, *wc = w + ch * k * k;
		float acc = bias ? bias[ch] : 0.0f;
		for (i64 kh = 0; kh < k; kh++) {
			i64 iy = oy * stride - pad + kh;
			if (iy < 0 || iy >= h) continue;
			for (i64 kw = 0; kw < k; kw++) {
				i64 ix = ox * stride - pad + kw;
				if (ix < 0 || ix >= wd) continue;
				acc += wc[kh * k + kw] * xp[iy * wd + ix];
			}
		}
		y[i] = acc;
	}
}

// The input gradient, one thread per input: the taps that read it, in row-major tap order,
// each adding w·dy in float32 (the CPU op set's order).
extern "C" __global__ void dwconv_grad_x_f32(float *dx, const float *dy, const float *w, i64 n, i64 c, i64 h, i64 wd,
	i64 k, i64 stride, i64 pad, i64 oh, i64 ow) {
	GRID_STRIDE(i, n * c * h * wd) {
		i64 ix = i % wd, iy = (i / wd) % h, p = i / (wd * h), ch = p % c;
		const float *dyp = dy + p * oh * ow, *wc = w + ch * k * k;
		float acc = 0.0f;
		for (i64 kh = 0; kh < k; kh++) {
			i64 ty = iy + pad - kh;
			if (ty < 0 || ty % stride != 0 || ty / stride >= oh) continue;
			for (i64 kw = 0; kw < k; kw++) {
				i64 tx = ix + pad - kw;
				if (tx < 0 || tx % stride != 0 || tx / stride >= ow) continue;
				acc += wc[kh * k + kw] * dyp[(ty / stride) * ow + tx / stride];
			}
		}
		dx[i] = acc;
	}
}

// The weight gradient, one block per channel: its k·k taps DW_TAPS at a time, each thread summing
// the products dy·x of a fixed strided subset of the n·oh·ow outputs in double, then block_sum's
// order for those taps together (three barriers for DW_TAPS sums); rounded once.
#define DW_TAPS 8
extern "C" __global__ void dwconv_grad_w_f32(float *dw, const float *dy, const float *x, i64 n, i64 c, i64 h, i64 wd,
	i64 k, i64 stride, i64 pad, i64 oh, i64 ow) {
	__shared__ double dw_part[DW_TAPS * 256];
	i64 kk = k * k, m = n * oh * ow;
	for (i64 ch = blockIdx.x; ch < c; ch += gridDim.x) {
		for (i64 t0 = 0; t0 < kk; t0 += DW_TAPS) {
			int nt = (int)min((i64)DW_TAPS, kk - t0);
			double s[DW_TAPS];
#pragma unroll
			for (int t = 0; t < DW_TAPS; t++) s[t] = 0;
			for (i64 j = threadIdx.x; j < m; j += blockDim.x) {
				i64 ox = j % ow, oy = (j / ow) % oh, p = j / (ow * oh) * c + ch;
				double g = (double)dy[(p * oh + oy) * ow + ox];
				const float *xp = x + p * h * wd;
#pragma unroll
				for (int t = 0; t < DW_TAPS; t++) {
					i64 iy = oy * stride - pad + (t0 + t) / k, ix = ox * stride - pad + (t0 + t) % k;
					if (t < nt && iy >= 0 && iy < h && ix >= 0 && ix < wd) s[t] += g * (double)xp[iy * wd + ix];
				}
			}
#pragma unroll
			for (int t = 0; t < DW_TAPS; t++)
				if (t < nt) dw_part[t * blockDim.x + threadIdx.x] = s[t];
			__syncthreads();
			fold32(dw_part, nt);
			__syncthreads();
			if (threadIdx.x < nt) dw[ch * kk + t0 + threadIdx.x] = (float)sum32(dw_part + threadIdx.x * blockDim.x);
			__syncthreads();
		}
	}
}

// Scaled dot-product attention (FlashAttention's tiling): blocks of ATT_ROWS threads, each thread
// one query row (or, for the key gradients, one key row) of one problem; the rows it meets from the
// other side come through shared memory ATT_TILE at a time, ATT_CHUNK features at a time, so any
// head dimension fits. A thread's scores against a tile sit in its own row of shared memory; its
// output row accumulates in global memory, which it alone writes. Every sum is in a fixed order:
// features within a chunk, chunks, tiles, in increasing order.
#define ATT_ROWS 64
#define ATT_TILE 32
#define ATT_CHUNK 64
#define ATT_LOW (-3.402823466e38f) // below every finite score: e^(ATT_LOW - score) is 0

// The shared memory of the three attention kernels, declared once (each block has its own): the
// tile of rows from the other side, and each thread's row of scores and of their gradients.
__shared__ float att_tile[ATT_TILE * ATT_CHUNK];
__shared__ float att_s[ATT_ROWS * (ATT_TILE + 1)], att_dp[ATT_ROWS * (ATT_TILE + 1)];

// Loads rows [j0, j0+nt) of src (rows of d features), features [c0, c0+nc), into tile.
__device__ void att_load(float *tile, const float *src, i64 d, i64 j0, int nt, i64 c0, int nc) {
	__syncthreads();
	for (int e = threadIdx.x; e < nt * nc; e += blockDim.x) tile[(e / nc) * ATT_CHUNK + e % nc] = src[(j0 + e / nc) * d + c0 + e % nc];
	__syncthreads();
}

// sr[j] = Σ_c a[c]·b_j[c] for the nt rows b_j of src from j0 (the tile's dot products with row a).
__device__ void att_dots(float *sr, float *tile, const float *a, const float *src, i64 d, i64 j0, int nt, bool row) {
	if (row)
		for (int j = 0; j < nt; j++) sr[j] = 0;
	for (i64 c0 = 0; c0 < d; c0 += ATT_CHUNK) {
		int nc = (int)min((i64)ATT_CHUNK, d - c0);
		att_load(tile, src, d, j0, nt, c0, nc);
		if (!row) continue;
		for (int j = 0; j < nt; j++) {
			float s = 0;
			for (int c = 0; c < nc; c++) s += a[c0 + c] * tile[j * ATT_CHUNK + c];
			sr[j] += s;
		}
	}
}

// acc[c] = acc[c]·keep + Σ_j w[j]·b_j[c] for the nt rows b_j of src from j0.
__device__ void att_accumulate(float *acc, float keep, float *tile, const float *w, const float *src, i64 d, i64 j0, int nt, bool row) {
	for (i64 c0 = 0; c0 < d; c0 += ATT_CHUNK) {
		int nc = (int)min((i64)ATT_CHUNK, d - c0);
		att_load(tile, src, d, j0, nt, c0, nc);
		if (!row) continue;
		for (int c = 0; c < nc; c++) {
			float s = acc[c0 + c] * keep;
			for (int j = 0; j < nt; j++) s += w[j] * tile[j * ATT_CHUNK + c];
			acc[c0 + c] = s;
		}
	}
}

// The forward pass: y = softmax(scale·q·kᵀ)·v with the online softmax (a tile's scores
// exponentiated against the row's running maximum m, the output and the sum l rescaled when a tile
// raises it), then lse = m + ln l. One block per (problem, ATT_ROWS queries).
extern "C" __global__ void attention_f32(float *y, float *lse, const float *q, const float *k, const float *v, i64 batch,
	i64 lq, i64 lk, i64 d, double scale) {
	float *tile = att_tile, *st = att_s;
	float sc = (float)scale;
	i64 tiles = (lq + ATT_ROWS - 1) / ATT_ROWS;
	for (i64 blk = blockIdx.x; blk < batch * tiles; blk += gridDim.x) {
		i64 b = blk / tiles, i = (blk % tiles) * ATT_ROWS + threadIdx.x;
		bool row = i < lq;
		const float *qr = q + (b * lq + i) * d, *kb = k + b * lk * d, *vb = v + b * lk * d;
		float *yr = y + (b * lq + i) * d, *sr = st + threadIdx.x * (ATT_TILE + 1);
		float m = ATT_LOW, l = 0;
		if (row)
			for (i64 c = 0; c < d; c++) yr[c] = 0;
		for (i64 j0 = 0; j0 < lk; j0 += ATT_TILE) {
			int nk = (int)min((i64)ATT_TILE, lk - j0);
			att_dots(sr, tile, qr, kb, d, j0, nk, row);
			float corr = 1;
			if (row) {
				float mx = m, sum = 0;
				for (int j = 0; j < nk; j++) {
					sr[j] *= sc;
					mx = fmaxf(mx, sr[j]);
				}
				corr = expf(m - mx);
				for (int j = 0; j < nk; j++) {
					sr[j] = expf(sr[j] - mx);
					sum += sr[j];
				}
				l = l * corr + sum;
				m = mx;
			}
			att_accumulate(yr, corr, tile, sr, vb, d, j0, nk, row);
		}
		if (row) {
			float inv = 1 / l;
			for (i64 c = 0; c < d; c++) yr[c] *= inv;
			lse[b * lq + i] = m + logf(l);
		}
	}
}

// The query gradient: for each key, p = e^(scale·q·k − lse), ds = p·(dy·v − Σ dy·y)·scale, and
// dq += ds·k. One block per (problem, ATT_ROWS queries).
extern "C" __global__ void attention_grad_q_f32(float *dq, const float *dy, const float *q, const float *k, const float *v,
	const float *y, const float *lse, i64 batch, i64 lq, i64 lk, i64 d, double scale) {
	float *tile = att_tile, *st = att_s, *dpt = att_dp;
	float sc = (float)scale;
	i64 tiles = (lq + ATT_ROWS - 1) / ATT_ROWS;
	for (i64 blk = blockIdx.x; blk < batch * tiles; blk += gridDim.x) {
		i64 b = blk / tiles, i = (blk % tiles) * ATT_ROWS + threadIdx.x;
		bool row = i < lq;
		const float *qr = q + (b * lq + i) * d, *dyr = dy + (b * lq + i) * d, *yr = y + (b * lq + i) * d;
		const float *kb = k + b * lk * d, *vb = v + b * lk * d;
		float *dqr = dq + (b * lq + i) * d, *sr = st + threadIdx.x * (ATT_TILE + 1), *dpr = dpt + threadIdx.x * (ATT_TILE + 1);
		float delta = 0, ls = 0;
		if (row) {
			for (i64 c = 0; c < d; c++) {
				delta += dyr[c] * yr[c];
				dqr[c] = 0;
			}
			ls = lse[b * lq + i];
		}
		for (i64 j0 = 0; j0 < lk; j0 += ATT_TILE) {
			int nk = (int)min((i64)ATT_TILE, lk - j0);
			att_dots(sr, tile, qr, kb, d, j0, nk, row);
			att_dots(dpr, tile, dyr, vb, d, j0, nk, row);
			if (row)
				for (int j = 0; j < nk; j++) dpr[j] = expf(sr[j] * sc - ls) * (dpr[j] - delta) * sc;
			att_accumulate(dqr, 1, tile, dpr, kb, d, j0, nk, row);
		}
	}
}

// The key and value gradients: for each query, p and ds as attention_grad_q_f32's, dv += p·dy and
// dk += ds·q. One block per (problem, ATT_ROWS keys); each query tile's lse and Σ dy·y are
// computed once into shared memory.
extern "C" __global__ void attention_grad_kv_f32(float *dk, float *dv, const float *dy, const float *q, const float *k,
	const float *v, const float *y, const float *lse, i64 batch, i64 lq, i64 lk, i64 d, double scale) {
	__shared__ float lt[ATT_TILE], dt[ATT_TILE];
	float *tile = att_tile, *st = att_s, *dpt = att_dp;
	float sc = (float)scale;
	i64 tiles = (lk + ATT_ROWS - 1) / ATT_ROWS;
	for (i64 blk = blockIdx.x; blk < batch * tiles; blk += gridDim.x) {
		i64 b = blk / tiles, j = (blk % tiles) * ATT_ROWS + threadIdx.x;
		bool row = j < lk;
		const float *kr = k + (b * lk + j) * d, *vr = v + (b * lk + j) * d;
		const float *qb = q + b * lq * d, *dyb = dy + b * lq * d, *yb = y + b * lq * d;
		float *dkr = dk + (b * lk + j) * d, *dvr = dv + (b * lk + j) * d;
		float *sr = st + threadIdx.x * (ATT_TILE + 1), *dpr = dpt + threadIdx.x * (ATT_TILE + 1);
		if (row)
			for (i64 c = 0; c < d; c++) dkr[c] = dvr[c] = 0;
		for (i64 i0 = 0; i0 < lq; i0 += ATT_TILE) {
			int nq = (int)min((i64)ATT_TILE, lq - i0);
			__syncthreads();
			if (threadIdx.x < nq) {
				i64 i = i0 + threadIdx.x;
				float delta = 0;
				for (i64 c = 0; c < d; c++) delta += dyb[i * d + c] * yb[i * d + c];
				dt[threadIdx.x] = delta;
				lt[threadIdx.x] = lse[b * lq + i];
			}
			att_dots(sr, tile, kr, qb, d, i0, nq, row);
			att_dots(dpr, tile, vr, dyb, d, i0, nq, row);
			if (row)
				for (int t = 0; t < nq; t++) {
					float p = expf(sr[t] * sc - lt[t]);
					dpr[t] = p * (dpr[t] - dt[t]) * sc;
					sr[t] = p;
				}
			att_accumulate(dvr, 1, tile, sr, dyb, d, i0, nq, row);
			att_accumulate(dkr, 1, tile, dpr, qb, d, i0, nq, row);
		}
	}
}

// ---- RenderRecords: the device half of a device decode, transforms.Worker.Render on the device
// (see transforms.Worker.ApplyCoefficients for the record's layout). Four launches over the batch,
// their blocks taking the samples in turn (one block a sample for render_check, REC_BLOCKS for the
// others): render_check checks every record as Render does and leaves the first bad sample in a
// mapped host word (status); render_idct reconstructs each record's planes into its slot of ws, one
// thread per 8x8 block, with the jpeg fork's integer IDCT (dct.go), its float32 reduced IDCTs
// (reduced.go) and its flat fills; render_hpass and render_vpass resample them, the taps computed
// per output in float64 as resample.go's weights.compute does (--fmad=false keeps its roundings),
// then convert the colours and store each pixel at its oriented place. A sample's slot holds its
// planes, then the horizontal pass of each plane it resamples ([H][hi-lo] of axis u:
// transforms.Worker.RecordScratch). Every launch but render_check returns at once when status names
// a bad sample. Integer arithmetic that Go does in int32 (and may wrap on outside data) is done in
// unsigned 32 bits, which wrap the same way.

typedef unsigned int u32;

#define REC_HEADER 112
#define REC_GRID 184
#define REC_PREC 22 // fractional bits of the taps (resample.go's precBits)
#define REC_BLOCKS 16 // blocks per sample of the render launches

// The reasons of a bad sample, in the order of the checks (the CPU op set's; the status word
// orders by them).
enum {
	REC_OK,
	REC_KIND,      // a kind other than 0 and 1 (detail: the kind)
	REC_SRC,       // an offset outside src or pixels past its end
	REC_SHORT,     // shorter than its header
	REC_MAGIC,     // magic or version
	REC_FIELDS,    // channels, components, scale, flags or filter
	REC_SIZE,      // size against the counts and the bytes left in src
	REC_DIMS,      // output or image size
	REC_AXIS,      // an axis (detail: 0 u, 1 v)
	REC_ORIENT,    // base and steps
	REC_GRIDS,     // a component's grid (detail: the component)
	REC_BLOCKS_N,  // the grids' blocks against the record's
	REC_PIXELS,    // C*H*W not the sample's (transforms.ErrShape)
	REC_BLOCK,     // a block's pairs (detail: the block)
	REC_PAIR,      // a pair's index (detail: the pair)
	REC_SCRATCH,   // more scratch than the slot (detail: what it needs, at most 2^32-1)
};

__device__ __forceinline__ u32 rd16(const unsigned char *b) { return b[0] | (u32)b[1] << 8; }
__device__ __forceinline__ u32 rd32(const unsigned char *b) { return b[0] | (u32)b[1] << 8 | (u32)b[2] << 16 | (u32)b[3] << 24; }
__device__ __forceinline__ double rdf64(const unsigned char *b) {
	return __longlong_as_double((long long)((u64)rd32(b) | (u64)rd32(b + 4) << 32));
}

struct rec_axis {
	double off, scale;
	i64 n, lo, hi;
};

// rec_grid is a component's BlockGrid, the plane's fields prefixed p.
struct rec_grid {
	i64 first, bx, by, across, down, h, v, px0, py0, pw, ph, subx, suby, stride;
};

// rec is a record's fixed part, read by rec_read (which checks nothing: rec_check does).
struct rec {
	const unsigned char *b;
	i64 size, nb, np, nc, comps, scale, flags, filter, oh, ow, width, height, base, du, dv;
	rec_axis ax[2];
	rec_grid g[3];
	i64 starts, counts, index, values; // the arrays' byte offsets
};

__device__ i64 rec_align4(i64 n) { return (n + 3) & ~(i64)3; }

__device__ void rec_read(const unsigned char *b, rec *r) {
	r->b = b;
	r->size = rd32(b + 8), r->nb = rd32(b + 12), r->np = rd32(b + 16);
	r->nc = b[20], r->comps = b[21], r->scale = b[22], r->flags = b[23], r->filter = b[24];
	r->oh = rd16(b + 28), r->ow = rd16(b + 30), r->width = rd16(b + 32), r->height = rd16(b + 34);
	r->base = (int)rd32(b + 36), r->du = (int)rd32(b + 40), r->dv = (int)rd32(b + 44);
	for (int i = 0; i < 2; i++) {
		const unsigned char *q = b + 48 + 32 * i;
		r->ax[i].off = rdf64(q), r->ax[i].scale = rdf64(q + 8);
		r->ax[i].n = (int)rd32(q + 16), r->ax[i].lo = (int)rd32(q + 20), r->ax[i].hi = (int)rd32(q + 24);
	}
	i64 comps = r->comps <= 3 ? r->comps : 0;
	for (i64 c = 0; c < comps; c++) {
		i64 f[14];
		for (int i = 0; i < 14; i++) f[i] = (int)rd32(b + REC_HEADER + c * REC_GRID + 128 + 4 * i);
		r->g[c] = rec_grid{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], f[13]};
	}
	r->starts = REC_HEADER + comps * REC_GRID;
	r->counts = r->starts + 4 * r->nb;
	r->index = r->counts + rec_align4(r->nb);
	r->values = r->index + rec_align4(r->np);
}

// rec_bounded is axis.bounded of transforms: the outputs that are not padding read the image
// (size pixels) within size pixels beyond its edges.
__device__ bool rec_bounded(const rec_axis &a, i64 size) {
	if (a.hi <= a.lo) return true;
	double s = (double)size;
	return a.off + (double)a.lo * a.scale >= -s && a.off + (double)a.hi * a.scale <= 2 * s;
}

__device__ i64 rec_corner(i64 d, i64 last, i64 step) { return d < 0 ? last * step : 0; }

// rec_orients is mapping.orients of transforms.
__device__ bool rec_orients(const rec *r) {
	i64 ow = r->ow, oh = r->oh;
	if ((r->du == 1 || r->du == -1) && (r->dv == ow || r->dv == -ow) && r->ax[0].n == ow && r->ax[1].n == oh &&
		r->base == rec_corner(r->du, ow - 1, 1) + rec_corner(r->dv, oh - 1, ow))
		return true;
	return (r->du == ow || r->du == -ow) && (r->dv == 1 || r->dv == -1) && r->ax[0].n == oh && r->ax[1].n == ow &&
		r->base == rec_corner(r->du, oh - 1, ow) + rec_corner(r->dv, ow - 1, 1);
}

// rec_grid_ok is checkGrid of transforms.
__device__ bool rec_grid_ok(const rec_grid &g, i64 first, i64 bs, i64 width, i64 height, i64 scale) {
	if (g.first != first || g.h < 1 || g.h > 4 || g.v < 1 || g.v > 4 || g.bx < 0 || g.by < 0 || g.across < 1 || g.down < 1 ||
		g.bx + g.across > (width + 7) / 8 + 3 || g.by + g.down > (height + 7) / 8 + 3)
		return false;
	return !(g.subx < 1 || g.subx > 4 || g.suby < 1 || g.suby > 4 || g.stride != g.across * bs || g.px0 != g.bx * bs ||
		g.py0 != g.by * bs || g.pw != min((width + g.subx * scale - 1) / (g.subx * scale), (g.bx + g.across) * bs) - g.px0 ||
		g.ph != min((height + g.suby * scale - 1) / (g.suby * scale), (g.by + g.down) * bs) - g.py0 || g.pw < 1 || g.ph < 1);
}

// rec_check_fixed checks a record's fixed part (avail bytes from b), as readRecord does in its
// order up to the blocks, and reads it into r; it returns a reason and sets *detail.
__device__ int rec_check_fixed(const unsigned char *b, i64 avail, rec *r, i64 *detail) {
	if (avail < REC_HEADER) return REC_SHORT;
	if (b[0] != 'S' || b[1] != 'T' || b[2] != 'K' || b[3] != 'C' || rd32(b + 4) != 1) return REC_MAGIC;
	i64 nc = b[20], comps = b[21], scale = b[22], flags = b[23], filter = b[24];
	if ((nc != 1 && nc != 3) || (comps != 1 && comps != 3) || (scale != 1 && scale != 2 && scale != 4 && scale != 8) ||
		(flags & ~3) != 0 || ((flags & 1) != 0 && comps != 3) || filter > 2)
		return REC_FIELDS;
	i64 nb = rd32(b + 12), np = rd32(b + 16), size = rd32(b + 8);
	if (size != REC_HEADER + comps * REC_GRID + 4 * nb + rec_align4(nb) + rec_align4(np) + rec_align4(2 * np) || size > avail)
		return REC_SIZE;
	rec_read(b, r);
	if (r->ow == 0 || r->oh == 0 || r->ow > 32768 || r->oh > 32768 || r->width == 0 || r->height == 0) return REC_DIMS;
	for (int i = 0; i < 2; i++) {
		const rec_axis &a = r->ax[i];
		*detail = i;
		if (a.lo < 0 || a.lo > a.hi || a.hi > a.n || isinf(a.off) || isnan(a.off) || !(a.scale > 0 && a.scale <= 1.7976931348623157e308) ||
			!rec_bounded(a, i ? r->height : r->width))
			return REC_AXIS;
	}
	if (!rec_orients(r)) return REC_ORIENT;
	i64 bs = 8 / scale, first = 0;
	for (i64 c = 0; c < comps; c++) {
		*detail = c;
		if (!rec_grid_ok(r->g[c], first, bs, r->width, r->height, scale)) return REC_GRIDS;
		first += r->g[c].across * r->g[c].down;
	}
	if (first != nb) return REC_BLOCKS_N;
	return REC_OK;
}

// rec_planes is the number of planes a record's resampling reads: 1 for gray, and for one
// channel of YCbCr (luma alone); 3 otherwise.
__device__ i64 rec_planes(const rec *r) { return r->comps == 1 || ((r->flags & 1) == 0 && r->nc == 1) ? 1 : 3; }

// rec_plane is the byte offset of component c's plane in the sample's slot; rec_pass that of plane
// p's horizontal pass.
__device__ i64 rec_plane(const rec *r, i64 c) {
	i64 o = 0, bs = 8 / r->scale;
	for (i64 i = 0; i < c; i++) o += r->g[i].stride * r->g[i].down * bs;
	return o;
}

__device__ i64 rec_pass(const rec *r, i64 p) {
	i64 o = rec_plane(r, r->comps), nu = r->ax[0].hi - r->ax[0].lo;
	for (i64 i = 0; i < p; i++) o += r->g[i].ph * nu;
	return o;
}

// The status word: (sample << 40) | (reason << 32) | detail, the smallest over the batch; all
// ones when every sample is good.
__device__ u64 rec_key(i64 sample, int reason, i64 detail) {
	return (u64)sample << 40 | (u64)reason << 32 | (u64)min(max(detail, (i64)0), (i64)0xffffffff);
}

// rec_stop reports, to every thread of the block, whether status names a bad sample.
__device__ bool rec_stop(const u64 *status) {
	__shared__ int stop;
	if (threadIdx.x == 0) stop = *(volatile const u64 *)status != ~(u64)0;
	__syncthreads();
	bool r = stop;
	__syncthreads();
	return r;
}

// render_check checks sample s of each block in turn (offs[2s], offs[2s+1]: offset and kind): the
// kind, the offset, the record's fixed part and its pixels against c*h*w (thread 0), then its
// blocks and pairs (all threads) and its scratch against slot; a bad sample's key goes to
// status. (The CPU op set checks in this order too.)
extern "C" __global__ void render_check(const unsigned char *src, i64 srcLen, const int *offs, i64 n, i64 pixels, i64 slot, u64 *status) {
	__shared__ int reason;
	__shared__ i64 detail;
	__shared__ rec r;
	__shared__ u64 badBlock, badPair;
	for (i64 s = blockIdx.x; s < n; s += gridDim.x) {
		i64 off = offs[2 * s], kind = offs[2 * s + 1];
		if (threadIdx.x == 0) {
			reason = REC_OK, detail = 0, badBlock = badPair = ~(u64)0;
			i64 d = 0;
			if (kind != 0 && kind != 1) reason = REC_KIND, d = kind;
			else if (off < 0 || off > srcLen || (kind == 0 && pixels > srcLen - off)) reason = REC_SRC;
			else if (kind == 1 && (reason = rec_check_fixed(src + off, srcLen - off, &r, &d)) == REC_OK && r.nc * r.oh * r.ow != pixels)
				reason = REC_PIXELS;
			detail = d;
		}
		__syncthreads();
		if (kind == 1 && reason == REC_OK) {
			const unsigned char *b = r.b;
			for (i64 i = threadIdx.x; i < r.nb; i += blockDim.x) {
				u32 st = rd32(b + r.starts + 4 * i), k = b[r.counts + i];
				if (k != 255 && (k > 64 || (i64)st + k > r.np)) atomicMin(&badBlock, (u64)i);
			}
			for (i64 i = threadIdx.x; i < r.np; i += blockDim.x)
				if (b[r.index + i] >= 64) atomicMin(&badPair, (u64)i);
		}
		__syncthreads();
		if (threadIdx.x == 0 && kind == 1 && reason == REC_OK) {
			if (badBlock != ~(u64)0) reason = REC_BLOCK, detail = (i64)badBlock;
			else if (badPair != ~(u64)0) reason = REC_PAIR, detail = (i64)badPair;
			else {
				i64 need = rec_pass(&r, rec_planes(&r));
				if (need > slot) reason = REC_SCRATCH, detail = need;
			}
		}
		if (threadIdx.x == 0 && reason != REC_OK) atomicMin(status, rec_key(s, reason, detail));
		__syncthreads();
	}
}

// The jpeg fork's IDCT (dct.go: idctRows, then idctColsStore), in unsigned arithmetic: Go's
// int32 wraps as it does. rsh is Go's arithmetic shift of an int32.
__device__ __forceinline__ u32 rsh(u32 x, int s) { return (u32)((int)x >> s); }

__device__ __forceinline__ void dct_box(u32 x0, u32 x1, u32 kcos, u32 ksin, u32 &y0, u32 &y1) {
	u32 ksum = kcos * (x0 + x1);
	y0 = ksum + (ksin - kcos) * x1;
	y1 = ksum - (kcos + ksin) * x0;
}

__device__ void idct_rows(u32 *b) {
	for (int i = 0; i < 8; i++) {
		u32 *x = b + 8 * i;
		if ((x[1] | x[2] | x[3] | x[4] | x[5] | x[6] | x[7]) == 0) {
			u32 d = x[0] << 17;
			for (int k = 0; k < 8; k++) x[k] = d;
			continue;
		}
		u32 x0 = x[0], x7 = x[1], x2 = x[2], x5 = x[3], x1 = x[4], x6 = x[5], x3 = x[6], x4 = x[7], t;
		x0 <<= 17;
		x1 <<= 17;
		t = x0 + x1, x1 = x0 - x1, x0 = t;
		dct_box(x2, x3, 70936, (u32)-171254, x2, x3);
		t = x1 + x2, x2 = x1 - x2, x1 = t;
		t = x0 + x3, x3 = x0 - x3, x0 = t;
		x4 <<= 7;
		x7 <<= 7;
		t = x7 + x4, x4 = x7 - x4, x7 = t;
		x6 = x6 * 181;
		x5 = x5 * 181;
		t = x7 + x5, x5 = x7 - x5, x7 = t;
		t = x4 + x6, x6 = x4 - x6, x4 = t;
		dct_box(rsh(x4, 2), rsh(x7, 2), 3406, (u32)-2276, x4, x7);
		dct_box(rsh(x5, 2), rsh(x6, 2), 4017, (u32)-799, x5, x6);
		x[0] = x0 + x7, x[7] = x0 - x7;
		x[1] = x1 + x6, x[6] = x1 - x6;
		x[2] = x2 + x5, x[5] = x2 - x5;
		x[3] = x3 + x4, x[4] = x3 - x4;
	}
}

__device__ __forceinline__ unsigned char idct_level(u32 c) {
	c += 128;
	return c > 255 ? ((int)c < 0 ? 0 : 255) : (unsigned char)c;
}

__device__ void idct_cols_store(unsigned char *dst, i64 stride, const u32 *b) {
	for (int i = 0; i < 8; i++) {
		u32 x0 = b[i], x7 = b[8 + i], x2 = b[16 + i], x5 = b[24 + i], x1 = b[32 + i], x6 = b[40 + i], x3 = b[48 + i], x4 = b[56 + i], t;
		x0 += 1 << 19;
		t = rsh(x0 + x1, 2), x1 = rsh(x0 - x1, 2), x0 = t;
		dct_box(rsh(x2, 13), rsh(x3, 13), 1108, (u32)-2676, x2, x3);
		t = x1 + x2, x2 = x1 - x2, x1 = t;
		t = x0 + x3, x3 = x0 - x3, x0 = t;
		t = x7 + x4, x4 = x7 - x4, x7 = t;
		x5 = rsh(x5, 13) * 11585;
		x6 = rsh(x6, 13) * 11585;
		t = x7 + x5, x5 = x7 - x5, x7 = t;
		t = x4 + x6, x6 = x4 - x6, x4 = t;
		dct_box(rsh(x4, 14), rsh(x7, 14), 3406, (u32)-2276, x4, x7);
		dct_box(rsh(x5, 14), rsh(x6, 14), 4017, (u32)-799, x5, x6);
		u32 y[8] = {x0 + x7, x1 + x6, x2 + x5, x3 + x4, x3 - x4, x2 - x5, x1 - x6, x0 - x7};
		for (int k = 0; k < 8; k++) dst[k * stride + i] = idct_level(rsh(y[k], 18));
	}
}

// The reduced IDCTs' tables (reduced.go's idctTables, float32 bits): t[x*n+u].
__device__ const u32 idct_t2[4] = {0x3eb504f3, 0x3eb504f3, 0x3eb504f3, 0xbeb504f3};
__device__ const u32 idct_t4[16] = {0x3eb504f3, 0x3eec835e, 0x3eb504f3, 0x3e43ef15, 0x3eb504f3, 0x3e43ef15, 0xbeb504f3, 0xbeec835e,
	0x3eb504f3, 0xbe43ef15, 0xbeb504f3, 0x3eec835e, 0x3eb504f3, 0xbeec835e, 0x3eb504f3, 0xbe43ef15};

__device__ void idct_reduced(unsigned char *dst, i64 stride, const u32 *b, int n) {
	const u32 *tb = n == 2 ? idct_t2 : idct_t4;
	float tmp[16];
	for (int v = 0; v < n; v++)
		for (int x = 0; x < n; x++) {
			float s = 0;
			for (int u = 0; u < n; u++) s += __uint_as_float(tb[x * n + u]) * (float)(int)b[v * 8 + u];
			tmp[v * n + x] = s;
		}
	for (int y = 0; y < n; y++)
		for (int x = 0; x < n; x++) {
			float s = 128.5f;
			for (int v = 0; v < n; v++) s += __uint_as_float(tb[y * n + v]) * tmp[v * n + x];
			dst[y * stride + x] = s <= 0 ? 0 : s >= 255 ? 255 : (unsigned char)(int)s;
		}
}

// The zig-zag index of each natural-order position.
__device__ const unsigned char idct_zigzag[64] = {0, 1, 5, 6, 14, 15, 27, 28, 2, 4, 7, 13, 16, 26, 29, 42, 3, 8, 12, 17, 25, 30, 41, 43,
	9, 11, 18, 24, 31, 40, 44, 53, 10, 19, 23, 32, 39, 45, 52, 54, 20, 22, 33, 38, 46, 51, 55, 60, 21, 34, 37, 47, 50, 56, 59, 61,
	35, 36, 48, 49, 57, 58, 62, 63};

// render_idct reconstructs every block of every record (Coefficients.Reconstruct): REC_BLOCKS
// blocks a sample, one thread a JPEG block.
extern "C" __global__ void render_idct(const unsigned char *src, const int *offs, i64 n, unsigned char *ws, i64 slot, const u64 *status) {
	if (rec_stop(status)) return;
	for (i64 s = blockIdx.x / REC_BLOCKS; s < n; s += gridDim.x / REC_BLOCKS) {
		if (offs[2 * s + 1] != 1) continue;
		rec r;
		rec_read(src + offs[2 * s], &r);
		const unsigned char *b = r.b;
		i64 bs = 8 / r.scale;
		for (i64 i = (blockIdx.x % REC_BLOCKS) * blockDim.x + threadIdx.x; i < r.nb; i += REC_BLOCKS * blockDim.x) {
			i64 c = 0;
			while (c + 1 < r.comps && i >= r.g[c + 1].first) c++;
			const rec_grid &g = r.g[c];
			i64 row = (i - g.first) / g.across, col = (i - g.first) % g.across;
			unsigned char *dst = ws + s * slot + rec_plane(&r, c) + row * bs * g.stride + col * bs;
			u32 k = b[r.counts + i];
			if (k == 255) { // absent: zero
				for (i64 y = 0; y < bs; y++)
					for (i64 x = 0; x < bs; x++) dst[y * g.stride + x] = 0;
				continue;
			}
			u32 blk[64];
			for (int j = 0; j < 64; j++) blk[j] = 0;
			const unsigned char *quant = b + REC_HEADER + c * REC_GRID;
			u32 st = rd32(b + r.starts + 4 * i), last = 0;
			for (u32 j = st; j < st + k; j++) {
				u32 x = b[r.index + j] & 63;
				blk[x] = (u32)((int)(short)rd16(b + r.values + 2 * (i64)j) * (int)rd16(quant + 2 * x));
				if (x != 0) last = max(last, (u32)idct_zigzag[x]);
			}
			if (r.flags & 2) last = 63;
			if (last == 0 || bs == 1) {
				int v = ((int)blk[0] + 4 >> 3) + 128;
				unsigned char f = v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
				for (i64 y = 0; y < bs; y++)
					for (i64 x = 0; x < bs; x++) dst[y * g.stride + x] = f;
			} else if (bs != 8) {
				idct_reduced(dst, g.stride, blk, (int)bs);
			} else {
				idct_rows(blk);
				idct_cols_store(dst, g.stride, blk);
			}
		}
	}
}

// Go's math.Sin (sin.go, below its reduceThreshold: Lanczos' arguments stay within 3π), for the
// Lanczos taps to be Go's.
__device__ double go_sin(double x) {
	const double s[6] = {1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
		-1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1};
	const double c[6] = {-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
		2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2};
	const double PI4A = 7.85398125648498535156e-1, PI4B = 3.77489470793079817668e-8, PI4C = 2.69515142907905952645e-15;
	if (x == 0 || isnan(x)) return x;
	bool sign = false;
	if (x < 0) x = -x, sign = true;
	u64 j = (u64)(x * 1.2732395447351628); // x * (4/Pi)
	double y = (double)j;
	if (j & 1) j++, y++;
	j &= 7;
	double z = ((x - y * PI4A) - y * PI4B) - y * PI4C;
	if (j > 3) sign = !sign, j -= 4;
	double zz = z * z;
	if (j == 1 || j == 2)
		y = 1.0 - 0.5 * zz + zz * zz * ((((((c[0] * zz) + c[1]) * zz + c[2]) * zz + c[3]) * zz + c[4]) * zz + c[5]);
	else
		y = z + z * zz * ((((((s[0] * zz) + s[1]) * zz + s[2]) * zz + s[3]) * zz + s[4]) * zz + s[5]);
	return sign ? -y : y;
}

__device__ double go_sinc(double x) {
	if (x == 0) return 1;
	x *= 3.141592653589793;
	return go_sin(x) / x;
}

// rec_filter is resample.go's filters[f].f (bilinear as weights.compute inlines it).
__device__ double rec_filter(int f, double x) {
	if (f == 0) {
		double v = 1 - fabs(x);
		return v > 0 ? v : 0;
	}
	if (f == 1) {
		const double a = -0.5;
		x = fabs(x);
		if (x < 1) return ((1.5 * x - 2.5) * x) * x + 1;
		if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
		return 0;
	}
	if (x > -3 && x < 3) return go_sinc(x) * go_sinc(x / 3);
	return 0;
}

// rec_taps are the taps of one output of an axis on a plane (weights.compute for one i): from
// xmin, cnt taps; rec_weight gives tap t's fixed-point weight.
struct rec_taps {
	i64 xmin, cnt;
	double center, ss, sum;
	int filter;
};

// rec_tap computes the taps of output j of axis a on a plane of size samples, whose sample x
// covers the full-resolution pixels of x+origin at ratio samples a pixel.
__device__ rec_taps rec_tap(const rec_axis &a, double ratio, i64 origin, i64 size, int filter, i64 j) {
	const double support[3] = {1, 2, 3};
	double scale = a.scale * ratio, off = a.off * ratio - (double)origin;
	double fscale = scale > 1 ? scale : 1;
	double sup = support[filter] * fscale;
	rec_taps t;
	t.filter = filter, t.ss = 1 / fscale;
	t.center = off + ((double)j + 0.5) * scale;
	i64 xmin = max((i64)(t.center - sup + 0.5), (i64)0), xmax = min((i64)(t.center + sup + 0.5), size);
	if (xmin >= size) xmin = size - 1, xmax = size;
	if (xmax <= xmin) xmax = xmin + 1;
	t.xmin = xmin, t.cnt = xmax - xmin, t.sum = 0;
	for (i64 k = 0; k < t.cnt; k++) t.sum += rec_filter(filter, ((double)(k + xmin) - t.center + 0.5) * t.ss);
	if (t.sum == 0) t.cnt = 1; // the box fell between taps: nearest pixel
	return t;
}

// go_int32 is Go's int32 conversion of a float64 on amd64 (CVTTSD2SL): out of range is MinInt32.
__device__ int go_int32(double v) { return v > -2147483649.0 && v < 2147483648.0 ? (int)v : (int)0x80000000; }

__device__ u32 rec_weight(const rec_taps &t, i64 k) {
	if (t.sum == 0) return 1u << REC_PREC;
	double v = rec_filter(t.filter, ((double)(k + t.xmin) - t.center + 0.5) * t.ss) / t.sum * (double)(1 << REC_PREC);
	return (u32)go_int32(v < 0 ? v - 0.5 : v + 0.5);
}

__device__ unsigned char rec_clip8(u32 acc) {
	int v = (int)acc >> REC_PREC;
	return (u32)v > 255 ? (v < 0 ? 0 : 255) : (unsigned char)v;
}

// render_hpass runs the horizontal pass of each plane a record resamples over every row of the
// plane: pass[y][j-lo] for the outputs j in [lo, hi) of axis u.
extern "C" __global__ void render_hpass(const unsigned char *src, const int *offs, i64 n, unsigned char *ws, i64 slot, const u64 *status) {
	if (rec_stop(status)) return;
	for (i64 s = blockIdx.x / REC_BLOCKS; s < n; s += gridDim.x / REC_BLOCKS) {
		if (offs[2 * s + 1] != 1) continue;
		rec r;
		rec_read(src + offs[2 * s], &r);
		i64 nu = r.ax[0].hi - r.ax[0].lo, planes = rec_planes(&r), rows = 0;
		for (i64 p = 0; p < planes; p++) rows += r.g[p].ph;
		unsigned char *slotp = ws + s * slot;
		for (i64 i = (blockIdx.x % REC_BLOCKS) * blockDim.x + threadIdx.x; i < rows * nu; i += REC_BLOCKS * blockDim.x) {
			i64 y = i / nu, jx = i % nu, p = 0;
			while (y >= r.g[p].ph) y -= r.g[p].ph, p++;
			const rec_grid &g = r.g[p];
			rec_taps t = rec_tap(r.ax[0], 1 / (double)(g.subx * r.scale), g.px0, g.pw, (int)r.filter, r.ax[0].lo + jx);
			const unsigned char *row = slotp + rec_plane(&r, p) + y * g.stride + t.xmin;
			u32 acc = 1u << (REC_PREC - 1);
			for (i64 k = 0; k < t.cnt; k++) acc += (u32)row[k] * rec_weight(t, k);
			slotp[rec_pass(&r, p) + y * nu + jx] = rec_clip8(acc);
		}
	}
}

// ycbcr_clamp is clampShift of transforms (image/color's YCbCr to RGB).
__device__ unsigned char ycbcr_clamp(u32 v) { return (v & 0xff000000) == 0 ? (unsigned char)(v >> 16) : (unsigned char)~((int)v >> 31); }

// render_vpass writes each sample's pixels: a record's outputs of axes u, v through the vertical
// pass of each plane, converted (writeRow of transforms) and stored at base + j*du + k*dv, zero
// where the axes pad; the host's pixels copied.
extern "C" __global__ void render_vpass(unsigned char *dst, const unsigned char *src, const int *offs, i64 n, i64 pixels, const unsigned char *ws, i64 slot, const u64 *status) {
	if (rec_stop(status)) return;
	for (i64 s = blockIdx.x / REC_BLOCKS; s < n; s += gridDim.x / REC_BLOCKS) {
		unsigned char *out = dst + s * pixels;
		i64 first = (blockIdx.x % REC_BLOCKS) * blockDim.x + threadIdx.x, step = REC_BLOCKS * blockDim.x;
		if (offs[2 * s + 1] == 0) {
			const unsigned char *in = src + offs[2 * s];
			for (i64 i = first; i < pixels; i += step) out[i] = in[i];
			continue;
		}
		rec r;
		rec_read(src + offs[2 * s], &r);
		const rec_axis &u = r.ax[0], &v = r.ax[1];
		i64 nu = u.hi - u.lo, chan = r.oh * r.ow, planes = rec_planes(&r);
		const unsigned char *slotp = ws + s * slot;
		for (i64 i = first; i < chan; i += step) {
			i64 k = i / u.n, j = i % u.n, o = r.base + j * r.du + k * r.dv;
			unsigned char px[3] = {0, 0, 0};
			if (j >= u.lo && j < u.hi && k >= v.lo && k < v.hi) {
				for (i64 p = 0; p < planes; p++) {
					const rec_grid &g = r.g[p];
					rec_taps t = rec_tap(v, 1 / (double)(g.suby * r.scale), g.py0, g.ph, (int)r.filter, k);
					const unsigned char *col = slotp + rec_pass(&r, p) + t.xmin * nu + (j - u.lo);
					u32 acc = 1u << (REC_PREC - 1);
					for (i64 q = 0; q < t.cnt; q++) acc += (u32)col[q * nu] * rec_weight(t, q);
					px[p] = rec_clip8(acc);
				}
				if (r.nc == 1 && (r.flags & 1))
					px[0] = (unsigned char)(((u32)px[0] * 19595 + (u32)px[1] * 38470 + (u32)px[2] * 7471 + (1u << 15)) >> 16);
				else if (planes == 1)
					px[1] = px[2] = px[0];
				else if (!(r.flags & 1)) {
					u32 yy = (u32)px[0] * 0x10101, cb = (u32)px[1] - 128, cr = (u32)px[2] - 128;
					px[0] = ycbcr_clamp(yy + 91881 * cr);
					px[1] = ycbcr_clamp(yy - 22554 * cb - 46802 * cr);
					px[2] = ycbcr_clamp(yy + 116130 * cb);
				}
			}
			for (i64 c = 0; c < r.nc; c++) out[o + c * chan] = px[c];
		}
	}
}
