//go:build !amd64 || noasm

package gemm

// supported lists the kernels this CPU can run, the fastest first.
var supported = []*kernel{generic}

func selectKernel() *kernel { return supported[0] }
