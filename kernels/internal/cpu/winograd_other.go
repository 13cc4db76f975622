//go:build !amd64 || noasm

package cpu

// winograd reports whether convolve computes g (padded: Pad 0) by Winograd: every 3x3 stride-1
// kernel. With the pure-Go GEMM of this build it took, on one core (-tags noasm), resnet18's
// layers at 64 px, batch 32, from 171-179 to 81-92 ms, and the CIFAR ResNets' (batch 128, 16
// to 64 channels at 28, 14 and 7 px) from 136-157 to 84-103 ms.
func winograd(g ConvGeom) bool { return g.KH == 3 && g.KW == 3 && g.Stride == 1 }

// winoFiltersAsm has no assembly in this build.
func winoFiltersAsm(u []float32, su int, w []float32, lo, hi int) bool { return false }

// winoTilesAsm is false: there is no assembly in this build.
func winoTilesAsm(g ConvGeom) bool { return false }

// winoInputAsm is never called in this build (winoTilesAsm is false).
func winoInputAsm(v []float32, sv int, xpad []float32, g ConvGeom, offs []int32, lo, hi int) {
	panic("cpu: no Winograd assembly in this build")
}

// winoOutputAsm is never called in this build (winoTilesAsm is false).
func winoOutputAsm(y, m []float32, sm int, bias []float32, g ConvGeom, offs []int32, lo, hi int) {
	panic("cpu: no Winograd assembly in this build")
}
