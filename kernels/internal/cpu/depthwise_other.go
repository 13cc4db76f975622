//go:build !amd64 || noasm

package cpu

// depthwiseSIMD has no assembly in this build: DepthwiseConv2D's Go loops compute every plane.
func depthwiseSIMD(y, x, w, bias []float32, g DepthwiseGeom) bool { return false }

// depthwiseBackwardSIMD has no assembly in this build: DepthwiseConv2DBackward's Go loops
// compute every gradient.
func depthwiseBackwardSIMD(dx, dw, dbias, dy, x, w []float32, g DepthwiseGeom) bool {
	return false
}
