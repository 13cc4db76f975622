package cpu

// copyRowsGo is copyRows in Go: the noasm build's, and the reference of the assembly's test.
func copyRowsGo(dst, src []float32, n, w, dstStride, srcStride int) {
	for i := range n {
		copy(dst[i*dstStride:i*dstStride+w], src[i*srcStride:i*srcStride+w])
	}
}

// addRowsGo is addRows in Go.
func addRowsGo(dst, src []float32, n, w, dstStride, srcStride int) {
	for i := range n {
		d, s := dst[i*dstStride:i*dstStride+w], src[i*srcStride:i*srcStride+w]
		for j, v := range s {
			d[j] += v
		}
	}
}
