//go:build cuda

package kernels

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
)

// withPrecision is the op set of the same device computing its products in p (see ForPrecision):
// it shares the module, the cuBLAS handle and the mapped host slots.
func (o *cudaOps) withPrecision(p Precision) Ops {
	c := *o
	c.prec = p
	return &c
}

// fp16Arg is the fp16 argument of the conversion kernels: 1 for fp16, 0 for bf16.
func (o *cudaOps) fp16Arg() uint64 {
	if o.prec == FP16 {
		return 1
	}
	return 0
}

// align16 rounds a count of 16-bit elements up to 16 bytes, where cuBLAS's fastest 16-bit paths
// want their operands to start.
func align16(n int) int { return (n + 7) &^ 7 }

// staging is 16-bit device memory for one op's converted operands, taken from the device's cache
// of blocks when the op is enqueued and handed back by a host function after the op's last use
// (unstage), so concurrent streams never share it.
type staging struct {
	buf gpu.Buffer
	p   cu.DevicePtr
}

func (o *cudaOps) stage(n int) (staging, error) {
	buf, err := o.dev.Alloc(2 * n)
	if err != nil {
		return staging{}, fmt.Errorf("kernels: cuda: %s operands: %w", o.prec, err)
	}
	p, err := gpu.CUDAPointer(buf)
	if err != nil {
		return staging{}, errors.Join(fmt.Errorf("kernels: cuda: %s operands: %w", o.prec, err), buf.Free())
	}
	return staging{buf, p}, nil
}

// at is the address of 16-bit element i.
func (st staging) at(i int) cu.DevicePtr { return st.p + cu.DevicePtr(2*i) }

// unstage enqueues the release of st (none: nothing) after the work enqueued so far, also when
// err says that the op stopped halfway, and returns err joined with any enqueue error. After a
// sticky stream error the host function does not run and the block stays with the device until it
// closes.
func (o *cudaOps) unstage(gs gpu.Stream, st staging, err error) error {
	if st.buf == nil {
		return err
	}
	return errors.Join(err, gs.Host(st.buf.Free))
}

// toHalf converts n floats at src to the op set's 16-bit precision at dst.
func (o *cudaOps) toHalf(s cu.Stream, dst, src cu.DevicePtr, n int) error {
	return o.launchN(s, "to_x16", n, parg(dst), parg(src), iarg(n), o.fp16Arg())
}
