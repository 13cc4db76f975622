//go:build !noasm

#include "textflag.h"

// One step of k: the B row (16 floats) into Y12:Y13, then each of the 6 A values broadcast and
// multiplied into its row's two accumulators. ao is the A offset (bytes), bo the B offset.
#define STEP6x16(ao, bo) \
	VMOVUPS bo(DI), Y12; \
	VMOVUPS bo+32(DI), Y13; \
	VBROADCASTSS ao(SI), Y14; \
	VFMADD231PS Y12, Y14, Y0; \
	VFMADD231PS Y13, Y14, Y1; \
	VBROADCASTSS ao+4(SI), Y15; \
	VFMADD231PS Y12, Y15, Y2; \
	VFMADD231PS Y13, Y15, Y3; \
	VBROADCASTSS ao+8(SI), Y14; \
	VFMADD231PS Y12, Y14, Y4; \
	VFMADD231PS Y13, Y14, Y5; \
	VBROADCASTSS ao+12(SI), Y15; \
	VFMADD231PS Y12, Y15, Y6; \
	VFMADD231PS Y13, Y15, Y7; \
	VBROADCASTSS ao+16(SI), Y14; \
	VFMADD231PS Y12, Y14, Y8; \
	VFMADD231PS Y13, Y14, Y9; \
	VBROADCASTSS ao+20(SI), Y15; \
	VFMADD231PS Y12, Y15, Y10; \
	VFMADD231PS Y13, Y15, Y11

// C row = alpha*acc + beta*C (alpha in Y14, beta in Y15), then advance to the next row.
#define ROWBETA(r0, r1) \
	VMULPS Y14, r0, r0; \
	VMULPS Y14, r1, r1; \
	VFMADD231PS (DX), Y15, r0; \
	VFMADD231PS 32(DX), Y15, r1; \
	VMOVUPS r0, (DX); \
	VMOVUPS r1, 32(DX); \
	ADDQ R8, DX

// C row = alpha*acc, C not read.
#define ROWZERO(r0, r1) \
	VMULPS Y14, r0, r0; \
	VMULPS Y14, r1, r1; \
	VMOVUPS r0, (DX); \
	VMOVUPS r1, 32(DX); \
	ADDQ R8, DX

// func sgemm6x16AVX2(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·sgemm6x16AVX2(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail

loop4:
	STEP6x16(0, 0)
	STEP6x16(24, 64)
	STEP6x16(48, 128)
	STEP6x16(72, 192)
	ADDQ $96, SI
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	ANDQ $3, CX
	JZ   store

loop1:
	STEP6x16(0, 0)
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+40(FP), Y14
	MOVL beta+44(FP), AX
	ANDL $0x7fffffff, AX // +0 and -0 both mean "do not read C"
	JZ   storezero
	VBROADCASTSS beta+44(FP), Y15
	ROWBETA(Y0, Y1)
	ROWBETA(Y2, Y3)
	ROWBETA(Y4, Y5)
	ROWBETA(Y6, Y7)
	ROWBETA(Y8, Y9)
	ROWBETA(Y10, Y11)
	VZEROUPPER
	RET

storezero:
	ROWZERO(Y0, Y1)
	ROWZERO(Y2, Y3)
	ROWZERO(Y4, Y5)
	ROWZERO(Y6, Y7)
	ROWZERO(Y8, Y9)
	ROWZERO(Y10, Y11)
	VZEROUPPER
	RET
