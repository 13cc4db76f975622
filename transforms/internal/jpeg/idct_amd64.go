//go:build !noasm

package jpeg

import "golang.org/x/sys/cpu"

//go:generate sh -c "python3 idct_gen.py > idct_amd64.s"

// avx2 selects idctAVX2 for full-size blocks. Tests switch it off to compare with the Go IDCT;
// build with -tags noasm to leave it out.
var avx2 = cpu.X86.HasAVX2

// idctAVX2 is idctRows(b) then idctColsStore(dst, stride, b), except that b is left as it was.
// dst must hold 7*stride+8 bytes. idctAVX2T is the same for a block stored transposed.
//
//go:noescape
func idctAVX2(dst *byte, stride int, b *block)

//go:noescape
func idctAVX2T(dst *byte, stride int, b *block)

// idctAVX2T4 is idctAVX2T for a block whose coefficients outside the top-left 4x4 are zero.
//
//go:noescape
func idctAVX2T4(dst *byte, stride int, b *block)

// idctSIMD runs the AVX2 IDCT (on b transposed if transposed is set) and reports true, or
// reports false without AVX2. last is the zig-zag index of b's last non-zero coefficient (63
// when unknown): a transposed block with last <= last4x4 goes to the sparse idctAVX2T4.
func idctSIMD(dst []byte, stride int, b *block, transposed bool, last int32) bool {
	if !avx2 {
		return false
	}
	_ = dst[7*stride+7]
	switch {
	case transposed && last <= last4x4:
		idctAVX2T4(&dst[0], stride, b)
	case transposed:
		idctAVX2T(&dst[0], stride, b)
	default:
		idctAVX2(&dst[0], stride, b)
	}
	return true
}

// last4x4 is the last zig-zag index such that it and every index before it lie in the top-left
// 4x4 of a block (unzig[0..9]; unzig[10] is row 4, column 0).
const last4x4 = 9
