package kernels

// Round exposes Precision.round to the tests of package kernels_test.
func (p Precision) Round(f float32) float32 { return p.round(f) }
