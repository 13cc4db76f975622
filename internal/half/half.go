// Package half converts between float32 and the two 16-bit floating-point formats of reduced
// precision training: bfloat16 (fp32's range, 8 significand bits) and IEEE 754 binary16 (fp16:
// 11 significand bits, largest finite 65504, subnormals down to 2^-24). Rounding is to the
// nearest value, ties to even, as the GPU's conversions and the CUDA op set's kernels
// (gpu/cuda/ops.cu) round. It is the one owner of these conversions: collective (the host's
// all-reduce of 16-bit gradients) and kernels (the CPU op set and its precision emulation) both
// use it, so the two agree bit for bit.
package half

import "math"

// BF16ToF32 widens bfloat16 bits to a float32 (exactly).
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; a NaN stays a (quiet) NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FP16ToF32 widens IEEE half-precision bits to a float32 (exactly: subnormals, ±0 and ±Inf
// included; a NaN keeps its sign and payload).
func FP16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case e == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case e != 0: // normal: rebias the exponent (15 -> 127)
		return math.Float32frombits(sign | (e+112)<<23 | m<<13)
	}
	return math.Float32frombits(sign | math.Float32bits(float32(m)*0x1p-24)) // zero, subnormal: m * 2^-24
}

// F32ToFP16 rounds f to the nearest IEEE half, ties to even: a magnitude of 65520 or more (half
// way between 65504 and 2^16) becomes ±Inf, one below 2^-14 a subnormal (a multiple of 2^-24),
// one up to 2^-25 ±0; a NaN becomes the quiet NaN 0x7e00 with f's sign.
func F32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	a, sign := b&0x7fffffff, uint16(b>>16)&0x8000
	switch {
	case a > 0x7f800000:
		return sign | 0x7e00
	case a >= 0x477ff000:
		return sign | 0x7c00
	case a >= 0x38800000: // 2^-14 and up: a normal half, 10 significand bits
		return sign | uint16((a+0xfff+(a>>13)&1-0x38000000)>>13)
	case a <= 0x33000000: // up to 2^-25 (a tie with 0): zero
		return sign
	}
	shift := 126 - a>>23 // a subnormal half: the significand in units of 2^-24
	m := a&0x7fffff | 0x800000
	q, rem, halfway := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > halfway || rem == halfway && q&1 != 0 {
		q++
	}
	return sign | uint16(q)
}
