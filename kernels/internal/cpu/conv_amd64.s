//go:build !noasm

#include "textflag.h"

// One kernel column j of dwRows: broadcast the input at disp(DI) into zb, multiply-add it with
// the two dy vectors Z24:Z25 into the accumulators r0:r1.
#define DWCOL(disp, zb, r0, r1) \
	VBROADCASTSS disp(DI), zb; \
	VFMADD231PS Z24, zb, r0; \
	VFMADD231PS Z25, zb, r1

// DWLOAD and DWSTORE move one kernel column's two accumulators from and to AX, then move AX to
// the next column's (R12 bytes on).
#define DWLOAD(r0, r1) \
	VMOVUPS (AX), r0; \
	VMOVUPS 64(AX), r1; \
	ADDQ R12, AX

#define DWSTORE(r0, r1) \
	VMOVUPS r0, (AX); \
	VMOVUPS r1, 64(AX); \
	ADDQ R12, AX

// DWARGS loads the weight-gradient kernels' arguments: CX rows, R13 cols, SI and DI the
// input, R8 and R9 its position and row steps in bytes, DX dy, R10 its position step in bytes,
// R11 the accumulators, R12 their row step in bytes.
#define DWARGS \
	MOVQ rows+0(FP), CX; \
	MOVQ cols+8(FP), R13; \
	MOVQ x+16(FP), SI; \
	MOVQ SI, DI; \
	MOVQ xstep+24(FP), R8; \
	SHLQ $2, R8; \
	MOVQ xrow+32(FP), R9; \
	SHLQ $2, R9; \
	MOVQ dy+40(FP), DX; \
	MOVQ ldd+48(FP), R10; \
	SHLQ $2, R10; \
	MOVQ c+56(FP), R11; \
	MOVQ ldc+64(FP), R12; \
	SHLQ $2, R12

// DWLOOP is the position loop of the weight-gradient kernels: for each of CX input rows (SI,
// R9 bytes apart) and each of its R13 positions (DI, R8 bytes apart), LOADDY loads the position's
// dy vectors (DX, R10 bytes apart) and COLS multiply-adds them with the kernel columns' inputs.
// rowl and coll name its labels.
#define DWLOOP(rowl, coll, LOADDY, COLS) \
rowl: \
	MOVQ R13, BX; \
coll: \
	LOADDY; \
	COLS; \
	ADDQ R8, DI; \
	ADDQ R10, DX; \
	DECQ BX; \
	JNZ  coll; \
	ADDQ R9, SI; \
	MOVQ SI, DI; \
	DECQ CX; \
	JNZ  rowl

// The four kernels' pieces: dy's vectors, the column steps, and their accumulators moved by OP
// (DWLOAD/DWSTORE, or DWLOAD2/DWSTORE2) from or to R11.
#define DYZ VMOVUPS (DX), Z24; VMOVUPS 64(DX), Z25
#define DYY VMOVUPS (DX), Y10; VMOVUPS 32(DX), Y11
#define COLS5Z DWCOL(0, Z26, Z0, Z1); DWCOL(4, Z27, Z2, Z3); DWCOL(8, Z28, Z4, Z5); DWCOL(12, Z29, Z6, Z7); DWCOL(16, Z30, Z8, Z9)
#define COLS3Z DWCOL(0, Z26, Z0, Z1); DWCOL(4, Z27, Z2, Z3); DWCOL(8, Z28, Z4, Z5)
#define COLS5Y DWCOL2(0, Y12, Y0, Y1); DWCOL2(4, Y13, Y2, Y3); DWCOL2(8, Y14, Y4, Y5); DWCOL2(12, Y12, Y6, Y7); DWCOL2(16, Y13, Y8, Y9)
#define COLS3Y DWCOL2(0, Y12, Y0, Y1); DWCOL2(4, Y13, Y2, Y3); DWCOL2(8, Y14, Y4, Y5)
#define ACC5Z(OP) MOVQ R11, AX; OP(Z0, Z1); OP(Z2, Z3); OP(Z4, Z5); OP(Z6, Z7); OP(Z8, Z9)
#define ACC3Z(OP) MOVQ R11, AX; OP(Z0, Z1); OP(Z2, Z3); OP(Z4, Z5)
#define ACC5Y(OP) MOVQ R11, AX; OP(Y0, Y1); OP(Y2, Y3); OP(Y4, Y5); OP(Y6, Y7); OP(Y8, Y9)
#define ACC3Y(OP) MOVQ R11, AX; OP(Y0, Y1); OP(Y2, Y3); OP(Y4, Y5)

