//go:build !noasm

#include "textflag.h"

// CONV8(off, Y) converts the 8 bytes at off(SI) to float32 in Y and applies Y = Y*Y14 + Y15
// (multiply, round, add, round: normalizeGo's two steps).
#define CONV8(off, Y) \
	VPMOVZXBD off(SI), Y \
	VCVTDQ2PS Y, Y \
	VMULPS    Y14, Y, Y \
	VADDPS    Y15, Y, Y

// func normalizeAVX2(dst *float32, src *uint8, n int, mul, add float32)
TEXT ·normalizeAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS mul+24(FP), Y14
	VBROADCASTSS add+28(FP), Y15

avx2loop32:
	CMPQ    CX, $32
	JLT     avx2loop8
	CONV8(0, Y0)
	CONV8(8, Y1)
	CONV8(16, Y2)
	CONV8(24, Y3)
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $32, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     avx2loop32

avx2loop8:
	CMPQ    CX, $8
	JLT     avx2done
	CONV8(0, Y0)
	VMOVUPS Y0, (DI)
	ADDQ    $8, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     avx2loop8

avx2done:
	VZEROUPPER
	RET

// CONV16(off, Z) is CONV8 for 16 bytes into a zmm register (factors in Z14, Z15).
#define CONV16(off, Z) \
	VPMOVZXBD off(SI), Z \
	VCVTDQ2PS Z, Z \
	VMULPS    Z14, Z, Z \
	VADDPS    Z15, Z, Z

// func normalizeAVX512(dst *float32, src *uint8, n int, mul, add float32)
TEXT ·normalizeAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS mul+24(FP), Z14
	VBROADCASTSS add+28(FP), Z15

avx512loop64:
	CMPQ    CX, $64
	JLT     avx512loop16
	CONV16(0, Z0)
	CONV16(16, Z1)
	CONV16(32, Z2)
	CONV16(48, Z3)
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $64, SI
	ADDQ    $256, DI
	SUBQ    $64, CX
	JMP     avx512loop64

avx512loop16:
	CMPQ    CX, $16
	JLT     avx512done
	CONV16(0, Z0)
	VMOVUPS Z0, (DI)
	ADDQ    $16, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JMP     avx512loop16

avx512done:
	VZEROUPPER
	RET
