//go:build !noasm

package cpu

import "testing"

// poolPaths lists the pooling paths this CPU runs (AVX-512 planes, AVX2 rows, the Go loop), each
// with the function that selects it; the test's end restores the detected selection.
func poolPaths(t *testing.T) []poolPath {
	avx512, avx2 := poolAVX512, hasAVX2
	t.Cleanup(func() { poolAVX512, hasAVX2 = avx512, avx2 })
	var paths []poolPath
	if avx512 {
		paths = append(paths, poolPath{"avx512", func() { poolAVX512, hasAVX2 = true, avx2 }})
	}
	if avx2 {
		paths = append(paths, poolPath{"avx2", func() { poolAVX512, hasAVX2 = false, true }})
	}
	return append(paths, poolPath{"go", func() { poolAVX512, hasAVX2 = false, false }})
}
