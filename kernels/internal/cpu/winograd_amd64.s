//go:build !noasm

#include "textflag.h"

// The Winograd F(2x2,3x3) transforms of winograd.go, 16 tiles (or kernels) at a time in the
// lanes of a Z register: the same additions in the same order as the Go loops, so the same
// bits. Tiles are gathered and scattered through offset tables (winograd_amd64.go); the last
// group's missing lanes are masked off (K1). R15 counts the tiles (kernels) left; R8 is the
// distance between the 16 matrices in bytes.

// LANES sets K1 to the min(R15, 16) lanes of this group.
#define LANES \
	MOVQ R15, CX \
	MOVQ $16, AX \
	CMPQ CX, AX \
	CMOVQGT AX, CX \
	MOVL $1, AX \
	SHLQ CX, AX \
	DECQ AX \
	KMOVW AX, K1

// GATHER loads the K1 lanes of dst from base + 4*Z0 + off.
#define GATHER(off, base, dst) \
	KMOVW K1, K2 \
	VGATHERDPS off(base)(Z0*4), K2, dst

// STORE4 stores the K1 lanes of a, b, c, d at BX, BX+R8, ... and leaves BX after them.
#define STORE4(a, b, c, d) \
	VMOVUPS a, K1, (BX) \
	ADDQ R8, BX \
	VMOVUPS b, K1, (BX) \
	ADDQ R8, BX \
	VMOVUPS c, K1, (BX) \
	ADDQ R8, BX \
	VMOVUPS d, K1, (BX) \
	ADDQ R8, BX

// LOAD4 is STORE4's load, zeroing the lanes off K1.
#define LOAD4(a, b, c, d) \
	VMOVUPS.Z (BX), K1, a \
	ADDQ R8, BX \
	VMOVUPS.Z (BX), K1, b \
	ADDQ R8, BX \
	VMOVUPS.Z (BX), K1, c \
	ADDQ R8, BX \
	VMOVUPS.Z (BX), K1, d \
	ADDQ R8, BX

// BT: o0, o1, o2, o3 = d0-d2, d1+d2, d2-d1, d1-d3 (a column, then a row, of B^T d B).
#define BT(d0, d1, d2, d3, o0, o1, o2, o3) \
	VSUBPS d2, d0, o0 \
	VADDPS d2, d1, o1 \
	VSUBPS d1, d2, o2 \
	VSUBPS d3, d1, o3

// AT: s0, s1 = (a+b)+c, (b-c)-d (a column, then a row, of A^T M A).
#define AT(a, b, c, d, s0, s1) \
	VADDPS b, a, s0 \
	VADDPS c, s0, s0 \
	VSUBPS c, b, s1 \
	VSUBPS d, s1, s1

// GT: h0, h1 = 1/2*((a+b)+c), 1/2*((a-b)+c) (the middle rows of G k, then of (G k) G^T); Z31
// holds 1/2.
#define GT(a, b, c, h0, h1) \
	VADDPS b, a, h0 \
	VADDPS c, h0, h0 \
	VMULPS h0, Z31, h0 \
	VSUBPS b, a, h1 \
	VADDPS c, h1, h1 \
	VMULPS h1, Z31, h1

// INCOLUMN gathers column off/4 of the tiles' four rows (SI, R10, R11, R12) and writes its B^T
// combinations to b0..b3.
#define INCOLUMN(off, b0, b1, b2, b3) \
	GATHER(off, SI, Z1) \
	GATHER(off, R10, Z2) \
	GATHER(off, R11, Z3) \
	GATHER(off, R12, Z4) \
	BT(Z1, Z2, Z3, Z4, b0, b1, b2, b3)

// INROW stores row r of B^T d B, from row r (a, b, c, d) of B^T d.
#define INROW(a, b, c, d) \
	BT(a, b, c, d, Z24, Z25, Z26, Z27) \
	STORE4(Z24, Z25, Z26, Z27)

