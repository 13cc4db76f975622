//go:build !amd64 || noasm

package cpu

func maxPool2x2SIMD(y []float32, arg []int32, x []float32, planes, h, w, oh, ow int) bool {
	return false
}

func maxPoolBack2x2SIMD(dx, dy []float32, arg []int32, planes, h, w, oh, ow int) bool {
	return false
}

func maxPoolRowSIMD(y []float32, arg []int32, row0, row1 []float32, w, base int) int { return 0 }

func maxPoolRow3SIMD(y []float32, arg []int32, row []float32, base int, first bool) bool {
	return false
}
