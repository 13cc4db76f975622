//go:build !amd64 || noasm

package jpeg

// avx2 is false: the Go IDCT does the work (see idct_amd64.go).
var avx2 = false

func idctSIMD(dst []byte, stride int, b *block, transposed bool, last int32) bool { return false }
