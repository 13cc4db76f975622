//go:build !amd64 || noasm

package transforms

// avx2 is false: the Go loops do all the work (see simd_amd64.go).
var avx2 = false

func verticalSIMD(dst []byte, rows *[8][]byte, ws *[8]int32, m int) int { return 0 }

func ycbcrSIMD(r, g, b, ys, cbs, crs []byte, flip bool) int { return 0 }

func horizontalSIMD(dst, src []byte, step int, ws *weights) bool { return false }
