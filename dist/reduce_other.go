//go:build !amd64 || noasm

package dist

const haveAVX2 = false

func addF32AVX2(dst, src *float32, n int) { panic("dist: no AVX2 kernel in this build") }
