//go:build !noasm

#include "textflag.h"

// func reluAVX2(y, x *float32, n int)
//
// y[i] = max(x[i], 0) for i < n, n a multiple of 32. VMAXPS returns its second source (0) when
// the first is NaN or when both are zeros, so NaN and -0 give +0, as the Go loop does.
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ   relu_done
	VXORPS Y15, Y15, Y15

relu_loop:
	VMAXPS (SI), Y15, Y0
	VMAXPS 32(SI), Y15, Y1
	VMAXPS 64(SI), Y15, Y2
	VMAXPS 96(SI), Y15, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  relu_loop

relu_done:
	VZEROUPPER
	RET

// func reluGradAVX2(dx, dy, y *float32, n int)
//
// dx[i] = y[i] > 0 ? dy[i] : 0 for i < n, n a multiple of 32: an ordered greater-than compare
// (false for NaN) masks dy.
TEXT ·reluGradAVX2(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $5, CX
	JZ   grad_done
	VXORPS Y15, Y15, Y15

grad_loop:
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VCMPPS $0x1e, Y15, Y0, Y0
	VCMPPS $0x1e, Y15, Y1, Y1
	VCMPPS $0x1e, Y15, Y2, Y2
	VCMPPS $0x1e, Y15, Y3, Y3
	VANDPS (SI), Y0, Y0
	VANDPS 32(SI), Y1, Y1
	VANDPS 64(SI), Y2, Y2
	VANDPS 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, DX
	DECQ CX
	JNZ  grad_loop

grad_done:
	VZEROUPPER
	RET

// func copyRowsAVX(dst, src *float32, n, w, dstStride, srcStride int)
//
// For i < n, copies w floats from src+i*srcStride to dst+i*dstStride (strides in floats):
// the short rows of a convolution's column matrix, without a memmove call per row.
TEXT ·copyRowsAVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ w+24(FP), R10
	MOVQ dstStride+32(FP), R8
	SHLQ $2, R8
	MOVQ srcStride+40(FP), R9
	SHLQ $2, R9
	TESTQ CX, CX
	JZ   copy_done

copy_row:
	MOVQ R10, BX
	XORQ AX, AX

copy_eight:
	CMPQ BX, $8
	JLT  copy_one
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, BX
	JMP  copy_eight

copy_one:
	TESTQ BX, BX
	JZ   copy_next
	MOVL (SI)(AX*1), DX
	MOVL DX, (DI)(AX*1)
	ADDQ $4, AX
	DECQ BX
	JMP  copy_one

copy_next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  copy_row

copy_done:
	VZEROUPPER
	RET

// func addRowsAVX(dst, src *float32, n, w, dstStride, srcStride int)
//
// For i < n, adds the w floats at src+i*srcStride to those at dst+i*dstStride: col2im's
// scatter-add of short rows, each element with one rounded addition, as the Go loop.
TEXT ·addRowsAVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ w+24(FP), R10
	MOVQ dstStride+32(FP), R8
	SHLQ $2, R8
	MOVQ srcStride+40(FP), R9
	SHLQ $2, R9
	TESTQ CX, CX
	JZ   add_done

add_row:
	MOVQ R10, BX
	XORQ AX, AX

add_eight:
	CMPQ BX, $8
	JLT  add_one
	VMOVUPS (DI)(AX*1), Y0
	VADDPS (SI)(AX*1), Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, BX
	JMP  add_eight

add_one:
	TESTQ BX, BX
	JZ   add_next
	VMOVSS (DI)(AX*1), X0
	VADDSS (SI)(AX*1), X0, X0
	VMOVSS X0, (DI)(AX*1)
	ADDQ $4, AX
	DECQ BX
	JMP  add_one

add_next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  add_row

add_done:
	VZEROUPPER
	RET
