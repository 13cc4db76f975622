//go:build !noasm

#include "textflag.h"

// MAP32(op): 32 floats from SI, each op'ed with Y15, to DI; both move on.
#define MAP32(op) \
	op (SI), Y15, Y0; \
	op 32(SI), Y15, Y1; \
	op 64(SI), Y15, Y2; \
	op 96(SI), Y15, Y3; \
	VMOVUPS Y0, (DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	ADDQ $128, SI; \
	ADDQ $128, DI

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
	MAP32(VMAXPS)
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

// tailMask: the 8 int32 at tailMask+4*(8-r) are r all-ones masks then zeros, for VMASKMOVPS.
DATA tailMask<>+0(SB)/8, $0xffffffffffffffff
DATA tailMask<>+8(SB)/8, $0xffffffffffffffff
DATA tailMask<>+16(SB)/8, $0xffffffffffffffff
DATA tailMask<>+24(SB)/8, $0xffffffffffffffff
DATA tailMask<>+32(SB)/8, $0
DATA tailMask<>+40(SB)/8, $0
DATA tailMask<>+48(SB)/8, $0
DATA tailMask<>+56(SB)/8, $0
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// ROWARGS loads copyRowsAVX's and addRowsAVX's arguments: DI dst, SI src, CX n, R8 and R9 the
// strides in bytes, R12 the whole 8-float blocks of a row, R13 the tail length and Y7 its mask.
#define ROWARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	MOVQ w+24(FP), R10; \
	MOVQ dstStride+32(FP), R8; \
	SHLQ $2, R8; \
	MOVQ srcStride+40(FP), R9; \
	SHLQ $2, R9; \
	MOVQ R10, AX; \
	ANDQ $7, AX; \
	MOVQ $8, DX; \
	SUBQ AX, DX; \
	LEAQ tailMask<>(SB), R11; \
	VMOVDQU (R11)(DX*4), Y7; \
	MOVQ R10, R12; \
	SHRQ $3, R12; \
	MOVQ R10, R13; \
	ANDQ $7, R13

// func copyRowsAVX(dst, src *float32, n, w, dstStride, srcStride int)
//
// For i < n, copies w floats from src+i*srcStride to dst+i*dstStride (strides in floats):
// the short rows of a convolution's column matrix, without a memmove call per row. The last
// w%8 floats of a row move with one masked load and store, which touch nothing outside the row.
TEXT ·copyRowsAVX(SB), NOSPLIT, $0-48
	ROWARGS
	TESTQ CX, CX
	JZ   copy_done

copy_row:
	MOVQ R12, BX
	XORQ AX, AX

copy_eight:
	TESTQ BX, BX
	JZ   copy_tail
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	DECQ BX
	JMP  copy_eight

copy_tail:
	TESTQ R13, R13
	JZ   copy_next
	VMASKMOVPS (SI)(AX*1), Y7, Y0
	VMASKMOVPS Y0, Y7, (DI)(AX*1)

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
// scatter-add of short rows, each element with one rounded addition, as the Go loop. The tail
// is masked as in copyRowsAVX.
TEXT ·addRowsAVX(SB), NOSPLIT, $0-48
	ROWARGS
	TESTQ CX, CX
	JZ   add_done

add_row:
	MOVQ R12, BX
	XORQ AX, AX

add_eight:
	TESTQ BX, BX
	JZ   add_tail
	VMOVUPS (DI)(AX*1), Y0
	VADDPS (SI)(AX*1), Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	DECQ BX
	JMP  add_eight

add_tail:
	TESTQ R13, R13
	JZ   add_next
	VMASKMOVPS (DI)(AX*1), Y7, Y0
	VMASKMOVPS (SI)(AX*1), Y7, Y1
	VADDPS Y1, Y0, Y0
	VMASKMOVPS Y0, Y7, (DI)(AX*1)

add_next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  add_row

add_done:
	VZEROUPPER
	RET

// Four vectors of four float64 partial sums, Y0-Y3, hold sums[0:16]; each iteration adds 16
// values, value i of the iteration to partial i.
#define LOADSUMS \
	VMOVUPD (DI), Y0; \
	VMOVUPD 32(DI), Y1; \
	VMOVUPD 64(DI), Y2; \
	VMOVUPD 96(DI), Y3

#define STORESUMS \
	VMOVUPD Y0, (DI); \
	VMOVUPD Y1, 32(DI); \
	VMOVUPD Y2, 64(DI); \
	VMOVUPD Y3, 96(DI)

// func sumAddAVX2(s *sums, x *float32, n int)
//
// s[i%16] += float64(x[i]) for i < n, n a multiple of 16.
TEXT ·sumAddAVX2(SB), NOSPLIT, $0-24
	MOVQ s+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   sa_done
	LOADSUMS

sa_loop:
	VCVTPS2PD (SI), Y4
	VCVTPS2PD 16(SI), Y5
	VCVTPS2PD 32(SI), Y6
	VCVTPS2PD 48(SI), Y7
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ  sa_loop
	STORESUMS

sa_done:
	VZEROUPPER
	RET

// func sumSquaresAVX2(s *sums, x *float32, n int, mean float64)
//
// s[i%16] += d*d, d = float64(x[i]) - mean, for i < n, n a multiple of 16 (a multiply and an
// add, each rounded, as the Go loop).
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD mean+24(FP), Y15
	SHRQ $4, CX
	JZ   sq_done
	LOADSUMS

sq_loop:
	VCVTPS2PD (SI), Y4
	VCVTPS2PD 16(SI), Y5
	VCVTPS2PD 32(SI), Y6
	VCVTPS2PD 48(SI), Y7
	VSUBPD Y15, Y4, Y4
	VSUBPD Y15, Y5, Y5
	VSUBPD Y15, Y6, Y6
	VSUBPD Y15, Y7, Y7
	VMULPD Y4, Y4, Y4
	VMULPD Y5, Y5, Y5
	VMULPD Y6, Y6, Y6
	VMULPD Y7, Y7, Y7
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ  sq_loop
	STORESUMS

sq_done:
	VZEROUPPER
	RET

// One vector of 4 products: float64(dy) * float64((x-mean)*inv), the float32 part rounded as Go
// rounds it. X14 = mean, X13 = inv (broadcast).
#define PRODUCT(off, acc) \
	VMOVUPS off(DX), X8; \
	VSUBPS X14, X8, X8; \
	VMULPS X13, X8, X8; \
	VCVTPS2PD X8, Y8; \
	VCVTPS2PD off(SI), Y9; \
	VMULPD Y8, Y9, Y9; \
	VADDPD Y9, acc, acc

// func sumProductsAVX2(s *sums, dy, x *float32, n int, mean, inv float32)
//
// s[i%16] += float64(dy[i]) * float64((x[i]-mean)*inv) for i < n, n a multiple of 16.
TEXT ·sumProductsAVX2(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS mean+32(FP), X14
	VBROADCASTSS inv+36(FP), X13
	SHRQ $4, CX
	JZ   sp_done
	LOADSUMS

sp_loop:
	PRODUCT(0, Y0)
	PRODUCT(16, Y1)
	PRODUCT(32, Y2)
	PRODUCT(48, Y3)
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  sp_loop
	STORESUMS

sp_done:
	VZEROUPPER
	RET

// func addConstAVX2(dst, src *float32, n int, b float32)
//
// dst[i] = src[i] + b for i < n, n a multiple of 32: a convolution's output plus its bias.
TEXT ·addConstAVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS b+24(FP), Y15
	SHRQ $5, CX
	JZ   ac_done

ac_loop:
	MAP32(VADDPS)
	DECQ CX
	JNZ  ac_loop

ac_done:
	VZEROUPPER
	RET

// func scaleShiftAVX2(y, x *float32, n int, a, b float32)
//
// y[i] = x[i]*a + b for i < n, n a multiple of 16: a multiply and an add, each rounded, as the
// Go loop (BatchNorm's normalization).
TEXT ·scaleShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y14
	VBROADCASTSS b+28(FP), Y15
	SHRQ $4, CX
	JZ   ss_done

ss_loop:
	VMULPS (SI), Y14, Y0
	VMULPS 32(SI), Y14, Y1
	VADDPS Y15, Y0, Y0
	VADDPS Y15, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  ss_loop

ss_done:
	VZEROUPPER
	RET

// One vector of BatchNorm's input gradient: k * ((dy - bmean) - ((x-mean)*inv)*bx), each
// operation rounded in the Go loop's order. Y11-Y15 = k, bmean, mean, inv, bx.
#define BNDX(off) \
	VMOVUPS off(DX), Y0; \
	VSUBPS Y13, Y0, Y0; \
	VMULPS Y14, Y0, Y0; \
	VMULPS Y15, Y0, Y0; \
	VMOVUPS off(SI), Y1; \
	VSUBPS Y12, Y1, Y1; \
	VSUBPS Y0, Y1, Y1; \
	VMULPS Y11, Y1, Y1; \
	VMOVUPS Y1, off(DI)

// func bnDxAVX2(dx, dy, x *float32, n int, k, bmean, mean, inv, bx float32)
//
// dx[i] = k * (dy[i] - bmean - (x[i]-mean)*inv*bx) for i < n, n a multiple of 16.
TEXT ·bnDxAVX2(SB), NOSPLIT, $0-52
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS k+32(FP), Y11
	VBROADCASTSS bmean+36(FP), Y12
	VBROADCASTSS mean+40(FP), Y13
	VBROADCASTSS inv+44(FP), Y14
	VBROADCASTSS bx+48(FP), Y15
	SHRQ $4, CX
	JZ   bd_done

bd_loop:
	BNDX(0)
	BNDX(32)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  bd_loop

bd_done:
	VZEROUPPER
	RET

// func copyRows2AVX(dst, src *float32, n, w8, dstStride, srcStride int)
//
// For i < n and j < 8*w8, dst[i*dstStride+j] = src[i*srcStride+2*j]: the rows of a stride-2
// convolution's column matrix, 8 values from 16 (deinterleaved as in maxPoolRowAVX2).
TEXT ·copyRows2AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ w8+24(FP), R10
	MOVQ dstStride+32(FP), R8
	SHLQ $2, R8
	MOVQ srcStride+40(FP), R9
	SHLQ $2, R9
	TESTQ CX, CX
	JZ   c2_done
	TESTQ R10, R10
	JZ   c2_done

c2_row:
	MOVQ R10, BX
	XORQ AX, AX // dst offset in bytes; the source's is twice that

c2_block:
	VMOVUPS (SI)(AX*2), Y0
	VMOVUPS 32(SI)(AX*2), Y1
	VSHUFPS $0x88, Y1, Y0, Y2
	VPERMPD $0xD8, Y2, Y2
	VMOVUPS Y2, (DI)(AX*1)
	ADDQ $32, AX
	DECQ BX
	JNZ  c2_block
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  c2_row

c2_done:
	VZEROUPPER
	RET
