/*
 * halfconv.h: conversions between float and the 16-bit types (IEEE half, bfloat16), rounding to
 * nearest even as the GPU's conversions do; shared by the stand-in cuBLAS and NCCL.
 */
#ifndef STOKE_CUDASIM_HALFCONV_H
#define STOKE_CUDASIM_HALFCONV_H

#include <stdint.h>
#include <string.h>

namespace cudasim {

inline float half_to_float(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { // subnormal: normalise
			int e = -1;
			do {
				man <<= 1;
				e++;
			} while (!(man & 0x400));
			bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
		}
	} else {
		bits = sign | (exp + 127 - 15) << 23 | man << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// float_to_half rounds to nearest even, as the GPU's conversion does.
inline uint16_t float_to_half(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0); // Inf, NaN
	if (ax >= 0x477ff000u) return sign | 0x7c00;                                  // rounds to Inf
	if (ax < 0x38800000u) { // subnormal or zero in half
		if (ax < 0x33000000u) return sign;
		uint32_t man = (ax & 0x7fffff) | 0x800000, shift = 126 - (ax >> 23);
		uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1))) r++;
		return sign | (uint16_t)r;
	}
	uint32_t r = ((ax >> 13) - (112u << 10));
	uint32_t rem = ax & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
	return sign | (uint16_t)r;
}

inline float bf16_to_float(uint16_t h) {
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

inline uint16_t float_to_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); // quiet NaN
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

} // namespace cudasim

#endif
