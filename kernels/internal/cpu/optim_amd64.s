//go:build !noasm

#include "textflag.h"

// func sgdAVX2(w, grad, v *float32, n int, lr, momentum, wd float32, nesterov bool)
//
// SGD's update for i < n, n a multiple of 8, with SGD's float32 operations one for one: d = g +
// wd·w; with momentum, v = momentum·v + d and d = v (nesterov: d + momentum·v); w -= lr·d. v is
// not read with momentum 0.
TEXT ·sgdAVX2(SB), NOSPLIT, $0-45
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS lr+32(FP), Y10
	VBROADCASTSS momentum+36(FP), Y11
	VBROADCASTSS wd+40(FP), Y12
	MOVBQZX nesterov+44(FP), R8
	MOVL momentum+36(FP), R9 // its bits: 0 (or -0) means no momentum
	SHLL $1, R9
	SHRQ $3, CX
	JZ   done

loop:
	VMOVUPS (DI), Y0
	VMULPS  Y12, Y0, Y1
	VADDPS  (SI), Y1, Y1 // d = g + wd·w
	TESTL   R9, R9
	JZ      step
	VMULPS  (DX), Y11, Y2
	VADDPS  Y1, Y2, Y2   // v = momentum·v + d
	VMOVUPS Y2, (DX)
	TESTQ   R8, R8
	JNZ     nesterov
	VMOVAPS Y2, Y1       // d = v
	JMP     step

nesterov:
	VMULPS Y2, Y11, Y3
	VADDPS Y3, Y1, Y1 // d += momentum·v

step:
	VMULPS  Y1, Y10, Y1
	VSUBPS  Y1, Y0, Y0  // w -= lr·d
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
