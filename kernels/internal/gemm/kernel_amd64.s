//go:build !noasm

#include "textflag.h"

// One step of k: the B row (16 floats at bo(DI)) into Y12:Y13, then each of the 6 A values
// broadcast and multiplied into its row's two accumulators. Rows 0-2 of A are at (SI),
// (SI)(R9*1), (SI)(R9*2), rows 3-5 the same from R10; R11 moves both to the next column.
#define STEP(bo) \
	VMOVUPS bo(DI), Y12; \
	VMOVUPS bo+32(DI), Y13; \
	VBROADCASTSS (SI), Y14; \
	VFMADD231PS Y12, Y14, Y0; \
	VFMADD231PS Y13, Y14, Y1; \
	VBROADCASTSS (SI)(R9*1), Y15; \
	VFMADD231PS Y12, Y15, Y2; \
	VFMADD231PS Y13, Y15, Y3; \
	VBROADCASTSS (SI)(R9*2), Y14; \
	VFMADD231PS Y12, Y14, Y4; \
	VFMADD231PS Y13, Y14, Y5; \
	VBROADCASTSS (R10), Y15; \
	VFMADD231PS Y12, Y15, Y6; \
	VFMADD231PS Y13, Y15, Y7; \
	VBROADCASTSS (R10)(R9*1), Y14; \
	VFMADD231PS Y12, Y14, Y8; \
	VFMADD231PS Y13, Y14, Y9; \
	VBROADCASTSS (R10)(R9*2), Y15; \
	VFMADD231PS Y12, Y15, Y10; \
	VFMADD231PS Y13, Y15, Y11; \
	ADDQ R11, SI; \
	ADDQ R11, R10

// C row = alpha*acc + beta*C (alpha in Y14, beta in Y15), then on to the next row.
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

