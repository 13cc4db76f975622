package dist

import (
	"math"
	"unsafe"
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
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; a NaN stays a
// (quiet) NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// addBF16 sets dst[i] = bf16(f32(dst[i]) + f32(src[i])): one rounding per hop.
func addBF16(dst, src []uint16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = F32ToBF16(BF16ToF32(dst[i]) + BF16ToF32(src[i]))
	}
}

func divBF16(v []uint16, n float32) {
	for i := range v {
		v[i] = F32ToBF16(BF16ToF32(v[i]) / n)
	}
}
