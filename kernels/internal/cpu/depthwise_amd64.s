//go:build !noasm

#include "textflag.h"

// One tap of dwTapsAVX2 for one output: multiply the tap's weights Y8 by the output's input at
// addr, rounded, then add the product to the output's sum acc (never fused: the Go loop's order).
#define DWTAP(addr, acc, tmp) \
	VMULPS addr, Y8, tmp; \
	VADDPS tmp, acc, acc

// DWTAPLOOP runs the taps of one block of outputs: BX rows of tb taps, the weights at R10 (32
// bytes a tap), the block's inputs from SI (and DI) moving R11 bytes a tap and R12 more a row.
// TAPS adds one tap to each output of the block; rowl and coll name its labels, done the label
// past it.
#define DWTAPLOOP(rowl, coll, done, TAPS) \
	MOVQ w+16(FP), R10; \
	MOVQ ta+56(FP), BX; \
	TESTQ BX, BX; \
	JZ   done; \
rowl: \
	MOVQ tb+64(FP), CX; \
coll: \
	VMOVUPS (R10), Y8; \
	TAPS; \
	ADDQ $32, R10; \
	ADDQ R11, SI; \
	ADDQ R11, DI; \
	DECQ CX; \
	JNZ  coll; \
	ADDQ R12, SI; \
	ADDQ R12, DI; \
	DECQ BX; \
	JNZ  rowl; \
done:

#define TAPS8 \
	DWTAP((SI), Y0, Y9); \
	DWTAP((SI)(R8*1), Y1, Y10); \
	DWTAP((SI)(R8*2), Y2, Y11); \
	DWTAP((SI)(R9*1), Y3, Y12); \
	DWTAP((DI), Y4, Y13); \
	DWTAP((DI)(R8*1), Y5, Y14); \
	DWTAP((DI)(R8*2), Y6, Y15); \
	DWTAP((DI)(R9*1), Y7, Y9)

#define TAPS4 \
	DWTAP((SI), Y0, Y9); \
	DWTAP((SI)(R8*1), Y1, Y10); \
	DWTAP((SI)(R8*2), Y2, Y11); \
	DWTAP((SI)(R9*1), Y3, Y12)

#define TAPS1 \
	DWTAP((SI), Y0, Y9)

// func dwTapsAVX2(out, in, w, init *float32, n, outStep, inStep, ta, tb, tapCol, tapRow int)
TEXT ·dwTapsAVX2(SB), NOSPLIT, $0-88
	MOVQ out+0(FP), AX
	MOVQ in+8(FP), DX
	MOVQ init+24(FP), R13
	MOVQ n+32(FP), R14
	MOVQ inStep+48(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ tapCol+72(FP), R11
	MOVQ tapRow+80(FP), R12
	CMPQ R14, $8
	JLT  four

eight:
	VMOVUPS (R13), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y0, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y0, Y7
	MOVQ DX, SI
	LEAQ (DX)(R8*4), DI
	DWTAPLOOP(row8, col8, done8, TAPS8)
	MOVQ outStep+40(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (AX)(R8*4), DI
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (AX)(R8*1)
	VMOVUPS Y2, (AX)(R8*2)
	VMOVUPS Y3, (AX)(R9*1)
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, (DI)(R8*1)
	VMOVUPS Y6, (DI)(R8*2)
	VMOVUPS Y7, (DI)(R9*1)
	LEAQ (AX)(R8*8), AX
	MOVQ inStep+48(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (DX)(R8*8), DX
	SUBQ $8, R14
	CMPQ R14, $8
	JGE  eight

four:
	CMPQ R14, $4
	JLT  one
	VMOVUPS (R13), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	MOVQ DX, SI
	DWTAPLOOP(row4, col4, done4, TAPS4)
	MOVQ outStep+40(FP), R8
	LEAQ (R8)(R8*2), R9
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (AX)(R8*1)
	VMOVUPS Y2, (AX)(R8*2)
	VMOVUPS Y3, (AX)(R9*1)
	LEAQ (AX)(R8*4), AX
	MOVQ inStep+48(FP), R8
	LEAQ (R8)(R8*2), R9
	LEAQ (DX)(R8*4), DX
	SUBQ $4, R14

one:
	TESTQ R14, R14
	JZ    end
	VMOVUPS (R13), Y0
	MOVQ DX, SI
	DWTAPLOOP(row1, col1, done1, TAPS1)
	VMOVUPS Y0, (AX)
	ADDQ outStep+40(FP), AX
	ADDQ R8, DX
	DECQ R14
	JMP  one

end:
	VZEROUPPER
	RET

// func dwGradRowAVX2(acc *float64, dy, x *float32, k int, cols *int, xstep int)
TEXT ·dwGradRowAVX2(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), AX
	MOVQ dy+8(FP), DX
	MOVQ x+16(FP), R8
	MOVQ k+24(FP), CX
	MOVQ cols+32(FP), R9
	MOVQ xstep+40(FP), R10

tap:
	MOVQ (R9), BX   // ox0
	MOVQ 8(R9), R11 // ox1
	SUBQ BX, R11
	JLE  next
	VMOVUPD (AX), Y0
	VMOVUPD 32(AX), Y1
	MOVQ BX, SI
	SHLQ $5, SI
	ADDQ DX, SI     // dy[ox0]
	MOVQ BX, DI
	IMULQ R10, DI
	ADDQ R8, DI     // x[ox0*stride + kw]

col:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VCVTPS2PD (DI), Y4
	VCVTPS2PD 16(DI), Y5
	VFMADD231PD Y4, Y2, Y0
	VFMADD231PD Y5, Y3, Y1
	ADDQ $32, SI
	ADDQ R10, DI
	DECQ R11
	JNZ  col
	VMOVUPD Y0, (AX)
	VMOVUPD Y1, 32(AX)

next:
	ADDQ $64, AX
	ADDQ $16, R9
	ADDQ $32, R8
	DECQ CX
	JNZ  tap
	VZEROUPPER
	RET

// func dwTransposeAVX2(dst, src *float32, n, ds, da, ss, sa int)
TEXT ·dwTransposeAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ ds+24(FP), R10
	LEAQ (R10)(R10*2), R11
	MOVQ ss+40(FP), R8
	LEAQ (R8)(R8*2), R9

block:
	LEAQ (SI)(R8*4), DX
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R9*1), Y3
	VMOVUPS (DX), Y4
	VMOVUPS (DX)(R8*1), Y5
	VMOVUPS (DX)(R8*2), Y6
	VMOVUPS (DX)(R9*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	LEAQ (DI)(R10*4), DX
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(R10*1)
	VMOVUPS Y10, (DI)(R10*2)
	VMOVUPS Y11, (DI)(R11*1)
	VMOVUPS Y12, (DX)
	VMOVUPS Y13, (DX)(R10*1)
	VMOVUPS Y14, (DX)(R10*2)
	VMOVUPS Y15, (DX)(R11*1)
	ADDQ da+32(FP), DI
	ADDQ sa+48(FP), SI
	DECQ CX
	JNZ  block
	VZEROUPPER
	RET
