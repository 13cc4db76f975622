//go:build !amd64 || noasm

package cpu

// convDirect has no assembly in this build: the implicit GEMM computes every convolution.
func convDirect(y, xpad, w, bias []float32, g ConvGeom) bool { return false }

// convDirectBlocked has no assembly in this build either.
func convDirectBlocked(y, xpad, w, bias []float32, g ConvGeom, blocked []float32) bool { return false }

// directBlocks is nil: there is no direct kernel in this build.
func directBlocks(w []float32, g ConvGeom) []float32 { return nil }

// directSlack is 0: there is no direct kernel in this build.
func directSlack() int { return 0 }

// direct is false: there is no direct kernel in this build.
func direct(g ConvGeom) bool { return false }

// weightGradDirect has no assembly in this build: the implicit GEMM computes every weight
// gradient.
func weightGradDirect(dw, dy, xpad, scratch []float32, g ConvGeom) bool { return false }

// directWeightGrad is false: there is no direct kernel in this build.
func directWeightGrad(g ConvGeom, scratch int) bool { return false }
