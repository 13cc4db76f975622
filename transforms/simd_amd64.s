//go:build !noasm

#include "textflag.h"

// BCAST sets every dword of Y to the constant C (X is Y's low half).
#define BCAST(C, X, Y) \
	MOVL         C, AX \
	VMOVD        AX, X \
	VPBROADCASTD X, Y

// PACK8 shifts the 8 int32 sums in Y (X its low half) right by SHIFT and packs them into the low 8
// bytes of X with signed, then unsigned saturation: the clamp to [0, 255]. T is a scratch register.
#define PACK8(SHIFT, Y, X, T) \
	VPSRAD       SHIFT, Y, Y \
	VEXTRACTI128 $1, Y, T \
	VPACKSSDW    T, X, X \
	VPACKUSWB    X, X, X

// func verticalAVX2(dst *byte, n int, rows *[8]*byte, ws *[8]int32, m int)
TEXT ·verticalAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ rows+16(FP), SI
	MOVQ ws+24(FP), R8
	MOVQ m+32(FP), R9
	BCAST($0x200000, X15, Y15) // half = 1 << (precBits-1)
	XORQ BX, BX

vloop:
	CMPQ BX, CX
	JGE  vdone
	VMOVDQA Y15, Y0
	XORQ R10, R10

vtap:
	MOVQ         (SI)(R10*8), R11
	VPMOVZXBD    (R11)(BX*1), Y1
	VPBROADCASTD (R8)(R10*4), Y2
	VPMULLD      Y2, Y1, Y1
	VPADDD       Y1, Y0, Y0
	INCQ         R10
	CMPQ         R10, R9
	JLT          vtap

	PACK8($22, Y0, X0, X1) // precBits
	MOVQ X0, (DI)(BX*1)
	ADDQ $8, BX
	JMP  vloop

vdone:
	VZEROUPPER
	RET