// The AVX2 kernels' steps: CHAN2 is CHAN on Y12-Y14 with the broadcast in Y15; DWCOL2 is DWCOL
// on Y10:Y11; MASK2 expands the 8 mask bits at off(DX) into a VMASKMOVPS mask; STORE2 and
// STOREADD2 are STORE and STOREADD under the masks in Y12-Y14 (Y15 a temporary); DWLOAD2 and
// DWSTORE2 are DWLOAD and DWSTORE for two ymm.
#define CHAN2(off, r0, r1, r2) \
	VBROADCASTSS off(SI), Y15; \
	VFMADD231PS Y12, Y15, r0; \
	VFMADD231PS Y13, Y15, r1; \
	VFMADD231PS Y14, Y15, r2

#define DWCOL2(disp, yb, r0, r1) \
	VBROADCASTSS disp(DI), yb; \
	VFMADD231PS Y10, yb, r0; \
	VFMADD231PS Y11, yb, r1

#define MASK2(off, ym) \
	MOVWLZX off(DX), AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, ym; \
	VPAND laneBits<>(SB), ym, ym; \
	VPCMPEQD laneBits<>(SB), ym, ym

#define STORE2(boff, r0, r1, r2) \
	VBROADCASTSS boff(DX), Y15; \
	VADDPS Y15, r0, r0; \
	VADDPS Y15, r1, r1; \
	VADDPS Y15, r2, r2; \
	VMASKMOVPS r0, Y12, (R8); \
	VMASKMOVPS r1, Y13, (R9); \
	VMASKMOVPS r2, Y14, (R10); \
	ADDQ R11, R8; \
	ADDQ R11, R9; \
	ADDQ R11, R10

#define STOREADD2(boff, r0, r1, r2) \
	VMASKMOVPS (R8), Y12, Y15; \
	VADDPS Y15, r0, r0; \
	VMASKMOVPS (R9), Y13, Y15; \
	VADDPS Y15, r1, r1; \
	VMASKMOVPS (R10), Y14, Y15; \
	VADDPS Y15, r2, r2; \
	STORE2(boff, r0, r1, r2)

#define DWLOAD2(r0, r1) \
	VMOVUPS (AX), r0; \
	VMOVUPS 32(AX), r1; \
	ADDQ R12, AX

#define DWSTORE2(r0, r1) \
	VMOVUPS r0, (AX); \
	VMOVUPS r1, 32(AX); \
	ADDQ R12, AX

// One step of k for one of the 8 output channels: broadcast its weight (at off bytes from SI)
// into zb and multiply-add it with the three input vectors Z24-Z26 into r0-r2.
#define CHAN(off, zb, r0, r1, r2) \
	VBROADCASTSS off(SI), zb; \
	VFMADD231PS Z24, zb, r0; \
	VFMADD231PS Z25, zb, r1; \
	VFMADD231PS Z26, zb, r2

// One step of k: the three input vectors at offset (DI) from R8-R10 (masked by K1-K3; the
// lanes masked off read nothing and hold zero), times the eight weights at SI.
#define STEP \
	MOVLQSX (DI), AX; \
	VMOVUPS.Z (R8)(AX*4), K1, Z24; \
	VMOVUPS.Z (R9)(AX*4), K2, Z25; \
	VMOVUPS.Z (R10)(AX*4), K3, Z26; \
	CHAN(0, Z27, Z0, Z1, Z2); \
	CHAN(4, Z28, Z3, Z4, Z5); \
	CHAN(8, Z29, Z6, Z7, Z8); \
	CHAN(12, Z30, Z9, Z10, Z11); \
	CHAN(16, Z31, Z12, Z13, Z14); \
	CHAN(20, Z27, Z15, Z16, Z17); \
	CHAN(24, Z28, Z18, Z19, Z20); \
	CHAN(28, Z29, Z21, Z22, Z23); \
	ADDQ $32, SI; \
	ADDQ $4, DI

