//go:build !noasm

package jpeg

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestIDCTSparseMatchesGo checks that the zig-zag indices up to last4x4 are exactly the top-left
// 4x4's first ten, and compares idctSIMD on transposed blocks with the Go IDCT byte for byte:
// blocks whose coefficients lie there (idctAVX2T4) and blocks with one more (idctAVX2T), with
// photo-like, large (clipping) and arbitrary int32 values.
func TestIDCTSparseMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no AVX2")
	}
	for z := range blockSize {
		in4x4 := unzig[z]/8 < 4 && unzig[z]%8 < 4
		if z <= last4x4 && !in4x4 {
			t.Fatalf("zig-zag index %d (natural %d) is outside the top-left 4x4", z, unzig[z])
		}
		if z == last4x4+1 && in4x4 {
			t.Fatalf("last4x4 = %d is not the last: index %d is in the 4x4 too", last4x4, z)
		}
	}
	rnd := rand.New(rand.NewPCG(7, 8))
	const stride = 13
	for trial := range 20000 {
		var b block
		last := 1 + rnd.IntN(last4x4+1) // up to last4x4+1: the first index the sparse IDCT must not take
		for z := range last + 1 {
			var v int32
			switch trial % 3 {
			case 0:
				v = int32(rnd.IntN(1024)) - 512
			case 1:
				v = int32(rnd.IntN(1<<16)) - 1<<15
			default:
				v = int32(rnd.Uint32())
			}
			if z == 0 || z == last || rnd.IntN(2) == 0 {
				b[unzig[z]] = v
			}
		}
		want := make([]byte, 8*stride)
		wb := b
		idctRows(&wb)
		idctColsStore(want, stride, &wb)
		var bt block
		for i := range 8 {
			for j := range 8 {
				bt[j*8+i] = b[i*8+j]
			}
		}
		got := make([]byte, 8*stride)
		if !idctSIMD(got, stride, &bt, true, int32(last)) {
			t.Fatal("idctSIMD did not run")
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("block %v (last %d):\n got %v\nwant %v", b, last, got, want)
		}
	}
}
