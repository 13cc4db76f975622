//go:build !amd64 || noasm

package cpu

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
