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

// addConst writes dst[i] = src[i] + b.
func addConst(dst, src []float32, b float32) {
	k := addConstSIMD(dst, src, b)
	dst = dst[k:len(src)]
	for i, v := range src[k:] {
		dst[i] = v + b
	}
}

// copyRows2Go is copyRows2 in Go.
func copyRows2Go(dst, src []float32, n, w, dstStride, srcStride int) {
	for i := range n {
		d, s := dst[i*dstStride:i*dstStride+w], src[i*srcStride:]
		for j := range d {
			d[j] = s[2*j]
		}
	}
}
