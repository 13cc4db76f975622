//go:build !noasm

package cpu

//go:noescape
func sgdAVX2(w, grad, v *float32, n int, lr, momentum, wd float32, nesterov bool)

// sgdSIMD does SGD's whole blocks of 8 with AVX2 and returns how many values it did.
func sgdSIMD(w, g, v []float32, lr, momentum, wd float32, nesterov bool) int {
	n := len(w) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = g[n-1]
	var vp *float32
	if momentum != 0 {
		_ = v[n-1]
		vp = &v[0]
	}
	sgdAVX2(&w[0], &g[0], vp, n, lr, momentum, wd, nesterov)
	return n
}
