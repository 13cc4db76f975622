//go:build !amd64 || noasm

package gemm

// supported lists the kernels this CPU can run, the fastest first.
var supported = []*kernel{generic}

func selectKernel() *kernel { return supported[0] }

// transpose8 is nil: Transpose moves every element in Go.
var transpose8 func(dst, src *float32, ld, n8, nr int)
