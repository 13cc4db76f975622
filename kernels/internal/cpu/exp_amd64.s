//go:build !noasm

#include "textflag.h"

// ROW broadcasts the float32 v to 8 lanes at sym+off.
#define ROW(sym, off, v) \
	DATA sym+(off+0)(SB)/4, $v; DATA sym+(off+4)(SB)/4, $v; \
	DATA sym+(off+8)(SB)/4, $v; DATA sym+(off+12)(SB)/4, $v; \
	DATA sym+(off+16)(SB)/4, $v; DATA sym+(off+20)(SB)/4, $v; \
	DATA sym+(off+24)(SB)/4, $v; DATA sym+(off+28)(SB)/4, $v

// The constants of expf (attention.go).
ROW(expConsts<>, 0, -87.33)               // expLo
ROW(expConsts<>, 32, 88.72)               // expHi
ROW(expConsts<>, 64, 1.44269504088896341) // expLog2e
ROW(expConsts<>, 96, 0.693359375)         // expC1
ROW(expConsts<>, 128, -2.12194440e-4)     // expC2
ROW(expConsts<>, 160, 1.9875691500e-4)    // expP0
ROW(expConsts<>, 192, 1.3981999507e-3)    // expP1
ROW(expConsts<>, 224, 8.3334519073e-3)    // expP2
ROW(expConsts<>, 256, 4.1665795894e-2)    // expP3
ROW(expConsts<>, 288, 1.6666665459e-1)    // expP4
ROW(expConsts<>, 320, 5.0000001201e-1)    // expP5
ROW(expConsts<>, 352, 1.0)                // one
GLOBL expConsts<>(SB), RODATA|NOPTR, $384

// func expShiftAVX2(x *float32, n int, shift float32, lanes *[8]float32)
//
// x[i] = expf(x[i] - shift) for i < n, n a multiple of 8, with expf's float32 operations one
// for one (no fused multiply-add), so the bits are the Go loop's; lanes[j] = the sum of the
// results x[i], i%8 == j, in increasing i.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y15
	MOVQ lanes+24(FP), DI
	VXORPS Y0, Y0, Y0
	VMOVUPS expConsts<>+0(SB), Y8
	VMOVUPS expConsts<>+32(SB), Y9
	VMOVUPS expConsts<>+64(SB), Y10
	VMOVUPS expConsts<>+96(SB), Y11
	VMOVUPS expConsts<>+128(SB), Y12
	VMOVUPS expConsts<>+352(SB), Y13
	MOVL $0x3f800000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14 // 127<<23: the exponent's bias
	SHRQ $3, CX
	JZ   exp_done

