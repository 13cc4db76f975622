package collective

import (
	"unsafe"

	"github.com/stoke-ml/stoke/internal/half"
)

// asF32 views b (whose length is a multiple of 4 and which is 4-aligned) as float32s.
func asF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func asU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
}

func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*2)
}

// addF32 sets dst[i] = dst[i] + src[i], with the AVX2 kernel where there is
// one (the same IEEE additions, so the same bits).
func addF32(dst, src []float32) {
	src = src[:len(dst)]
	if n := len(dst) &^ 31; n > 0 && haveAVX2 {
		addF32AVX2(&dst[0], &src[0], n)
		dst, src = dst[n:], src[n:]
	}
	addF32Go(dst, src)
}

// addF32Go is addF32 in Go.
func addF32Go(dst, src []float32) {
	src = src[:len(dst)]
	for len(dst) >= 8 {
		d, s := dst[:8:8], src[:8:8]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
		d[4] += s[4]
		d[5] += s[5]
		d[6] += s[6]
		d[7] += s[7]
		dst, src = dst[8:], src[8:]
	}
	for i := range dst {
		dst[i] += src[i]
	}
}

// divF32 sets v[i] = v[i] / n.
func divF32(v []float32, n float32) {
	for i := range v {
		v[i] /= n
	}
}

// BF16ToF32 widens bfloat16 bits to a float32 (exactly).
func BF16ToF32(b uint16) float32 { return half.BF16ToF32(b) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; a NaN stays a
// (quiet) NaN.
func F32ToBF16(f float32) uint16 { return half.F32ToBF16(f) }

// FP16ToF32 widens IEEE half-precision (fp16) bits to a float32 (exactly,
// subnormals, infinities and NaNs included).
func FP16ToF32(h uint16) float32 { return half.FP16ToF32(h) }

// F32ToFP16 rounds f to the nearest IEEE half (fp16), ties to even: a
// magnitude of 65520 or more becomes ±Inf, one below 2^-14 is kept as a
// subnormal (a multiple of 2^-24), a NaN stays a (quiet) NaN.
func F32ToFP16(f float32) uint16 { return half.F32ToFP16(f) }

// format16 is a 16-bit floating-point format the ring reduces: its rounding
// from float32, its (exact) widening to it, and the ring's two loops over it,
// add (dst[i] = round(f32(dst[i]) + f32(src[i])): one rounding per hop) and
// div (v[i] = round(f32(v[i]) / n)). The loops are written per format, with
// direct calls the compiler inlines: through round and widen they ran 3.2x
// slower (bf16, 1 Mi values: 457 against 1,461 MB/s).
type format16 struct {
	round func(float32) uint16
	widen func(uint16) float32
	add   func(dst, src []uint16)
	div   func(v []uint16, n float32)
}

var (
	bf16Format = format16{half.F32ToBF16, half.BF16ToF32, addBF16, divBF16}
	fp16Format = format16{half.F32ToFP16, half.FP16ToF32, addFP16, divFP16}
)

func addBF16(dst, src []uint16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = half.F32ToBF16(half.BF16ToF32(dst[i]) + half.BF16ToF32(src[i]))
	}
}

func divBF16(v []uint16, n float32) {
	for i := range v {
		v[i] = half.F32ToBF16(half.BF16ToF32(v[i]) / n)
	}
}

func addFP16(dst, src []uint16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = half.F32ToFP16(half.FP16ToF32(dst[i]) + half.FP16ToF32(src[i]))
	}
}

func divFP16(v []uint16, n float32) {
	for i := range v {
		v[i] = half.F32ToFP16(half.FP16ToF32(v[i]) / n)
	}
}