// func winoInputAVX512(v *float32, vstride int, x *float32, w int, offs *int32, n int)
//
// v[xi*vstride+p] = (B^T d B)[xi] for p < n, d the 4x4 tile at x[offs[p]] in rows w apart.
TEXT ·winoInputAVX512(SB), NOSPLIT, $0-48
	MOVQ v+0(FP), DI
	MOVQ vstride+8(FP), R8
	SHLQ $2, R8
	MOVQ x+16(FP), SI
	MOVQ w+24(FP), R9
	SHLQ $2, R9
	LEAQ (SI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	LEAQ (R11)(R9*1), R12
	MOVQ offs+32(FP), DX
	MOVQ n+40(FP), R15

inLoop:
	TESTQ R15, R15
	JLE   inDone
	LANES
	VMOVDQU32.Z (DX), K1, Z0
	// B^T d: row r, column c in Z(8+4r+c).
	INCOLUMN(0, Z8, Z12, Z16, Z20)
	INCOLUMN(4, Z9, Z13, Z17, Z21)
	INCOLUMN(8, Z10, Z14, Z18, Z22)
	INCOLUMN(12, Z11, Z15, Z19, Z23)
	MOVQ DI, BX
	INROW(Z8, Z9, Z10, Z11)
	INROW(Z12, Z13, Z14, Z15)
	INROW(Z16, Z17, Z18, Z19)
	INROW(Z20, Z21, Z22, Z23)
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, R15
	JMP  inLoop

inDone:
	VZEROUPPER
	RET

// func winoOutputAVX512(y *float32, ow int, m *float32, mstride int, offs *int32, n int, bias float32)
//
// The 2x2 block A^T M A + bias of tile p < n at y[offs[p]] (rows ow apart), M[xi] at
// m[xi*mstride+p]. Every tile lies inside the output.
TEXT ·winoOutputAVX512(SB), NOSPLIT, $0-52
	MOVQ         y+0(FP), DI
	MOVQ         ow+8(FP), R9
	SHLQ         $2, R9
	LEAQ         (DI)(R9*1), R10
	MOVQ         m+16(FP), SI
	MOVQ         mstride+24(FP), R8
	SHLQ         $2, R8
	MOVQ         offs+32(FP), DX
	MOVQ         n+40(FP), R15
	VBROADCASTSS bias+48(FP), Z31

outLoop:
	TESTQ R15, R15
	JLE   outDone
	LANES
	VMOVDQU32.Z (DX), K1, Z0
	MOVQ        SI, BX
	LOAD4(Z1, Z2, Z3, Z4)
	LOAD4(Z5, Z6, Z7, Z8)
	LOAD4(Z9, Z10, Z11, Z12)
	LOAD4(Z13, Z14, Z15, Z16)
	// A^T M: row 0 in Z17-Z20, row 1 in Z21-Z24.
	AT(Z1, Z5, Z9, Z13, Z17, Z21)
	AT(Z2, Z6, Z10, Z14, Z18, Z22)
	AT(Z3, Z7, Z11, Z15, Z19, Z23)
	AT(Z4, Z8, Z12, Z16, Z20, Z24)
	AT(Z17, Z18, Z19, Z20, Z25, Z26)
	AT(Z21, Z22, Z23, Z24, Z27, Z28)
	VADDPS      Z31, Z25, Z25
	VADDPS      Z31, Z26, Z26
	VADDPS      Z31, Z27, Z27
	VADDPS      Z31, Z28, Z28
	KMOVW       K1, K2
	VSCATTERDPS Z25, K2, (DI)(Z0*4)
	KMOVW       K1, K2
	VSCATTERDPS Z26, K2, 4(DI)(Z0*4)
	KMOVW       K1, K2
	VSCATTERDPS Z27, K2, (R10)(Z0*4)
	KMOVW       K1, K2
	VSCATTERDPS Z28, K2, 4(R10)(Z0*4)
	ADDQ        $64, SI
	ADDQ        $64, DX
	SUBQ        $16, R15
	JMP         outLoop

outDone:
	VZEROUPPER
	RET

// nines: 0, 9, ..., 135, the first weight of each of 16 consecutive 3x3 kernels.
DATA nines<>+0(SB)/4, $0
DATA nines<>+4(SB)/4, $9
DATA nines<>+8(SB)/4, $18
DATA nines<>+12(SB)/4, $27
DATA nines<>+16(SB)/4, $36
DATA nines<>+20(SB)/4, $45
DATA nines<>+24(SB)/4, $54
DATA nines<>+28(SB)/4, $63
DATA nines<>+32(SB)/4, $72
DATA nines<>+36(SB)/4, $81
DATA nines<>+40(SB)/4, $90
DATA nines<>+44(SB)/4, $99
DATA nines<>+48(SB)/4, $108
DATA nines<>+52(SB)/4, $117
DATA nines<>+56(SB)/4, $126
DATA nines<>+60(SB)/4, $135
GLOBL nines<>(SB), RODATA|NOPTR, $64

// FROW stores row r (a, b, c) of G k G^T: a, then GT's two, then c.
#define FROW(a, b, c) \
	GT(a, b, c, Z20, Z21) \
	STORE4(a, Z20, Z21, c)

// func winoFiltersAVX512(u *float32, ustride int, w *float32, n int)
//
// u[xi*ustride+i] = (G k G^T)[xi] for the 3x3 kernels k = w[9i:9i+9], i < n.
TEXT ·winoFiltersAVX512(SB), NOSPLIT, $0-32
	MOVQ         u+0(FP), DI
	MOVQ         ustride+8(FP), R8
	SHLQ         $2, R8
	MOVQ         w+16(FP), SI
	MOVQ         n+24(FP), R15
	VMOVDQU32    nines<>(SB), Z0
	MOVL         $0x3f000000, AX
	VPBROADCASTD AX, Z31

filtLoop:
	TESTQ R15, R15
	JLE   filtDone
	LANES
	GATHER(0, SI, Z1)
	GATHER(4, SI, Z2)
	GATHER(8, SI, Z3)
	GATHER(12, SI, Z4)
	GATHER(16, SI, Z5)
	GATHER(20, SI, Z6)
	GATHER(24, SI, Z7)
	GATHER(28, SI, Z8)
	GATHER(32, SI, Z9)
	// G k: rows 0 and 3 are k's (Z1-Z3, Z7-Z9), rows 1 and 2 in Z10-Z12 and Z13-Z15.
	GT(Z1, Z4, Z7, Z10, Z13)
	GT(Z2, Z5, Z8, Z11, Z14)
	GT(Z3, Z6, Z9, Z12, Z15)
	MOVQ DI, BX
	FROW(Z1, Z2, Z3)
	FROW(Z10, Z11, Z12)
	FROW(Z13, Z14, Z15)
	FROW(Z7, Z8, Z9)
	ADDQ $576, SI
	ADDQ $64, DI
	SUBQ $16, R15
	JMP  filtLoop

filtDone:
	VZEROUPPER
	RET