exp_loop:
	VMOVUPS (SI), Y1
	VSUBPS Y15, Y1, Y1         // x -= shift
	VCMPPS $1, Y8, Y1, Y6      // x < expLo: the result is 0
	VMINPS Y1, Y9, Y1          // min(x, expHi); NaN stays NaN
	VMULPS Y10, Y1, Y2
	VROUNDPS $0, Y2, Y2        // n = x·log2e to the nearest, ties to even
	VMULPS Y11, Y2, Y3
	VSUBPS Y3, Y1, Y1          // x -= n·c1
	VMULPS Y12, Y2, Y3
	VSUBPS Y3, Y1, Y1          // x -= n·c2
	VMULPS expConsts<>+160(SB), Y1, Y3
	VADDPS expConsts<>+192(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+224(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+256(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+288(SB), Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS expConsts<>+320(SB), Y3, Y3
	VMULPS Y1, Y1, Y4          // z = x·x
	VMULPS Y4, Y3, Y3
	VADDPS Y1, Y3, Y3
	VADDPS Y13, Y3, Y3         // p = p·z + x + 1
	VCVTPS2DQ Y2, Y5
	VPSLLD $23, Y5, Y5
	VPADDD Y14, Y5, Y5         // 2^n
	VMULPS Y5, Y3, Y3
	VANDNPS Y3, Y6, Y3
	VMOVUPS Y3, (SI)
	VADDPS Y3, Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  exp_loop

exp_done:
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET

// The constants of normalCDF (gelu.go).
ROW(geluConsts<>, 0, 0.01658014953136444)    // geluS0
ROW(geluConsts<>, 32, -0.06279485672712326)  // geluS1
ROW(geluConsts<>, 64, 0.05165864899754524)   // geluS2
ROW(geluConsts<>, 96, 0.028427530080080032)  // geluS3
ROW(geluConsts<>, 128, 0.01271863840520382)  // geluS4
ROW(geluConsts<>, 160, 0.08665331453084946)  // geluS5
ROW(geluConsts<>, 192, 0.07200063019990921)  // geluS6
ROW(geluConsts<>, 224, 0.09551546722650528)  // geluS7
ROW(geluConsts<>, 256, 0.09949258714914322)  // geluS8
ROW(geluConsts<>, 288, 0.0997479036450386)   // geluS9
ROW(geluConsts<>, 320, 0.25)                 // t's 1/4
ROW(geluConsts<>, 352, -0.5)                 // e's -1/2
ROW(geluConsts<>, 384, 0.3989422804014327)   // invSqrt2Pi (tensor.go)
GLOBL geluConsts<>(SB), RODATA|NOPTR, $416

// GELU_SETUP loads the registers NORMAL_CDF keeps its constants in: Y8 |x|'s mask, Y10 1,
// Y12 expLo, Y13 expHi, Y14 the exponent's bias 127<<23, Y15 0.
#define GELU_SETUP \
	MOVL $0x7fffffff, AX; VMOVD AX, X8; VPBROADCASTD X8, Y8; \
	VMOVUPS expConsts<>+352(SB), Y10; \
	VMOVUPS expConsts<>+0(SB), Y12; \
	VMOVUPS expConsts<>+32(SB), Y13; \
	MOVL $0x3f800000, AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	VXORPS Y15, Y15, Y15

// EXPF sets OUT = expf(X) as expShiftAVX2's loop computes it, with GELU_SETUP's constants in
// Y10 and Y12-Y14; X, N, P, M and Z are clobbered (OUT may be X).
#define EXPF(X, N, P, M, Z, OUT) \
	VCMPPS $1, Y12, X, M; \
	VMINPS X, Y13, X; \
	VMULPS expConsts<>+64(SB), X, N; \
	VROUNDPS $0, N, N; \
	VMULPS expConsts<>+96(SB), N, P; VSUBPS P, X, X; \
	VMULPS expConsts<>+128(SB), N, P; VSUBPS P, X, X; \
	VMULPS expConsts<>+160(SB), X, P; VADDPS expConsts<>+192(SB), P, P; \
	VMULPS X, P, P; VADDPS expConsts<>+224(SB), P, P; \
	VMULPS X, P, P; VADDPS expConsts<>+256(SB), P, P; \
	VMULPS X, P, P; VADDPS expConsts<>+288(SB), P, P; \
	VMULPS X, P, P; VADDPS expConsts<>+320(SB), P, P; \
	VMULPS X, X, Z; VMULPS Z, P, P; VADDPS X, P, P; VADDPS Y10, P, P; \
	VCVTPS2DQ N, N; VPSLLD $23, N, N; VPADDD Y14, N, N; VMULPS N, P, P; \
	VANDNPS P, M, OUT

// NORMAL_CDF sets Y6 = Φ(Y0) and Y4 = e^(-Y0²/2), normalCDF's float32 operations one for one
// (Y1-Y3, Y5 and Y7 are clobbered): a = |x|, t = 1/(1 + a/4), s = S(t) by Horner, e = expf(a·a
// · -1/2) as expShiftAVX2's loop, q = t·s·e, Φ = q where x < 0, else 1 - q.
#define NORMAL_CDF \
	VANDPS Y8, Y0, Y1; \
	VMULPS geluConsts<>+320(SB), Y1, Y2; \
	VADDPS Y10, Y2, Y2; \
	VDIVPS Y2, Y10, Y2; \
	VMULPS geluConsts<>+0(SB), Y2, Y3; \
	VADDPS geluConsts<>+32(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+64(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+96(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+128(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+160(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+192(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+224(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+256(SB), Y3, Y3; \
	VMULPS Y2, Y3, Y3; VADDPS geluConsts<>+288(SB), Y3, Y3; \
	VMULPS Y1, Y1, Y4; \
	VMULPS geluConsts<>+352(SB), Y4, Y4; \
	EXPF(Y4, Y5, Y7, Y6, Y1, Y4); \
	VMULPS Y2, Y3, Y3; \
	VMULPS Y4, Y3, Y3; \
	VCMPPS $1, Y15, Y0, Y5; \
	VSUBPS Y3, Y10, Y6; \
	VBLENDVPS Y5, Y3, Y6, Y6

// SIGMOID sets Y6 = σ(Y0) and Y4 = σ(-Y0), sigmoidParts' float32 operations one for one, with
// GELU_SETUP's constants (Y1-Y3, Y5 and Y7 are clobbered): e = expf(-|x|) as expShiftAVX2's
// loop, d = 1 + e, s = 1/d and t = e/d where x >= 0, s = e/d and t = 1/d where x < 0.
#define SIGMOID \
	SIGMOID_ONLY; \
	VBLENDVPS Y5, Y10, Y4, Y1; \
	VDIVPS Y2, Y1, Y4

// SIGMOID_ONLY is SIGMOID without σ(-Y0) (Y4 is clobbered): the forward passes need σ(x)
// alone, and the division SIGMOID does for σ(-x) was a third of SiLU's time (efficientnet_b0's
// inference spent a fifth of its time in SiLU).
#define SIGMOID_ONLY \
	VANDPS Y8, Y0, Y1; \
	VSUBPS Y1, Y15, Y1; \
	EXPF(Y1, Y5, Y7, Y6, Y2, Y4); \
	VADDPS Y10, Y4, Y2; \
	VCMPPS $1, Y15, Y0, Y5; \
	VBLENDVPS Y5, Y4, Y10, Y3; \
	VDIVPS Y2, Y3, Y6

// UNARY_TEXT is the body of a function (y, x *float32, n int) that sets y[i] from x[i] for
// i < n, n a multiple of 8, by the macro F: Y0 holds x's 8 values, F leaves y's in Y6.
#define UNARY_TEXT(F) \
	MOVQ y+0(FP), DI; MOVQ x+8(FP), SI; MOVQ n+16(FP), CX; \
	GELU_SETUP; \
	SHRQ $3, CX; JZ done; \
loop: \
	VMOVUPS (SI), Y0; F; VMOVUPS Y6, (DI); \
	ADDQ $32, SI; ADDQ $32, DI; DECQ CX; JNZ loop; \
done: \
	VZEROUPPER; RET

// UNARY_GRAD_TEXT is the body of a function (dx, dy, x *float32, n int) that sets dx[i] =
// dy[i]·g where the macro G leaves g, the derivative at x[i], in Y6 from x's 8 values in Y0.
#define UNARY_GRAD_TEXT(G) \
	MOVQ dx+0(FP), DI; MOVQ dy+8(FP), DX; MOVQ x+16(FP), SI; MOVQ n+24(FP), CX; \
	GELU_SETUP; \
	SHRQ $3, CX; JZ done; \
loop: \
	VMOVUPS (SI), Y0; G; VMULPS (DX), Y6, Y6; VMOVUPS Y6, (DI); \
	ADDQ $32, SI; ADDQ $32, DX; ADDQ $32, DI; DECQ CX; JNZ loop; \
done: \
	VZEROUPPER; RET

// SIGMOID_SETUP512 loads the registers EXPF512 and SIGMOID512 keep their constants in: Z8
// |x|'s mask, Z10 1, Z12 expLo, Z13 expHi, Z14 the exponent's bias 127<<23, Z15 0.
#define SIGMOID_SETUP512 \
	MOVL $0x7fffffff, AX; VPBROADCASTD AX, Z8; \
	VBROADCASTSS expConsts<>+352(SB), Z10; \
	VBROADCASTSS expConsts<>+0(SB), Z12; \
	VBROADCASTSS expConsts<>+32(SB), Z13; \
	MOVL $0x3f800000, AX; VPBROADCASTD AX, Z14; \
	VPXORD Z15, Z15, Z15

// EXPF512 sets OUT = expf(X), EXPF's operations one for one on 16 lanes (X, N, P and Q are
// clobbered; K1 too): where X < expLo the result is 0, which the zeroing move under K1, X's
// lanes not below expLo (NaN included), gives.
#define EXPF512(X, N, P, Q, OUT) \
	VCMPPS $5, Z12, X, K1; \
	VMINPS X, Z13, X; \
	VMULPS.BCST expConsts<>+64(SB), X, N; \
	VRNDSCALEPS $0, N, N; \
	VMULPS.BCST expConsts<>+96(SB), N, P; VSUBPS P, X, X; \
	VMULPS.BCST expConsts<>+128(SB), N, P; VSUBPS P, X, X; \
	VMULPS.BCST expConsts<>+160(SB), X, P; VADDPS.BCST expConsts<>+192(SB), P, P; \
	VMULPS X, P, P; VADDPS.BCST expConsts<>+224(SB), P, P; \
	VMULPS X, P, P; VADDPS.BCST expConsts<>+256(SB), P, P; \
	VMULPS X, P, P; VADDPS.BCST expConsts<>+288(SB), P, P; \
	VMULPS X, P, P; VADDPS.BCST expConsts<>+320(SB), P, P; \
	VMULPS X, X, Q; VMULPS Q, P, P; VADDPS X, P, P; VADDPS Z10, P, P; \
	VCVTPS2DQ N, N; VPSLLD $23, N, N; VPADDD Z14, N, N; VMULPS N, P, P; \
	VMOVAPS.Z P, K1, OUT

// SIGMOID512 sets Z6 = σ(Z0), SIGMOID_ONLY's operations one for one on 16 lanes (Z1-Z5 and
// K1-K2 are clobbered): e = expf(-|x|), s = (x < 0 ? e : 1) / (1 + e).
#define SIGMOID512 \
	VPANDD Z8, Z0, Z1; \
	VSUBPS Z1, Z15, Z1; \
	EXPF512(Z1, Z5, Z3, Z2, Z4); \
	VADDPS Z10, Z4, Z2; \
	VCMPPS $1, Z15, Z0, K2; \
	VMOVAPS Z10, Z3; \
	VMOVAPS Z4, K2, Z3; \
	VDIVPS Z2, Z3, Z6

// SIGMOID_ONLY512 and SILU512 are the 16-lane forms of SIGMOID_ONLY and SILU. Where AVX-512 is
// executed in two halves (AMD's Zen 4) the gain is not width but independence: one chain of
// about 35 dependent operations covers 16 values, so the scheduler overlaps twice the values;
// sigmoid and SiLU were latency-bound at about 25 cycles per 8 values.
#define SIGMOID_ONLY512 SIGMOID512
#define SILU512 SIGMOID512; VMULPS Z6, Z0, Z6

// UNARY_TEXT512 is UNARY_TEXT on 16 lanes: n is a multiple of 16.
#define UNARY_TEXT512(F) \
	MOVQ y+0(FP), DI; MOVQ x+8(FP), SI; MOVQ n+16(FP), CX; \
	SIGMOID_SETUP512; \
	SHRQ $4, CX; JZ done; \
loop: \
	VMOVUPS (SI), Z0; F; VMOVUPS Z6, (DI); \
	ADDQ $64, SI; ADDQ $64, DI; DECQ CX; JNZ loop; \
done: \
	VZEROUPPER; RET

// GELU: x·Φ(x); GELU_GRAD: Φ(x) + x·e^(-x²/2)/√(2π), gelu's and geluGrad's float32 operations
// one for one.
#define GELU NORMAL_CDF; VMULPS Y6, Y0, Y6
#define GELU_GRAD NORMAL_CDF; VMULPS geluConsts<>+384(SB), Y4, Y4; VMULPS Y0, Y4, Y4; VADDPS Y4, Y6, Y6

// SIGMOID_GRAD: σ(x)·σ(-x); SILU: x·σ(x); SILU_GRAD: σ(x)·(1 + x·σ(-x)); sigmoidGrad's, silu's
// and siluGrad's float32 operations one for one.
#define SIGMOID_GRAD SIGMOID; VMULPS Y4, Y6, Y6
#define SILU SIGMOID_ONLY; VMULPS Y6, Y0, Y6
#define SILU_GRAD SIGMOID; VMULPS Y4, Y0, Y4; VADDPS Y10, Y4, Y4; VMULPS Y4, Y6, Y6

// func geluAVX2(y, x *float32, n int)
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	UNARY_TEXT(GELU)

// func geluGradAVX2(dx, dy, x *float32, n int)
TEXT ·geluGradAVX2(SB), NOSPLIT, $0-32
	UNARY_GRAD_TEXT(GELU_GRAD)

// func sigmoidAVX2(y, x *float32, n int)
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-24
	UNARY_TEXT(SIGMOID_ONLY)

// func sigmoidGradAVX2(dx, dy, x *float32, n int)
TEXT ·sigmoidGradAVX2(SB), NOSPLIT, $0-32
	UNARY_GRAD_TEXT(SIGMOID_GRAD)

// func siluAVX2(y, x *float32, n int)
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	UNARY_TEXT(SILU)

// func siluGradAVX2(dx, dy, x *float32, n int)
TEXT ·siluGradAVX2(SB), NOSPLIT, $0-32
	UNARY_GRAD_TEXT(SILU_GRAD)

// func maxAVX2(x *float32, n int, mx float32) float32
//
// The largest of mx and x[0:n], n a multiple of 8. VMAXPS returns its second operand, the running
// maximum, where either is NaN: a NaN among the values is passed over, as by the Go loop's x > mx.
TEXT ·maxAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y0
	SHRQ $3, CX
	JZ   max_fold

max_loop:
	VMOVUPS (SI), Y1
	VMAXPS Y0, Y1, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  max_loop

max_fold:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X0, X1, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X0, X1, X0
	VPSHUFD $1, X0, X1
	VMAXSS X0, X1, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func sigmoidAVX512(y, x *float32, n int)
TEXT ·sigmoidAVX512(SB), NOSPLIT, $0-24
	UNARY_TEXT512(SIGMOID_ONLY512)

// func siluAVX512(y, x *float32, n int)
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	UNARY_TEXT512(SILU512)