// Adds the bias of channel i (at DX; -0 leaves a value unchanged) to r0-r2, stores them to
// R8-R10 (masked by K1-K3) and moves R8-R10 to the next channel (R11 bytes on).
#define STORE(i, r0, r1, r2) \
	VBROADCASTSS (i*4)(DX), Z27; \
	VADDPS Z27, r0, r0; \
	VADDPS Z27, r1, r1; \
	VADDPS Z27, r2, r2; \
	VMOVUPS r0, K1, (R8); \
	VMOVUPS r1, K2, (R9); \
	VMOVUPS r2, K3, (R10); \
	ADDQ R11, R8; \
	ADDQ R11, R9; \
	ADDQ R11, R10

// STORE after adding what the output held (beta != 0).
#define STOREADD(i, r0, r1, r2) \
	VMOVUPS.Z (R8), K1, Z24; \
	VMOVUPS.Z (R9), K2, Z25; \
	VMOVUPS.Z (R10), K3, Z26; \
	VADDPS Z24, r0, r0; \
	VADDPS Z25, r1, r1; \
	VADDPS Z26, r2, r2; \
	STORE(i, r0, r1, r2)

// func convTileAVX512(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32)
//
// Multiplies the 8 x k weights a (packed k-major: a[p*8+i] is output channel i's weight of
// input p) by the k x 48 matrix whose column j of vector v is the input at t.x[v] + offs[p] + j,
// for the three vectors v of the tile, lanes j under t.mask[v]: one stride-1 convolution tile of
// 8 output channels and three runs of up to 16 outputs, its inputs read straight from the padded
// input (no column matrix, no packing). The sums run over p in order by FMA from zero, exactly
// as the GEMM micro-kernels do; then, for each channel i, the output at t.y[v] + i*ldy gets
// acc (beta == 0) or output + acc (beta != 0), then + bias[i] (a bias of -0 changes nothing).
// Lanes outside a mask are neither read nor written.
TEXT ·convTileAVX512(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ offs+16(FP), DI
	MOVQ t+24(FP), DX
	MOVQ 0(DX), R8
	MOVQ 8(DX), R9
	MOVQ 16(DX), R10
	KMOVW 48(DX), K1
	KMOVW 50(DX), K2
	KMOVW 52(DX), K3

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
	SHRQ $1, BX
	JZ   tail

loop2:
	STEP
	STEP
	DECQ BX
	JNZ  loop2

tail:
	ANDQ $1, CX
	JZ   store
	STEP

store:
	MOVQ t+24(FP), DX
	MOVQ 24(DX), R8
	MOVQ 32(DX), R9
	MOVQ 40(DX), R10
	MOVQ ldy+32(FP), R11
	SHLQ $2, R11
	MOVQ beta+40(FP), BX
	MOVQ bias+48(FP), DX
	TESTQ BX, BX
	JNZ  add
	STORE(0, Z0, Z1, Z2)
	STORE(1, Z3, Z4, Z5)
	STORE(2, Z6, Z7, Z8)
	STORE(3, Z9, Z10, Z11)
	STORE(4, Z12, Z13, Z14)
	STORE(5, Z15, Z16, Z17)
	STORE(6, Z18, Z19, Z20)
	STORE(7, Z21, Z22, Z23)
	VZEROUPPER
	RET

add:
	STOREADD(0, Z0, Z1, Z2)
	STOREADD(1, Z3, Z4, Z5)
	STOREADD(2, Z6, Z7, Z8)
	STOREADD(3, Z9, Z10, Z11)
	STOREADD(4, Z12, Z13, Z14)
	STOREADD(5, Z15, Z16, Z17)
	STOREADD(6, Z18, Z19, Z20)
	STOREADD(7, Z21, Z22, Z23)
	VZEROUPPER
	RET

// laneBits: lane i of the vector is 1<<i, to turn a run's mask bits into a VMASKMOVPS mask.
DATA laneBits<>+0(SB)/4, $1
DATA laneBits<>+4(SB)/4, $2
DATA laneBits<>+8(SB)/4, $4
DATA laneBits<>+12(SB)/4, $8
DATA laneBits<>+16(SB)/4, $16
DATA laneBits<>+20(SB)/4, $32
DATA laneBits<>+24(SB)/4, $64
DATA laneBits<>+28(SB)/4, $128
GLOBL laneBits<>(SB), RODATA|NOPTR, $32

// func convTileAVX2(k int, a *float32, offs *int32, t *convTile, ldy int, beta int, bias *float32)
//
// convTileAVX512 with AVX2 and FMA for 4 output channels (a packed k-major: a[p*4+i]) and runs
// of up to 8 outputs (t.mask's low 8 bits), 12 ymm accumulators. Its input loads are not masked:
// each reads all 8 floats of its run, up to 7 past the run's last input, which the caller
// guarantees are readable (directSet.slack); the lanes they feed are never stored. The same
// sums, by FMA in p order from zero, as the GEMM's.
TEXT ·convTileAVX2(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ offs+16(FP), DI
	MOVQ t+24(FP), DX
	MOVQ 0(DX), R8
	MOVQ 8(DX), R9
	MOVQ 16(DX), R10
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

step2:
	MOVLQSX (DI), AX
	VMOVUPS (R8)(AX*4), Y12
	VMOVUPS (R9)(AX*4), Y13
	VMOVUPS (R10)(AX*4), Y14
	CHAN2(0, Y0, Y1, Y2)
	CHAN2(4, Y3, Y4, Y5)
	CHAN2(8, Y6, Y7, Y8)
	CHAN2(12, Y9, Y10, Y11)
	ADDQ $16, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  step2

	// The runs' masks, from t.mask's bits, into Y12-Y14.
	MASK2(48, Y12)
	MASK2(50, Y13)
	MASK2(52, Y14)
	MOVQ 24(DX), R8
	MOVQ 32(DX), R9
	MOVQ 40(DX), R10
	MOVQ ldy+32(FP), R11
	SHLQ $2, R11
	MOVQ beta+40(FP), BX
	MOVQ bias+48(FP), DX
	TESTQ BX, BX
	JNZ  add2
	STORE2(0, Y0, Y1, Y2)
	STORE2(4, Y3, Y4, Y5)
	STORE2(8, Y6, Y7, Y8)
	STORE2(12, Y9, Y10, Y11)
	VZEROUPPER
	RET

add2:
	STOREADD2(0, Y0, Y1, Y2)
	STOREADD2(4, Y3, Y4, Y5)
	STOREADD2(8, Y6, Y7, Y8)
	STOREADD2(12, Y9, Y10, Y11)
	VZEROUPPER
	RET

// func dwRows5AVX512(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)
//
// For j < 5 and i < 32: c[j*ldc+i] += sum over the positions (r, q), r < rows and q < cols, in
// order, of x[r*xrow + q*xstep + j] * dy[(r*cols+q)*ldd + i], one FMA per term: a convolution's
// weight gradient for 32 output channels and the 5 kernel columns of one input row, with dy
// transposed (position-major) and the input read in place.
TEXT ·dwRows5AVX512(SB), NOSPLIT, $0-72
	DWARGS
	ACC5Z(DWLOAD)
	DWLOOP(row5z, col5z, DYZ, COLS5Z)
	ACC5Z(DWSTORE)
	VZEROUPPER
	RET

// func dwRows3AVX512(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)
//
// dwRows5AVX512 for 3 kernel columns.
TEXT ·dwRows3AVX512(SB), NOSPLIT, $0-72
	DWARGS
	ACC3Z(DWLOAD)
	DWLOOP(row3z, col3z, DYZ, COLS3Z)
	ACC3Z(DWSTORE)
	VZEROUPPER
	RET

// func dwRows5AVX2(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)
//
// dwRows5AVX512 with AVX2 and FMA for 16 output channels (10 ymm accumulators).
TEXT ·dwRows5AVX2(SB), NOSPLIT, $0-72
	DWARGS
	ACC5Y(DWLOAD2)
	DWLOOP(row5y, col5y, DYY, COLS5Y)
	ACC5Y(DWSTORE2)
	VZEROUPPER
	RET

// func dwRows3AVX2(rows, cols int, x *float32, xstep, xrow int, dy *float32, ldd int, c *float32, ldc int)
//
// dwRows5AVX2 for 3 kernel columns.
TEXT ·dwRows3AVX2(SB), NOSPLIT, $0-72
	DWARGS
	ACC3Y(DWLOAD2)
	DWLOOP(row3y, col3y, DYY, COLS3Y)
	ACC3Y(DWSTORE2)
	VZEROUPPER
	RET