// Byte shuffles: the identity, and the reversal of the low 8 bytes (a flipped row).
DATA shufFwd<>+0(SB)/8, $0x0706050403020100
DATA shufFwd<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL shufFwd<>(SB), RODATA|NOPTR, $16
DATA shufRev<>+0(SB)/8, $0x0001020304050607
DATA shufRev<>+8(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL shufRev<>(SB), RODATA|NOPTR, $16

// STORE8 clamps the 8 sums in Y, shifted right by 16, to bytes, applies the shuffle in X9 and
// stores the 8 bytes at DST.
#define STORE8(Y, X, DST) \
	PACK8($16, Y, X, X6) \
	VPSHUFB X9, X, X \
	MOVQ    X, DST

// func ycbcrAVX2(rp, gp, bp, ys, cbs, crs *byte, n, step int)
TEXT ·ycbcrAVX2(SB), NOSPLIT, $0-64
	MOVQ rp+0(FP), DI
	MOVQ gp+8(FP), SI
	MOVQ bp+16(FP), DX
	MOVQ ys+24(FP), R8
	MOVQ cbs+32(FP), R9
	MOVQ crs+40(FP), R10
	MOVQ n+48(FP), CX
	MOVQ step+56(FP), R11

	XORQ    R12, R12 // output offset
	MOVQ    $8, R13  // and its step
	VMOVDQU shufFwd<>(SB), X9
	CMPQ    R11, $0
	JGT     cforward
	LEAQ    -8(CX), R12
	MOVQ    $-8, R13
	VMOVDQU shufRev<>(SB), X9

cforward:
	BCAST($0x10101, X15, Y15)
	BCAST($128, X14, Y14)
	BCAST($91881, X13, Y13)
	BCAST($22554, X12, Y12)
	BCAST($46802, X11, Y11)
	BCAST($116130, X10, Y10)
	XORQ BX, BX

cloop:
	CMPQ      BX, CX
	JGE       cdone
	VPMOVZXBD (R8)(BX*1), Y0
	VPMULLD   Y15, Y0, Y0 // yy1 = y * 0x10101
	VPMOVZXBD (R9)(BX*1), Y1
	VPSUBD    Y14, Y1, Y1 // cb1
	VPMOVZXBD (R10)(BX*1), Y2
	VPSUBD    Y14, Y2, Y2 // cr1

	VPMULLD Y13, Y2, Y3
	VPADDD  Y0, Y3, Y3 // yy1 + 91881*cr1
	VPMULLD Y12, Y1, Y4
	VPSUBD  Y4, Y0, Y4 // yy1 - 22554*cb1
	VPMULLD Y11, Y2, Y5
	VPSUBD  Y5, Y4, Y4 // - 46802*cr1
	VPMULLD Y10, Y1, Y5
	VPADDD  Y0, Y5, Y5 // yy1 + 116130*cb1

	STORE8(Y3, X3, (DI)(R12*1))
	STORE8(Y4, X4, (SI)(R12*1))
	STORE8(Y5, X5, (DX)(R12*1))
	ADDQ $8, BX
	ADDQ R13, R12
	JMP  cloop

cdone:
	VZEROUPPER
	RET

// VPSHUFB masks taking byte t of every dword to its low byte and zeroing the rest: 32 bytes for
// each t = 0..3.
DATA tapByte<>+0(SB)/8, $0x8080800480808000
DATA tapByte<>+8(SB)/8, $0x8080800c80808008
DATA tapByte<>+16(SB)/8, $0x8080800480808000
DATA tapByte<>+24(SB)/8, $0x8080800c80808008
DATA tapByte<>+32(SB)/8, $0x8080800580808001
DATA tapByte<>+40(SB)/8, $0x8080800d80808009
DATA tapByte<>+48(SB)/8, $0x8080800580808001
DATA tapByte<>+56(SB)/8, $0x8080800d80808009
DATA tapByte<>+64(SB)/8, $0x8080800680808002
DATA tapByte<>+72(SB)/8, $0x8080800e8080800a
DATA tapByte<>+80(SB)/8, $0x8080800680808002
DATA tapByte<>+88(SB)/8, $0x8080800e8080800a
DATA tapByte<>+96(SB)/8, $0x8080800780808003
DATA tapByte<>+104(SB)/8, $0x8080800f8080800b
DATA tapByte<>+112(SB)/8, $0x8080800780808003
DATA tapByte<>+120(SB)/8, $0x8080800f8080800b
GLOBL tapByte<>(SB), RODATA|NOPTR, $128

// HARGS loads the arguments of the horizontal kernels (dst, n, src, start, wt, wstride, k) into
// DI, CX, SI, R8, R9, R10 (in bytes) and R11, and the rounding constant into Y15.
#define HARGS \
	MOVQ dst+0(FP), DI \
	MOVQ n+8(FP), CX \
	MOVQ src+16(FP), SI \
	MOVQ start+24(FP), R8 \
	MOVQ wt+32(FP), R9 \
	MOVQ wstride+40(FP), R10 \
	SHLQ $2, R10 \
	MOVQ k+48(FP), R11 \
	BCAST($0x200000, X15, Y15)

// func horizontalAVX2(dst *byte, n int, src *byte, start, wt *int32, wstride, k int)
TEXT ·horizontalAVX2(SB), NOSPLIT, $0-56
	HARGS
	LEAQ tapByte<>(SB), R12
	XORQ BX, BX

hloop:
	CMPQ       BX, CX
	JGE        hdone
	VMOVDQU    (R8)(BX*4), Y1 // start[j:j+8]
	VPCMPEQD   Y2, Y2, Y2
	VPXOR      Y3, Y3, Y3
	VPGATHERDD Y2, (SI)(Y1*1), Y3 // 4 bytes at src+start[j] for each j
	VMOVDQA    Y15, Y0
	LEAQ       (R9)(BX*4), R13 // &wt[j] for tap 0
	XORQ       R14, R14 // t*32: the tap's mask

htap:
	VPSHUFB (R12)(R14*1), Y3, Y4
	VPMULLD (R13), Y4, Y4
	VPADDD  Y4, Y0, Y0
	ADDQ    R10, R13
	ADDQ    $32, R14
	MOVQ    R14, AX
	SHRQ    $5, AX
	CMPQ    AX, R11
	JLT     htap

	PACK8($22, Y0, X0, X1)
	MOVQ X0, (DI)(BX*1)
	ADDQ $8, BX
	JMP  hloop

hdone:
	VZEROUPPER
	RET

// func horizontal3AVX2(dst *byte, n int, src *byte, start, wt *int32, wstride, k int)
//
// horizontalAVX2 for one channel of interleaved RGB: tap t of output j is src[3*(start[j]+t)].
// Gather A reads the 4 bytes at src+3*start[j] (taps 0 and 1 are its bytes 0 and 3), gather B
// the 4 at 6 bytes further (taps 2 and 3), when k > 2.
TEXT ·horizontal3AVX2(SB), NOSPLIT, $0-56
	HARGS
	VMOVDQU tapByte<>+0(SB), Y14 // byte 0 of each dword
	VMOVDQU tapByte<>+96(SB), Y13 // byte 3 of each dword
	XORQ BX, BX

h3loop:
	CMPQ       BX, CX
	JGE        h3done
	VMOVDQU    (R8)(BX*4), Y1
	VPSLLD     $1, Y1, Y2
	VPADDD     Y2, Y1, Y1 // 3*start[j:j+8]
	VPCMPEQD   Y2, Y2, Y2
	VPXOR      Y3, Y3, Y3
	VPGATHERDD Y2, (SI)(Y1*1), Y3 // taps 0 and 1
	LEAQ       (R9)(BX*4), R13    // &wt[j] for tap 0

	VPSHUFB Y14, Y3, Y4
	VPMULLD (R13), Y4, Y4
	VPADDD  Y4, Y15, Y0
	ADDQ    R10, R13
	VPSHUFB Y13, Y3, Y4
	VPMULLD (R13), Y4, Y4
	VPADDD  Y4, Y0, Y0
	CMPQ    R11, $2
	JEQ     h3store

	VPCMPEQD   Y2, Y2, Y2
	VPXOR      Y3, Y3, Y3
	VPGATHERDD Y2, 6(SI)(Y1*1), Y3 // taps 2 and 3
	ADDQ       R10, R13
	VPSHUFB    Y14, Y3, Y4
	VPMULLD    (R13), Y4, Y4
	VPADDD     Y4, Y0, Y0
	CMPQ       R11, $3
	JEQ        h3store
	ADDQ       R10, R13
	VPSHUFB    Y13, Y3, Y4
	VPMULLD    (R13), Y4, Y4
	VPADDD     Y4, Y0, Y0

h3store:
	PACK8($22, Y0, X0, X1)
	MOVQ X0, (DI)(BX*1)
	ADDQ $8, BX
	JMP  h3loop

h3done:
	VZEROUPPER
	RET