// func sgemm6x16AVX2(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)
TEXT ·sgemm6x16AVX2(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R9
	SHLQ $2, R9
	MOVQ ps+24(FP), R11
	SHLQ $2, R11
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8
	LEAQ (R9)(R9*2), R10
	ADDQ SI, R10

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
	STEP(0)
	STEP(64)
	STEP(128)
	STEP(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	ANDQ $3, CX
	JZ   store

loop1:
	STEP(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+56(FP), Y14
	MOVL beta+60(FP), AX
	ANDL $0x7fffffff, AX // +0 and -0 both mean "do not read C"
	JZ   storezero
	VBROADCASTSS beta+60(FP), Y15
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

// Transposes the 8x8 block of floats in Y0-Y7 (one row each) into Y8-Y15 (Y8 = column 0, ...).
// Y0-Y7 are clobbered.
#define TRANSPOSE8 \
	VUNPCKLPS Y1, Y0, Y8; \
	VUNPCKHPS Y1, Y0, Y9; \
	VUNPCKLPS Y3, Y2, Y10; \
	VUNPCKHPS Y3, Y2, Y11; \
	VUNPCKLPS Y5, Y4, Y12; \
	VUNPCKHPS Y5, Y4, Y13; \
	VUNPCKLPS Y7, Y6, Y14; \
	VUNPCKHPS Y7, Y6, Y15; \
	VSHUFPS $0x44, Y10, Y8, Y0; \
	VSHUFPS $0xEE, Y10, Y8, Y1; \
	VSHUFPS $0x44, Y11, Y9, Y2; \
	VSHUFPS $0xEE, Y11, Y9, Y3; \
	VSHUFPS $0x44, Y14, Y12, Y4; \
	VSHUFPS $0xEE, Y14, Y12, Y5; \
	VSHUFPS $0x44, Y15, Y13, Y6; \
	VSHUFPS $0xEE, Y15, Y13, Y7; \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x20, Y5, Y1, Y9; \
	VPERM2F128 $0x20, Y6, Y2, Y10; \
	VPERM2F128 $0x20, Y7, Y3, Y11; \
	VPERM2F128 $0x31, Y4, Y0, Y12; \
	VPERM2F128 $0x31, Y5, Y1, Y13; \
	VPERM2F128 $0x31, Y6, Y2, Y14; \
	VPERM2F128 $0x31, Y7, Y3, Y15

// Loads 8 floats from each of the 8 rows at base (row stride R8; R11 = 3*R8, R12 = 5*R8,
// R13 = 7*R8) into Y0-Y7.
#define LOAD8(base) \
	VMOVUPS (base), Y0; \
	VMOVUPS (base)(R8*1), Y1; \
	VMOVUPS (base)(R8*2), Y2; \
	VMOVUPS (base)(R11*1), Y3; \
	VMOVUPS (base)(R8*4), Y4; \
	VMOVUPS (base)(R12*1), Y5; \
	VMOVUPS (base)(R11*2), Y6; \
	VMOVUPS (base)(R13*1), Y7

// Stores Y8-Y15 as 8 consecutive rows of dst (row stride R9), then moves DI past them.
#define STORE8 \
	VMOVUPS Y8, (DI); \
	VMOVUPS Y9, (DI)(R9*1); \
	VMOVUPS Y10, (DI)(R9*2); \
	VMOVUPS Y11, (DI)(R10*1); \
	VMOVUPS Y12, (DI)(R9*4); \
	VMOVUPS Y13, (DI)(BX*1); \
	VMOVUPS Y14, (DI)(R10*2); \
	VMOVUPS Y15, (DI)(DX*1); \
	LEAQ (DI)(R9*8), DI

// func packBT8AVX(dst, src *float32, ld, n8, nr int)
//
// dst[p*nr+c] = src[c*ld+p] for c < 8 and p < 8*n8: 8 rows of a row-major matrix become 8
// columns of a sliver nr floats wide, by 8x8 transposes.
TEXT ·packBT8AVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), R8
	SHLQ $2, R8
	MOVQ n8+24(FP), CX
	MOVQ nr+32(FP), R9
	SHLQ $2, R9
	LEAQ (R8)(R8*2), R11
	LEAQ (R8)(R8*4), R12
	LEAQ (R11)(R8*4), R13
	LEAQ (R9)(R9*2), R10
	LEAQ (R9)(R9*4), BX
	LEAQ (R10)(R9*4), DX

loop:
	LOAD8(SI)
	TRANSPOSE8
	STORE8
	ADDQ $32, SI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET

// One row of the AVX-512 kernel: broadcast A (addr) into zb, multiply-add with the B row in
// Z24:Z25 into the row's accumulators r0:r1.
#define ROW512(addr, zb, r0, r1) \
	VBROADCASTSS addr, zb; \
	VFMADD231PS Z24, zb, r0; \
	VFMADD231PS Z25, zb, r1

// One step of k for 12x32: rows 0-2 from SI, 3-5 from R10, 6-8 from R12, 9-11 from R13 (each
// base +0, +rs, +2rs with rs in R9); R11 moves all four to the next column of A.
#define STEP512(bo) \
	VMOVUPS bo(DI), Z24; \
	VMOVUPS bo+64(DI), Z25; \
	ROW512((SI), Z26, Z0, Z1); \
	ROW512((SI)(R9*1), Z27, Z2, Z3); \
	ROW512((SI)(R9*2), Z28, Z4, Z5); \
	ROW512((R10), Z29, Z6, Z7); \
	ROW512((R10)(R9*1), Z30, Z8, Z9); \
	ROW512((R10)(R9*2), Z31, Z10, Z11); \
	ROW512((R12), Z26, Z12, Z13); \
	ROW512((R12)(R9*1), Z27, Z14, Z15); \
	ROW512((R12)(R9*2), Z28, Z16, Z17); \
	ROW512((R13), Z29, Z18, Z19); \
	ROW512((R13)(R9*1), Z30, Z20, Z21); \
	ROW512((R13)(R9*2), Z31, Z22, Z23); \
	ADDQ R11, SI; \
	ADDQ R11, R10; \
	ADDQ R11, R12; \
	ADDQ R11, R13

// C row (32 floats) = alpha*acc + beta*C (alpha in Z26, beta in Z27), then the next row.
#define ROWBETA512(r0, r1) \
	VMULPS Z26, r0, r0; \
	VMULPS Z26, r1, r1; \
	VFMADD231PS (DX), Z27, r0; \
	VFMADD231PS 64(DX), Z27, r1; \
	VMOVUPS r0, (DX); \
	VMOVUPS r1, 64(DX); \
	ADDQ R8, DX

#define ROWZERO512(r0, r1) \
	VMULPS Z26, r0, r0; \
	VMULPS Z26, r1, r1; \
	VMOVUPS r0, (DX); \
	VMOVUPS r1, 64(DX); \
	ADDQ R8, DX

// func sgemm12x32AVX512(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)
TEXT ·sgemm12x32AVX512(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R9
	SHLQ $2, R9
	MOVQ ps+24(FP), R11
	SHLQ $2, R11
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8
	LEAQ (R9)(R9*2), R10
	ADDQ SI, R10
	LEAQ (R9)(R9*2), R12
	LEAQ (R10)(R12*1), R13
	ADDQ R10, R12
	ADDQ R9, R13
	ADDQ R9, R13
	ADDQ R9, R13

	VPXORD Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z0, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z0, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z0, Z15
	VMOVAPS Z0, Z16
	VMOVAPS Z0, Z17
	VMOVAPS Z0, Z18
	VMOVAPS Z0, Z19
	VMOVAPS Z0, Z20
	VMOVAPS Z0, Z21
	VMOVAPS Z0, Z22
	VMOVAPS Z0, Z23

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail512

loop512:
	STEP512(0)
	STEP512(128)
	STEP512(256)
	STEP512(384)
	ADDQ $512, DI
	DECQ BX
	JNZ  loop512

tail512:
	ANDQ $3, CX
	JZ   store512

loop512one:
	STEP512(0)
	ADDQ $128, DI
	DECQ CX
	JNZ  loop512one

store512:
	VBROADCASTSS alpha+56(FP), Z26
	MOVL beta+60(FP), AX
	ANDL $0x7fffffff, AX // +0 and -0 both mean "do not read C"
	JZ   storezero512
	VBROADCASTSS beta+60(FP), Z27
	ROWBETA512(Z0, Z1)
	ROWBETA512(Z2, Z3)
	ROWBETA512(Z4, Z5)
	ROWBETA512(Z6, Z7)
	ROWBETA512(Z8, Z9)
	ROWBETA512(Z10, Z11)
	ROWBETA512(Z12, Z13)
	ROWBETA512(Z14, Z15)
	ROWBETA512(Z16, Z17)
	ROWBETA512(Z18, Z19)
	ROWBETA512(Z20, Z21)
	ROWBETA512(Z22, Z23)
	VZEROUPPER
	RET

storezero512:
	ROWZERO512(Z0, Z1)
	ROWZERO512(Z2, Z3)
	ROWZERO512(Z4, Z5)
	ROWZERO512(Z6, Z7)
	ROWZERO512(Z8, Z9)
	ROWZERO512(Z10, Z11)
	ROWZERO512(Z12, Z13)
	ROWZERO512(Z14, Z15)
	ROWZERO512(Z16, Z17)
	ROWZERO512(Z18, Z19)
	ROWZERO512(Z20, Z21)
	ROWZERO512(Z22, Z23)
	VZEROUPPER
	RET

// One step of k for 8x32: rows 0-2 from SI, 3-5 from R10, 6-7 from R12.
#define STEP8x32(bo) \
	VMOVUPS bo(DI), Z24; \
	VMOVUPS bo+64(DI), Z25; \
	ROW512((SI), Z26, Z0, Z1); \
	ROW512((SI)(R9*1), Z27, Z2, Z3); \
	ROW512((SI)(R9*2), Z28, Z4, Z5); \
	ROW512((R10), Z29, Z6, Z7); \
	ROW512((R10)(R9*1), Z30, Z8, Z9); \
	ROW512((R10)(R9*2), Z31, Z10, Z11); \
	ROW512((R12), Z26, Z12, Z13); \
	ROW512((R12)(R9*1), Z27, Z14, Z15); \
	ADDQ R11, SI; \
	ADDQ R11, R10; \
	ADDQ R11, R12

// func sgemm8x32AVX512(k int, a *float32, rs, ps int, b, c *float32, ldc int, alpha, beta float32)
//
// Like sgemm12x32AVX512 with 8 rows (16 accumulators): rows 0-2 from SI, 3-5 from R10, 6-7 from R12.
TEXT ·sgemm8x32AVX512(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rs+16(FP), R9
	SHLQ $2, R9
	MOVQ ps+24(FP), R11
	SHLQ $2, R11
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8
	LEAQ (R9)(R9*2), R10
	ADDQ SI, R10
	LEAQ (R9)(R9*2), R12
	ADDQ R10, R12

	VPXORD Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z0, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z0, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z0, Z15

	MOVQ CX, BX
	SHRQ $2, BX
	JZ   tail8

loop8:
	STEP8x32(0)
	STEP8x32(128)
	STEP8x32(256)
	STEP8x32(384)
	ADDQ $512, DI
	DECQ BX
	JNZ  loop8

tail8:
	ANDQ $3, CX
	JZ   store8

loop8one:
	STEP8x32(0)
	ADDQ $128, DI
	DECQ CX
	JNZ  loop8one

store8:
	VBROADCASTSS alpha+56(FP), Z26
	MOVL beta+60(FP), AX
	ANDL $0x7fffffff, AX // +0 and -0 both mean "do not read C"
	JZ   storezero8
	VBROADCASTSS beta+60(FP), Z27
	ROWBETA512(Z0, Z1)
	ROWBETA512(Z2, Z3)
	ROWBETA512(Z4, Z5)
	ROWBETA512(Z6, Z7)
	ROWBETA512(Z8, Z9)
	ROWBETA512(Z10, Z11)
	ROWBETA512(Z12, Z13)
	ROWBETA512(Z14, Z15)
	VZEROUPPER
	RET

storezero8:
	ROWZERO512(Z0, Z1)
	ROWZERO512(Z2, Z3)
	ROWZERO512(Z4, Z5)
	ROWZERO512(Z6, Z7)
	ROWZERO512(Z8, Z9)
	ROWZERO512(Z10, Z11)
	ROWZERO512(Z12, Z13)
	ROWZERO512(Z14, Z15)
	VZEROUPPER
	RET

// func scatterAVX(dst, src *float32, n, dstStride, srcStride, w2 int)
//
// For i < n, copies 2*w2 floats from src+i*srcStride to dst+i*dstStride (strides in floats):
// whole rows of a packing, without a memmove call per row; 8 floats a move, then 4, then 2.
TEXT ·scatterAVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ dstStride+24(FP), R8
	SHLQ $2, R8
	MOVQ srcStride+32(FP), R9
	SHLQ $2, R9
	MOVQ w2+40(FP), R10
	TESTQ CX, CX
	JZ   done

row:
	MOVQ R10, BX
	XORQ AX, AX

eight:
	CMPQ BX, $4
	JLT  four
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $4, BX
	JMP  eight

four:
	CMPQ BX, $2
	JLT  two
	VMOVUPS (SI)(AX*1), X0
	VMOVUPS X0, (DI)(AX*1)
	ADDQ $16, AX
	SUBQ $2, BX

two:
	TESTQ BX, BX
	JZ   next
	MOVQ (SI)(AX*1), DX
	MOVQ DX, (DI)(AX*1)

next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  row

done:
	VZEROUPPER
	RET
