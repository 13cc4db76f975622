//go:build !noasm

#include "textflag.h"

// The constants of expf (attention.go), each broadcast to 8 lanes.
#define ROW(off, v) \
	DATA expConsts<>+(off+0)(SB)/4, $v; DATA expConsts<>+(off+4)(SB)/4, $v; \
	DATA expConsts<>+(off+8)(SB)/4, $v; DATA expConsts<>+(off+12)(SB)/4, $v; \
	DATA expConsts<>+(off+16)(SB)/4, $v; DATA expConsts<>+(off+20)(SB)/4, $v; \
	DATA expConsts<>+(off+24)(SB)/4, $v; DATA expConsts<>+(off+28)(SB)/4, $v

ROW(0, -87.33)               // expLo
ROW(32, 88.72)               // expHi
ROW(64, 1.44269504088896341) // expLog2e
ROW(96, 0.693359375)         // expC1
ROW(128, -2.12194440e-4)     // expC2
ROW(160, 1.9875691500e-4)    // expP0
ROW(192, 1.3981999507e-3)    // expP1
ROW(224, 8.3334519073e-3)    // expP2
ROW(256, 4.1665795894e-2)    // expP3
ROW(288, 1.6666665459e-1)    // expP4
ROW(320, 5.0000001201e-1)    // expP5
ROW(352, 1.0)                // one
GLOBL expConsts<>(SB), RODATA|NOPTR, $384

// func expShiftAVX2(x *float32, n int, shift float32, lanes *[8]float32)
//
// x[i] = expf(x[i] - shift) for i < n, n a multiple of 8, with expf's float32 operations one
// for one (no fused multiply-add), so the bits are the Go loop's; lanes[j] = the sum of the
// results x[i], i%8 == j, in increasing i.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y15
	MOVQ lanes+24(FP), DI
	VXORPS Y0, Y0, Y0
	VMOVUPS expConsts<>+0(SB), Y8
	VMOVUPS expConsts<>+32(SB), Y9
	VMOVUPS expConsts<>+64(SB), Y10
	VMOVUPS expConsts<>+96(SB), Y11
	VMOVUPS expConsts<>+128(SB), Y12
	VMOVUPS expConsts<>+352(SB), Y13
	MOVL $0x3f800000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // 127<<23: the exponent's bias
	SHRQ $3, CX
	JZ   exp_done

exp_loop:
	VMOVUPS (SI), Y1
	VSUBPS Y15, Y1, Y1         // x -= shift
	VCMPPS $1, Y8, Y1, Y6      // x < expLo: the result is 0
	VMINPS Y1, Y9, Y1          // min(x, expHi); NaN stays NaN
	VMULPS Y10, Y1, Y2
	VROUNDPS $0, Y2, Y2        // n = x·log2e to the nearest, ties to even
	VMULPS Y11, Y2, Y3
	VSUBPS Y3, Y1, Y1          // x -= n·c1
	VMULPS Y12, Y2, Y3
	VSUBPS Y3, Y1, Y1          // x -= n·c2
	VMULPS expConsts<>+160(SB), Y1, Y3
	VADDPS expConsts<>+192(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+224(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+256(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+288(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+320(SB), Y3, Y3
	VMULPS Y1, Y1, Y4          // z = x·x
	VMULPS Y4, Y3, Y3
	VADDPS Y1, Y3, Y3
	VADDPS Y13, Y3, Y3         // p = p·z + x + 1
	VCVTPS2DQ Y2, Y5
	VPSLLD $23, Y5, Y5
	VPADDD Y14, Y5, Y5         // 2^n
	VMULPS Y5, Y3, Y3
	VANDNPS Y3, Y6, Y3
	VMOVUPS Y3, (SI)
	VADDPS Y3, Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  exp_loop

exp_done:
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET
