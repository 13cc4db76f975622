package kernels

import (
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/half"
)

// Precision is the arithmetic of an op set's products: Gemm, GemmStrided, Conv2D and
// Conv2DBackward. With BF16 or FP16 their operands (matrices, the convolution's input columns,
// weights and output gradients) are rounded to 16 bits, to the nearest value with ties to even,
// and multiplied with fp32 accumulation into fp32 results, as PyTorch's autocast does; every
// other op, the weights and the optimizer state stay fp32. FP16 overflows past 65504 (the rounded operand becomes ±Inf),
// which is why fp16 training needs loss scaling (see train.Config.Precision); BF16 has fp32's
// range.
type Precision string

// The precisions ForPrecision takes.
const (
	FP32 Precision = "fp32"
	BF16 Precision = "bf16"
	FP16 Precision = "fp16"
)

// ForPrecision returns dev's op set computing its products in p (For(dev) for FP32). The CUDA op
// set converts the operands into 16-bit device memory of its own, one block per stream reused by
// every product on it, and multiplies them with cuBLAS's mixed-precision GEMM (cublasGemmEx, fp32
// compute and output). The CPU op set has no 16-bit arithmetic: it emulates p by rounding the
// operands to p's values and multiplying them in fp32, which gives the numbers of a p run (up to
// the order of the sums) at somewhat more than fp32's cost.
//
// A convolution's workspace holds what the forward pass of one precision leaves for the backward
// pass of the same precision: run both through the same op set.
func ForPrecision(dev gpu.Device, p Precision) (Ops, error) {
	if p != FP32 && p != BF16 && p != FP16 {
		return nil, fmt.Errorf("kernels: %w: precision %q; want fp32, bf16 or fp16", ErrArgument, p)
	}
	ops, err := For(dev)
	if err != nil || p == FP32 {
		return ops, err
	}
	mp, ok := ops.(checked).b.(MixedPrecision)
	if !ok {
		return nil, fmt.Errorf("kernels: %w: the %s op set computes in fp32 only, not %s", ErrNoBackend, ops.Backend(), p)
	}
	o, err := mp.WithPrecision(p)
	if err != nil {
		return nil, fmt.Errorf("kernels: the %s op set in %s: %w", dev.Info().Backend, p, err)
	}
	if o == nil {
		return nil, fmt.Errorf("kernels: %w: the %s op set in %s: WithPrecision returned no op set", ErrNoBackend, dev.Info().Backend, p)
	}
	return withChecks(o), nil
}

// MixedPrecision is implemented by an op set that can compute its products in BF16 or FP16, as
// ForPrecision describes; ForPrecision asks the op set a backend's Factory made for the device.
type MixedPrecision interface {
	// WithPrecision returns the op set of the same device computing its products in p (BF16 or
	// FP16; never FP32), or an error saying why it cannot (one of the two, say).
	WithPrecision(p Precision) (Ops, error)
}

// reduced reports whether p rounds the products' operands.
func (p Precision) reduced() bool { return p == BF16 || p == FP16 }

// Round returns f rounded to the nearest value of p, ties to even, as the conversion kernels of
// the CUDA op set (gpu/cuda/ops.cu) and the GPU's own conversions do: NaN stays NaN, an fp16 value
// of magnitude 65520 or more becomes ±Inf, and FP32 returns f.
func (p Precision) Round(f float32) float32 {
	if f != f { // NaN
		return f
	}
	switch p {
	case BF16:
		return half.BF16ToF32(half.F32ToBF16(f))
	case FP16:
		return half.FP16ToF32(half.F32ToFP16(f))
	}
	return f
}

// rounded returns a copy of v with every element rounded to p.
func (p Precision) rounded(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = p.Round(f)
	}
	return out
}
