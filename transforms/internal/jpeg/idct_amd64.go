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

// idctSIMD runs the AVX2 IDCT (on b transposed if transposed is set) and reports true, or
// reports false without AVX2.
func idctSIMD(dst []byte, stride int, b *block, transposed bool) bool {
	if !avx2 {
		return false
	}
	_ = dst[7*stride+7]
	if transposed {
		idctAVX2T(&dst[0], stride, b)
	} else {
		idctAVX2(&dst[0], stride, b)
	}
	return true
}
