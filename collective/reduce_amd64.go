//go:build amd64 && !noasm

package collective

import "golang.org/x/sys/cpu"

var haveAVX2 = cpu.X86.HasAVX2

// addF32AVX2 adds src[0:n] into dst[0:n]; n is a multiple of 32.
//
//go:noescape
func addF32AVX2(dst, src *float32, n int)
