//go:build !noasm

#include "textflag.h"

// ramp: 0, 2, ..., 14, the input column of each of 8 outputs of a 2x2 stride-2 pooling.
DATA ramp<>+0(SB)/4, $0
DATA ramp<>+4(SB)/4, $2
DATA ramp<>+8(SB)/4, $4
DATA ramp<>+12(SB)/4, $6
DATA ramp<>+16(SB)/4, $8
DATA ramp<>+20(SB)/4, $10
DATA ramp<>+24(SB)/4, $12
DATA ramp<>+28(SB)/4, $14
GLOBL ramp<>(SB), RODATA|NOPTR, $32

// func maxPoolRowAVX2(y *float32, arg *int32, row0, row1 *float32, n, w, base int)
//
// n (a multiple of 8) outputs of a 2x2 stride-2 max pooling from the input rows row0 and row1
// (w apart in the plane; base is row0's first index there): y[i] is the maximum of row0[2i],
// row0[2i+1], row1[2i], row1[2i+1] taken in that order with ordered greater-than compares (the
// first maximum wins, NaN never wins), arg[i] its index in the plane, as the Go loop.
TEXT ·maxPoolRowAVX2(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ arg+8(FP), R8
	MOVQ row0+16(FP), SI
	MOVQ row1+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ w+40(FP), AX
	MOVQ base+48(FP), BX
	SHRQ $3, CX
	JZ   mp_done
	MOVQ $1, R9
	VMOVD R9, X11
	VPBROADCASTD X11, Y11 // offset of the top-right input
	VMOVD AX, X12
	VPBROADCASTD X12, Y12 // bottom-left
	INCQ AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13 // bottom-right
	VMOVD BX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU ramp<>(SB), Y14
	VPADDD Y14, Y15, Y15 // the top-left inputs' indices
	MOVQ $16, R9
	VMOVD R9, X14
	VPBROADCASTD X14, Y14

mp_loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS (DX), Y2
	VMOVUPS 32(DX), Y3
	VSHUFPS $0x88, Y1, Y0, Y4
	VSHUFPS $0xDD, Y1, Y0, Y5
	VSHUFPS $0x88, Y3, Y2, Y6
	VSHUFPS $0xDD, Y3, Y2, Y7
	VPERMPD $0xD8, Y4, Y4 // top-left of each window, in output order
	VPERMPD $0xD8, Y5, Y5 // top-right
	VPERMPD $0xD8, Y6, Y6 // bottom-left
	VPERMPD $0xD8, Y7, Y7 // bottom-right
	VPXOR   Y9, Y9, Y9
	VCMPPS  $0x1e, Y4, Y5, Y10
	VBLENDVPS Y10, Y5, Y4, Y4
	VBLENDVPS Y10, Y11, Y9, Y9
	VCMPPS  $0x1e, Y4, Y6, Y10
	VBLENDVPS Y10, Y6, Y4, Y4
	VBLENDVPS Y10, Y12, Y9, Y9
	VCMPPS  $0x1e, Y4, Y7, Y10
	VBLENDVPS Y10, Y7, Y4, Y4
	VBLENDVPS Y10, Y13, Y9, Y9
	VPADDD  Y15, Y9, Y9
	VMOVUPS Y4, (DI)
	VMOVDQU Y9, (R8)
	VPADDD  Y14, Y15, Y15
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  mp_loop

mp_done:
	VZEROUPPER
	RET

// pevens: 0, 2, ..., 30: the even floats of two zmm registers (a VPERMT2PS index), and the
// input column of each of 16 outputs of a 2x2 stride-2 pooling.
DATA pevens<>+0(SB)/4, $0
DATA pevens<>+4(SB)/4, $2
DATA pevens<>+8(SB)/4, $4
DATA pevens<>+12(SB)/4, $6
DATA pevens<>+16(SB)/4, $8
DATA pevens<>+20(SB)/4, $10
DATA pevens<>+24(SB)/4, $12
DATA pevens<>+28(SB)/4, $14
DATA pevens<>+32(SB)/4, $16
DATA pevens<>+36(SB)/4, $18
DATA pevens<>+40(SB)/4, $20
DATA pevens<>+44(SB)/4, $22
DATA pevens<>+48(SB)/4, $24
DATA pevens<>+52(SB)/4, $26
DATA pevens<>+56(SB)/4, $28
DATA pevens<>+60(SB)/4, $30
GLOBL pevens<>(SB), RODATA|NOPTR, $64

// podds: 1, 3, ..., 31: the odd floats of two zmm registers.
DATA podds<>+0(SB)/4, $1
DATA podds<>+4(SB)/4, $3
DATA podds<>+8(SB)/4, $5
DATA podds<>+12(SB)/4, $7
DATA podds<>+16(SB)/4, $9
DATA podds<>+20(SB)/4, $11
DATA podds<>+24(SB)/4, $13
DATA podds<>+28(SB)/4, $15
DATA podds<>+32(SB)/4, $17
DATA podds<>+36(SB)/4, $19
DATA podds<>+40(SB)/4, $21
DATA podds<>+44(SB)/4, $23
DATA podds<>+48(SB)/4, $25
DATA podds<>+52(SB)/4, $27
DATA podds<>+56(SB)/4, $29
DATA podds<>+60(SB)/4, $31
GLOBL podds<>(SB), RODATA|NOPTR, $64

// pinterlo, pinterhi: 0, 16, 1, 17, ..., 15, 31 in two halves: two zmm registers interleaved.
DATA pinterlo<>+0(SB)/4, $0
DATA pinterlo<>+4(SB)/4, $16
DATA pinterlo<>+8(SB)/4, $1
DATA pinterlo<>+12(SB)/4, $17
DATA pinterlo<>+16(SB)/4, $2
DATA pinterlo<>+20(SB)/4, $18
DATA pinterlo<>+24(SB)/4, $3
DATA pinterlo<>+28(SB)/4, $19
DATA pinterlo<>+32(SB)/4, $4
DATA pinterlo<>+36(SB)/4, $20
DATA pinterlo<>+40(SB)/4, $5
DATA pinterlo<>+44(SB)/4, $21
DATA pinterlo<>+48(SB)/4, $6
DATA pinterlo<>+52(SB)/4, $22
DATA pinterlo<>+56(SB)/4, $7
DATA pinterlo<>+60(SB)/4, $23
GLOBL pinterlo<>(SB), RODATA|NOPTR, $64
DATA pinterhi<>+0(SB)/4, $8
DATA pinterhi<>+4(SB)/4, $24
DATA pinterhi<>+8(SB)/4, $9
DATA pinterhi<>+12(SB)/4, $25
DATA pinterhi<>+16(SB)/4, $10
DATA pinterhi<>+20(SB)/4, $26
DATA pinterhi<>+24(SB)/4, $11
DATA pinterhi<>+28(SB)/4, $27
DATA pinterhi<>+32(SB)/4, $12
DATA pinterhi<>+36(SB)/4, $28
DATA pinterhi<>+40(SB)/4, $13
DATA pinterhi<>+44(SB)/4, $29
DATA pinterhi<>+48(SB)/4, $14
DATA pinterhi<>+52(SB)/4, $30
DATA pinterhi<>+56(SB)/4, $15
DATA pinterhi<>+60(SB)/4, $31
GLOBL pinterhi<>(SB), RODATA|NOPTR, $64

// POOLMAX16 takes Z0, Z1 (row0's 32 floats) and Z2, Z3 (row1's) to the maxima of the 16 windows
// in Z4 and their indices in the plane in Z9 (Z15: the top-left inputs' indices): the top-left
// of each window, then the top-right, bottom-left and bottom-right, each taken when it is
// greater (ordered compare: false when either is NaN) than the maximum so far, as the Go loop.
#define POOLMAX16 \
	VMOVAPS   Z0, Z4; \
	VPERMT2PS Z1, Z20, Z4; \
	VPERMT2PS Z1, Z21, Z0; \
	VMOVAPS   Z2, Z6; \
	VPERMT2PS Z3, Z20, Z6; \
	VPERMT2PS Z3, Z21, Z2; \
	VMOVDQA32 Z15, Z9; \
	VCMPPS    $0x1e, Z4, Z0, K1; \
	VMOVAPS   Z0, K1, Z4; \
	VPADDD    Z22, Z15, K1, Z9; \
	VCMPPS    $0x1e, Z4, Z6, K1; \
	VMOVAPS   Z6, K1, Z4; \
	VPADDD    Z23, Z15, K1, Z9; \
	VCMPPS    $0x1e, Z4, Z2, K1; \
	VMOVAPS   Z2, K1, Z4; \
	VPADDD    Z24, Z15, K1, Z9

// POOLSETUP loads the arguments common to both AVX-512 poolings and sets up: DI, R8, SI the
// three arrays, R9 the planes, R10 4w (the bytes of an input row), R11 the bytes of an input
// plane, R12 ow, R13 oh; K5 the store mask of a row's last partial block of outputs, K6 and K7
// the masks of its inputs (2 floats an output); Z20, Z21 the even and odd indices, Z22-Z24
// 1, w, w+1 (the other inputs' offsets from the top-left), Z26 32 (a block's step along the
// input row), Z27 2w (an output row's step), Z31 zero.
#define POOLSETUP \
	MOVQ    planes+24(FP), R9; \
	MOVQ    h+32(FP), AX; \
	MOVQ    w+40(FP), R10; \
	MOVQ    oh+48(FP), R13; \
	MOVQ    ow+56(FP), R12; \
	IMULQ   R10, AX; \
	SHLQ    $2, AX; \
	MOVQ    AX, R11; \
	MOVQ    R12, CX; \
	ANDQ    $15, CX; \
	MOVL    $1, AX; \
	SHLL    CX, AX; \
	DECL    AX; \
	KMOVW   AX, K5; \
	MOVQ    $1, AX; \
	SHLQ    CX, AX; \
	SHLQ    CX, AX; \
	DECQ    AX; \
	KMOVW   AX, K6; \
	SHRQ    $16, AX; \
	KMOVW   AX, K7; \
	VMOVDQU32 pevens<>(SB), Z20; \
	VMOVDQU32 podds<>(SB), Z21; \
	MOVL    $1, AX; \
	VPBROADCASTD AX, Z22; \
	VPBROADCASTD R10, Z23; \
	LEAQ    1(R10), AX; \
	VPBROADCASTD AX, Z24; \
	MOVL    $32, AX; \
	VPBROADCASTD AX, Z26; \
	VPADDD  Z23, Z23, Z27; \
	VPXORD  Z31, Z31, Z31; \
	SHLQ    $2, R10

// func maxPool2x2AVX512(y *float32, arg *int32, x *float32, planes, h, w, oh, ow int)
//
// maxPool2x2 over planes consecutive h×w planes of x (oh×ow outputs each, 2*oh <= h and
// 2*ow <= w): 16 outputs of a row at a time, the row's last partial block under masks, so that
// no float outside the windows is read or written.
TEXT ·maxPool2x2AVX512(SB), NOSPLIT, $0-64
	MOVQ y+0(FP), DI
	MOVQ arg+8(FP), R8
	MOVQ x+16(FP), SI
	POOLSETUP

mf_plane:
	TESTQ R9, R9
	JZ    mf_done
	MOVQ  R13, AX
	MOVQ  SI, DX
	VPXORD Z16, Z16, Z16 // the index of the row's first input in the plane

mf_row:
	MOVQ   DX, BX
	MOVQ   R12, CX
	VPADDD Z20, Z16, Z15

mf_block:
	CMPQ CX, $16
	JLT  mf_tail
	VMOVUPS (BX), Z0
	VMOVUPS 64(BX), Z1
	VMOVUPS (BX)(R10*1), Z2
	VMOVUPS 64(BX)(R10*1), Z3
	POOLMAX16
	VMOVUPS   Z4, (DI)
	VMOVDQU32 Z9, (R8)
	VPADDD Z26, Z15, Z15
	ADDQ $128, BX
	ADDQ $64, DI
	ADDQ $64, R8
	SUBQ $16, CX
	JMP  mf_block

mf_tail:
	TESTQ CX, CX
	JZ    mf_rowdone
	VMOVUPS.Z (BX), K6, Z0
	VMOVUPS.Z 64(BX), K7, Z1
	VMOVUPS.Z (BX)(R10*1), K6, Z2
	VMOVUPS.Z 64(BX)(R10*1), K7, Z3
	POOLMAX16
	VMOVUPS   Z4, K5, (DI)
	VMOVDQU32 Z9, K5, (R8)
	LEAQ (DI)(CX*4), DI
	LEAQ (R8)(CX*4), R8

mf_rowdone:
	LEAQ   (DX)(R10*2), DX
	VPADDD Z27, Z16, Z16
	DECQ   AX
	JNZ    mf_row
	ADDQ   R11, SI
	DECQ   R9
	JMP    mf_plane

mf_done:
	VZEROUPPER
	RET

// POOLBACK16 takes Z0 (16 outputs' dy) and Z1 (their arg) to the gradients of their windows'
// inputs: Z8, Z4 row0's 32 floats, Z10, Z6 row1's (Z15: the top-left inputs' indices). Each
// input gets 0 + dy (as the Go loop's add to a cleared dx: -0 becomes +0) where arg points at
// it, +0 elsewhere.
#define POOLBACK16 \
	VADDPS    Z31, Z0, Z0; \
	VPSUBD    Z15, Z1, Z1; \
	VPCMPEQD  Z31, Z1, K1; \
	VMOVAPS.Z Z0, K1, Z4; \
	VPCMPEQD  Z22, Z1, K1; \
	VMOVAPS.Z Z0, K1, Z5; \
	VPCMPEQD  Z23, Z1, K1; \
	VMOVAPS.Z Z0, K1, Z6; \
	VPCMPEQD  Z24, Z1, K1; \
	VMOVAPS.Z Z0, K1, Z7; \
	VMOVAPS   Z4, Z8; \
	VPERMT2PS Z5, Z18, Z8; \
	VPERMT2PS Z5, Z19, Z4; \
	VMOVAPS   Z6, Z10; \
	VPERMT2PS Z7, Z18, Z10; \
	VPERMT2PS Z7, Z19, Z6

// func maxPoolBack2x2AVX512(dx, dy *float32, arg *int32, planes, h, w, oh, ow int)
//
// The gradient of maxPool2x2AVX512 over the same planes: each window's four inputs of dx
// written (dy at the arg of the window, +0 at the others), in 16 windows of a row at a time,
// the row's last partial block under masks. Inputs outside every window are not written.
TEXT ·maxPoolBack2x2AVX512(SB), NOSPLIT, $0-64
	MOVQ dx+0(FP), SI
	MOVQ dy+8(FP), DI
	MOVQ arg+16(FP), R8
	POOLSETUP
	VMOVDQU32 pinterlo<>(SB), Z18
	VMOVDQU32 pinterhi<>(SB), Z19

mb_plane:
	TESTQ R9, R9
	JZ    mb_done
	MOVQ  R13, AX
	MOVQ  SI, DX
	VPXORD Z16, Z16, Z16

mb_row:
	MOVQ   DX, BX
	MOVQ   R12, CX
	VPADDD Z20, Z16, Z15

mb_block:
	CMPQ CX, $16
	JLT  mb_tail
	VMOVUPS   (DI), Z0
	VMOVDQU32 (R8), Z1
	POOLBACK16
	VMOVUPS Z8, (BX)
	VMOVUPS Z4, 64(BX)
	VMOVUPS Z10, (BX)(R10*1)
	VMOVUPS Z6, 64(BX)(R10*1)
	VPADDD Z26, Z15, Z15
	ADDQ $128, BX
	ADDQ $64, DI
	ADDQ $64, R8
	SUBQ $16, CX
	JMP  mb_block

mb_tail:
	TESTQ CX, CX
	JZ    mb_rowdone
	VMOVUPS.Z   (DI), K5, Z0
	VMOVDQU32.Z (R8), K5, Z1
	POOLBACK16
	VMOVUPS Z8, K6, (BX)
	VMOVUPS Z4, K7, 64(BX)
	VMOVUPS Z10, K6, (BX)(R10*1)
	VMOVUPS Z6, K7, 64(BX)(R10*1)
	LEAQ (DI)(CX*4), DI
	LEAQ (R8)(CX*4), R8

mb_rowdone:
	LEAQ   (DX)(R10*2), DX
	VPADDD Z27, Z16, Z16
	DECQ   AX
	JNZ    mb_row
	ADDQ   R11, SI
	DECQ   R9
	JMP    mb_plane

mb_done:
	VZEROUPPER
	RET

// POOLBACK8 is POOLBACK16 for AVX2: Y0 (8 outputs' dy) and Y1 (their arg) to row0's 16 floats
// in Y4, Y5 and row1's in Y6, Y7 (Y15: the top-left inputs' indices; Y11-Y13: 1, w, w+1; Y14
// zero).
#define POOLBACK8 \
	VADDPS     Y14, Y0, Y0; \
	VPSUBD     Y15, Y1, Y1; \
	VPCMPEQD   Y14, Y1, Y4; \
	VANDPS     Y0, Y4, Y4; \
	VPCMPEQD   Y11, Y1, Y5; \
	VANDPS     Y0, Y5, Y5; \
	VPCMPEQD   Y12, Y1, Y6; \
	VANDPS     Y0, Y6, Y6; \
	VPCMPEQD   Y13, Y1, Y7; \
	VANDPS     Y0, Y7, Y7; \
	VUNPCKLPS  Y5, Y4, Y8; \
	VUNPCKHPS  Y5, Y4, Y9; \
	VPERM2F128 $0x20, Y9, Y8, Y4; \
	VPERM2F128 $0x31, Y9, Y8, Y5; \
	VUNPCKLPS  Y7, Y6, Y8; \
	VUNPCKHPS  Y7, Y6, Y9; \
	VPERM2F128 $0x20, Y9, Y8, Y6; \
	VPERM2F128 $0x31, Y9, Y8, Y7; \
	VMOVUPS    Y4, (BX); \
	VMOVUPS    Y5, 32(BX); \
	VMOVUPS    Y6, (BX)(R10*1); \
	VMOVUPS    Y7, 32(BX)(R10*1)

// func maxPoolBack2x2AVX2(dx, dy *float32, arg *int32, planes, h, w, oh, ow int)
//
// maxPoolBack2x2AVX512 for AVX2, rows of at least 8 outputs (ow >= 8): 8 windows at a time, a
// row's last block overlapping the one before (writing the same values again).
TEXT ·maxPoolBack2x2AVX2(SB), NOSPLIT, $0-64
	MOVQ    dx+0(FP), SI
	MOVQ    dy+8(FP), DI
	MOVQ    arg+16(FP), R8
	MOVQ    planes+24(FP), R9
	MOVQ    h+32(FP), AX
	MOVQ    w+40(FP), R10
	MOVQ    oh+48(FP), R13
	MOVQ    ow+56(FP), R12
	IMULQ   R10, AX
	SHLQ    $2, AX
	MOVQ    AX, R11
	MOVQ    $1, AX
	VMOVQ   AX, X11
	VPBROADCASTD X11, Y11
	VMOVQ   R10, X12
	VPBROADCASTD X12, Y12
	VPADDD  Y11, Y12, Y13
	VPADDD  Y12, Y12, Y2 // 2w: an output row's step
	MOVQ    $16, AX
	VMOVQ   AX, X10
	VPBROADCASTD X10, Y10 // a block's step along the input row
	VPXOR   Y14, Y14, Y14
	SHLQ    $2, R10

b2_plane:
	TESTQ R9, R9
	JZ    b2_done
	MOVQ  R13, AX
	MOVQ  SI, DX
	VPXOR Y3, Y3, Y3 // the index of the row's first input in the plane

b2_row:
	MOVQ    DX, BX
	MOVQ    R12, CX
	VMOVDQU ramp<>(SB), Y15
	VPADDD  Y3, Y15, Y15

b2_block:
	CMPQ CX, $8
	JLT  b2_tail
	VMOVUPS (DI), Y0
	VMOVDQU (R8), Y1
	POOLBACK8
	VPADDD Y10, Y15, Y15
	ADDQ $64, BX
	ADDQ $32, DI
	ADDQ $32, R8
	SUBQ $8, CX
	JMP  b2_block

b2_tail:
	TESTQ CX, CX
	JZ    b2_rowdone
	NEGQ  CX
	ADDQ  $8, CX // t = 8 - the outputs left: step back t outputs
	SHLQ  $2, CX
	SUBQ  CX, DI
	SUBQ  CX, R8
	SHLQ  $1, CX
	SUBQ  CX, BX
	SHRQ  $2, CX
	VMOVQ CX, X9
	VPBROADCASTD X9, Y9
	VPSUBD Y9, Y15, Y15
	VMOVUPS (DI), Y0
	VMOVDQU (R8), Y1
	POOLBACK8
	ADDQ $32, DI
	ADDQ $32, R8

b2_rowdone:
	LEAQ   (DX)(R10*2), DX
	VPADDD Y2, Y3, Y3
	DECQ   AX
	JNZ    b2_row
	ADDQ   R11, SI
	DECQ   R9
	JMP    b2_plane

b2_done:
	VZEROUPPER
	RET

// func maxPoolRow3AVX2(y *float32, arg *int32, row *float32, n, base int, first bool)
//
// One input row's part in n (a multiple of 8) outputs of a 3-wide stride-2 max pooling whose
// windows lie inside the row: output i reads row[2i], row[2i+1], row[2i+2] (base is row's first
// index in the plane). The row's maximum is found from -Inf with ordered greater-than compares
// (the first maximum wins, NaN never wins), with its index; if first it is stored in y[i] and
// arg[i], otherwise it replaces them only where it is greater than y[i], as maxPoolPlane does.
TEXT ·maxPoolRow3AVX2(SB), NOSPLIT, $0-41
	MOVQ y+0(FP), DI
	MOVQ arg+8(FP), R8
	MOVQ row+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ base+32(FP), BX
	MOVBLZX first+40(FP), DX
	SHRQ $3, CX
	JZ   mp3_done
	MOVL $0xff800000, AX
	VMOVD AX, X13
	VBROADCASTSS X13, Y13 // -Inf
	MOVQ $1, R9
	VMOVD R9, X11
	VPBROADCASTD X11, Y11 // 1
	VPADDD Y11, Y11, Y12  // 2
	VMOVD BX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU ramp<>(SB), Y14
	VPADDD Y14, Y15, Y15 // the windows' first indices
	MOVQ $16, R9
	VMOVD R9, X14
	VPBROADCASTD X14, Y14

mp3_loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 4(SI), Y2
	VMOVUPS 36(SI), Y3
	VSHUFPS $0x88, Y1, Y0, Y4
	VSHUFPS $0xDD, Y1, Y0, Y5
	VSHUFPS $0xDD, Y3, Y2, Y6
	VPERMPD $0xD8, Y4, Y4 // each window's first value, in output order
	VPERMPD $0xD8, Y5, Y5 // second
	VPERMPD $0xD8, Y6, Y6 // third
	VPXOR   Y9, Y9, Y9    // offsets from the first index
	VCMPPS  $0x1e, Y13, Y4, Y10
	VBLENDVPS Y10, Y4, Y13, Y4
	VCMPPS  $0x1e, Y4, Y5, Y10
	VBLENDVPS Y10, Y5, Y4, Y4
	VBLENDVPS Y10, Y11, Y9, Y9
	VCMPPS  $0x1e, Y4, Y6, Y10
	VBLENDVPS Y10, Y6, Y4, Y4
	VBLENDVPS Y10, Y12, Y9, Y9
	VPADDD  Y15, Y9, Y9
	TESTQ DX, DX
	JNZ  mp3_store
	VMOVUPS (DI), Y7
	VMOVDQU (R8), Y8
	VCMPPS  $0x1e, Y7, Y4, Y10
	VBLENDVPS Y10, Y4, Y7, Y4
	VBLENDVPS Y10, Y9, Y8, Y9

mp3_store:
	VMOVUPS Y4, (DI)
	VMOVDQU Y9, (R8)
	VPADDD  Y14, Y15, Y15
	ADDQ $64, SI
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  mp3_loop

mp3_done:
	VZEROUPPER
	RET
