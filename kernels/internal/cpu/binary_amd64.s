//go:build !noasm

#include "textflag.h"

// func binaryAVX2(f BinaryOp, z, x, y *float32, n, sx, sy int)
//
// z[i] = f(x[i*sx], y[i*sy]) for i < n, n a multiple of 8, sx and sy 0 (one value for every
// i) or 1, f BinAdd, BinSub, BinMul or BinDiv: one IEEE operation per value, as the Go loop.
TEXT ·binaryAVX2(SB), NOSPLIT, $0-56
	MOVBQZX f+0(FP), AX
	MOVQ z+8(FP), DI
	MOVQ x+16(FP), SI
	MOVQ y+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ sx+40(FP), R8
	MOVQ sy+48(FP), R9
	SHLQ $5, R8 // bytes a block moves x and y on: 32 or 0
	SHLQ $5, R9
	VBROADCASTSS (SI), Y1
	VBROADCASTSS (DX), Y2
	SHRQ $3, CX
	JZ   done

loop:
	TESTQ R8, R8
	JZ    xdone
	VMOVUPS (SI), Y1

xdone:
	TESTQ R9, R9
	JZ    ydone
	VMOVUPS (DX), Y2

ydone:
	CMPQ AX, $1
	JEQ  add
	CMPQ AX, $2
	JEQ  sub
	CMPQ AX, $3
	JEQ  mul
	VDIVPS Y2, Y1, Y0
	JMP  store

add:
	VADDPS Y2, Y1, Y0
	JMP    store

sub:
	VSUBPS Y2, Y1, Y0
	JMP    store

mul:
	VMULPS Y2, Y1, Y0

store:
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    R8, SI
	ADDQ    R9, DX
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
