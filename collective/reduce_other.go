//go:build !amd64 || noasm

package collective

const haveAVX2 = false

func addF32AVX2(dst, src *float32, n int) { panic("collective: no AVX2 kernel in this build") }
