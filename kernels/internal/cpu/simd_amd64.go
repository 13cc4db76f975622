//go:build !noasm

package cpu

import "golang.org/x/sys/cpu"

// hasAVX2 selects the AVX2 loops of simd_amd64.s.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func reluAVX2(y, x *float32, n int)

//go:noescape
func reluGradAVX2(dx, dy, y *float32, n int)

// reluSIMD does ReLU on the longest prefix of x the assembly handles and returns its length.
func reluSIMD(y, x []float32) int {
	n := len(x) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	reluAVX2(&y[0], &x[0], n)
	return n
}

// reluGradSIMD is reluSIMD for ReLUGrad.
func reluGradSIMD(dx, dy, y []float32) int {
	n := len(y) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = dx[n-1], dy[n-1]
	reluGradAVX2(&dx[0], &dy[0], &y[0], n)
	return n
}
