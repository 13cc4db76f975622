package cpu

// normalizeGo sets d[i] = float32(in[i])*mul + add, rounding the product to float32 before the
// sum (the explicit conversion forbids a fused multiply-add), so that the result is the same on
// every architecture and equals the SIMD kernels', which multiply and then add.
func normalizeGo(d []float32, in []uint8, mul, add float32) {
	d = d[:len(in)]
	for i, v := range in {
		d[i] = float32(float32(v)*mul) + add
	}
}

// normalizeRow is NormalizeU8's inner loop: d[i] = float32(in[i])*mul + add for every i, len(d) ==
// len(in). The SIMD kernel, where there is one, does the longest multiple of its width; the Go
// loop does the rest.
func normalizeRow(d []float32, in []uint8, mul, add float32) {
	d = d[:len(in)]
	if k := normalizeKernel; k != nil {
		if n := len(in) &^ (k.width - 1); n > 0 {
			k.fn(&d[0], &in[0], n, mul, add)
			d, in = d[n:], in[n:]
		}
	}
	normalizeGo(d, in, mul, add)
}

// normKernel is a SIMD version of normalizeGo for n a multiple of width.
type normKernel struct {
	name  string
	width int
	fn    func(dst *float32, src *uint8, n int, mul, add float32)
}
