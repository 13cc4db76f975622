package kernels

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/half"
	"github.com/stoke-ml/stoke/kernels/internal/cpu"
)

func init() {
	Register("cpu", func(gpu.Device) (Ops, error) { return cpuOps{}, nil })
}

// CPU returns the CPU op set: each op is a host function enqueued on the stream, running over the
// Go memory behind CPU-backend buffers (gpu.HostBytes). Large ops split their work into a fixed
// number of parts run in parallel; the parts never depend on the number of cores, so results are
// bit-for-bit repeatable.
func CPU() Ops { return withChecks(cpuOps{}) }

// cpuOps runs the ops on arguments that passed the checks of check.go; what is left to check here
// is whether each buffer is CPU-backend memory. A reduced prec emulates that precision in the
// products (see ForPrecision).
type cpuOps struct{ prec Precision }

// WithPrecision is the CPU op set emulating p in its products (see ForPrecision).
func (cpuOps) WithPrecision(p Precision) (Ops, error) { return cpuOps{prec: p}, nil }

var _ MixedPrecision = cpuOps{}

// operands returns the products' operands as prec rounds them: v itself in fp32.
func (o cpuOps) operands(v []float32) []float32 {
	if !o.prec.reduced() {
		return v
	}
	return o.prec.rounded(v)
}

var _ Ops = cpuOps{}

func (cpuOps) Backend() string { return "cpu" }

// hostF32 resolves a view (empty, or inside its buffer: check.go) to its Go memory.
func hostF32(op, name string, v F32) ([]float32, error) {
	if v.Len == 0 {
		return nil, nil
	}
	b, err := hostRange(op, name, v.Buf, v.Off*4, v.Len*4)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), v.Len), nil
}

func hostI32(op, name string, v I32) ([]int32, error) {
	if v.Len == 0 {
		return nil, nil
	}
	b, err := hostRange(op, name, v.Buf, v.Off*4, v.Len*4)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(b))), v.Len), nil
}

func hostU8(op, name string, v U8) ([]uint8, error) {
	if v.Len == 0 {
		return nil, nil
	}
	return hostRange(op, name, v.Buf, v.Off, v.Len)
}

func hostRange(op, name string, buf gpu.Buffer, off, n int) ([]byte, error) {
	b, ok := gpu.HostBytes(buf)
	if !ok {
		return nil, fmt.Errorf("kernels: %w: %s: %s is not CPU-backend memory", ErrBuffer, op, name)
	}
	return b[off : off+n : off+n], nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (cpuOps) Fill(s gpu.Stream, x F32, v float32) error {
	xs, err := hostF32("fill", "x", x)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.Fill(xs, v); return nil })
}

func (cpuOps) Copy(s gpu.Stream, dst, src F32) error {
	d, e1 := hostF32("copy", "dst", dst)
	x, e2 := hostF32("copy", "src", src)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { copy(d, x); return nil })
}

func (cpuOps) Axpy(s gpu.Stream, y F32, alpha float32, x F32) error {
	ys, e1 := hostF32("axpy", "y", y)
	xs, e2 := hostF32("axpy", "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Axpy(ys, alpha, xs); return nil })
}

func (cpuOps) Scale(s gpu.Stream, x F32, alpha float32) error {
	xs, err := hostF32("scale", "x", x)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.Scale(xs, alpha); return nil })
}

func (cpuOps) Mul(s gpu.Stream, z, x, y F32) error {
	zs, e1 := hostF32("mul", "z", z)
	xs, e2 := hostF32("mul", "x", x)
	ys, e3 := hostF32("mul", "y", y)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Mul(zs, xs, ys); return nil })
}

func (o cpuOps) Gemm(s gpu.Stream, transA, transB bool, m, n, k int, alpha float32, a, b F32, beta float32, c F32) error {
	as, e1 := hostF32("gemm", "a", a)
	bs, e2 := hostF32("gemm", "b", b)
	cs, e3 := hostF32("gemm", "c", c)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.Gemm(transA, transB, m, n, k, alpha, o.operands(as), o.operands(bs), beta, cs)
		return nil
	})
}

func (cpuOps) BiasAdd(s gpu.Stream, x, bias F32, outer, inner int) error {
	xs, e1 := hostF32("bias add", "x", x)
	bs, e2 := hostF32("bias add", "bias", bias)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.BiasAdd(xs, bs, outer, inner); return nil })
}

func (cpuOps) BiasGrad(s gpu.Stream, dbias, dy F32, outer, inner int) error {
	db, e1 := hostF32("bias grad", "dbias", dbias)
	d, e2 := hostF32("bias grad", "dy", dy)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.BiasGrad(db, d, outer, inner); return nil })
}

func (cpuOps) ReLU(s gpu.Stream, y, x F32) error {
	ys, e1 := hostF32("relu", "y", y)
	xs, e2 := hostF32("relu", "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.ReLU(ys, xs); return nil })
}

func (cpuOps) ReLUGrad(s gpu.Stream, dx, dy, y F32) error {
	dxs, e1 := hostF32("relu grad", "dx", dx)
	dys, e2 := hostF32("relu grad", "dy", dy)
	ys, e3 := hostF32("relu grad", "y", y)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.ReLUGrad(dxs, dys, ys); return nil })
}

func (cpuOps) SoftmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int) error {
	return softmaxCrossEntropy(s, loss, dlogits, logits, labels, n, classes, 0)
}

func (cpuOps) SoftmaxCrossEntropySmooth(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error {
	return softmaxCrossEntropy(s, loss, dlogits, logits, labels, n, classes, smoothing)
}

func softmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error {
	const op = "softmax cross-entropy"
	ls, e1 := hostF32(op, "loss", loss)
	ds, e2 := hostF32(op, "dlogits", dlogits)
	xs, e3 := hostF32(op, "logits", logits)
	ys, e4 := hostI32(op, "labels", labels)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	return s.Host(func() error {
		if n == 0 {
			ls[0] = 0
			return nil
		}
		l, bad := cpu.SoftmaxCrossEntropy(ds, xs, ys, n, classes, smoothing)
		if bad >= 0 {
			return fmt.Errorf("kernels: %w: %s: sample %d of the batch has label %d; want [0,%d)", ErrLabel, op, bad, ys[bad], classes)
		}
		ls[0] = float32(l)
		return nil
	})
}

func (cpuOps) FloatLoss(s gpu.Stream, loss, dpred, pred, target, posWeight F32, n, dim int, l Loss) error {
	const op = "float loss"
	ls, e1 := hostF32(op, "loss", loss)
	ds, e2 := hostF32(op, "dpred", dpred)
	xs, e3 := hostF32(op, "pred", pred)
	ts, e4 := hostF32(op, "target", target)
	var pw []float32
	var e5 error
	if posWeight.Len != 0 {
		pw, e5 = hostF32(op, "posWeight", posWeight)
	}
	if err := firstErr(e1, e2, e3, e4, e5); err != nil {
		return err
	}
	return s.Host(func() error {
		ls[0] = float32(cpu.FloatLoss(ds, xs, ts, pw, n, dim, int(l.Kind), l.Beta))
		return nil
	})
}

func (cpuOps) Argmax(s gpu.Stream, dst I32, logits F32, n, classes int) error {
	ds, e1 := hostI32("argmax", "dst", dst)
	xs, e2 := hostF32("argmax", "logits", logits)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Argmax(ds, xs, n, classes); return nil })
}

func (cpuOps) CountCorrect(s gpu.Stream, count I32, logits F32, labels I32, n, classes int) error {
	const op = "count correct"
	cs, e1 := hostI32(op, "count", count)
	xs, e2 := hostF32(op, "logits", logits)
	ys, e3 := hostI32(op, "labels", labels)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error {
		for i, l := range ys {
			if l < 0 || int(l) >= classes {
				return fmt.Errorf("kernels: %w: %s: sample %d of the batch has label %d; want [0,%d)", ErrLabel, op, i, l, classes)
			}
		}
		cs[0] += cpu.Correct(xs, ys, n, classes)
		return nil
	})
}

func (cpuOps) CountNonFinite(s gpu.Stream, count I32, x F32) error {
	const op = "count non-finite"
	cs, e1 := hostI32(op, "count", count)
	xs, e2 := hostF32(op, "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error {
		var bad int32
		for _, v := range xs {
			if v-v != 0 { // Inf - Inf and NaN - NaN are NaN
				bad++
			}
		}
		cs[0] += bad
		return nil
	})
}

func convGeom(g Conv2D) cpu.ConvGeom {
	return cpu.ConvGeom{N: g.N, InC: g.InC, InH: g.InH, InW: g.InW, OutC: g.OutC, KH: g.KH, KW: g.KW, Stride: g.stride(), Pad: g.Pad}
}

func (o cpuOps) Conv2D(s gpu.Stream, y, x, w, bias, ws F32, g Conv2D) error {
	const op = "conv2d"
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	wv, e3 := hostF32(op, "w", w)
	bs, e4 := hostF32(op, "bias", bias)
	wsv, e5 := hostF32(op, "workspace", ws)
	if err := firstErr(e1, e2, e3, e4, e5); err != nil {
		return err
	}
	cg := convGeom(g)
	// Rounding x before im2col is rounding the columns: im2col copies elements and pads with 0.
	return s.Host(func() error { cpu.Conv2D(ys, o.operands(xs), o.operands(wv), bs, wsv, cg); return nil })
}

func (o cpuOps) Conv2DBackward(s gpu.Stream, dx, dw, dbias, dy, w, ws F32, g Conv2D) error {
	const op = "conv2d backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dws, e2 := hostF32(op, "dw", dw)
	dbs, e3 := hostF32(op, "dbias", dbias)
	dys, e4 := hostF32(op, "dy", dy)
	wv, e5 := hostF32(op, "w", w)
	wsv, e6 := hostF32(op, "workspace", ws)
	if err := firstErr(e1, e2, e3, e4, e5, e6); err != nil {
		return err
	}
	cg := convGeom(g)
	// The workspace holds the columns of the rounded input; the bias gradient sums the fp32 dy.
	return s.Host(func() error {
		if !o.prec.reduced() {
			cpu.Conv2DBackward(dxs, dws, dbs, dys, wv, wsv, cg)
			return nil
		}
		cpu.Conv2DBackward(dxs, dws, nil, o.operands(dys), o.operands(wv), wsv, cg)
		if dbs != nil {
			cpu.BiasGrad(dbs, dys, cg.N, cg.OutH()*cg.OutW())
		}
		return nil
	})
}

func depthwiseGeom(g Depthwise2D) cpu.DepthwiseGeom {
	return cpu.DepthwiseGeom{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, Stride: g.stride(), Pad: g.Pad}
}

func (cpuOps) DepthwiseConv2D(s gpu.Stream, y, x, w, bias F32, g Depthwise2D) error {
	const op = "depthwise conv2d"
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	wv, e3 := hostF32(op, "w", w)
	bs, e4 := hostF32(op, "bias", bias)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	dg := depthwiseGeom(g)
	return s.Host(func() error { cpu.DepthwiseConv2D(ys, xs, wv, bs, dg); return nil })
}

func (cpuOps) DepthwiseConv2DBackward(s gpu.Stream, dx, dw, dbias, dy, x, w F32, g Depthwise2D) error {
	const op = "depthwise conv2d backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dws, e2 := hostF32(op, "dw", dw)
	dbs, e3 := hostF32(op, "dbias", dbias)
	dys, e4 := hostF32(op, "dy", dy)
	xs, e5 := hostF32(op, "x", x)
	wv, e6 := hostF32(op, "w", w)
	if err := firstErr(e1, e2, e3, e4, e5, e6); err != nil {
		return err
	}
	dg := depthwiseGeom(g)
	return s.Host(func() error { cpu.DepthwiseConv2DBackward(dxs, dws, dbs, dys, xs, wv, dg); return nil })
}

func poolGeom(g Pool2D) cpu.PoolGeom {
	return cpu.PoolGeom{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, Stride: g.stride(), Pad: g.Pad}
}

func (cpuOps) MaxPool2D(s gpu.Stream, y F32, arg I32, x F32, g Pool2D) error {
	const op = "maxpool2d"
	ys, e1 := hostF32(op, "y", y)
	as, e2 := hostI32(op, "arg", arg)
	xs, e3 := hostF32(op, "x", x)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	pg := poolGeom(g)
	return s.Host(func() error { cpu.MaxPool2D(ys, as, xs, pg); return nil })
}

func (cpuOps) MaxPool2DBackward(s gpu.Stream, dx, dy F32, arg I32, g Pool2D) error {
	const op = "maxpool2d backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	as, e3 := hostI32(op, "arg", arg)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	pg := poolGeom(g)
	return s.Host(func() error { cpu.MaxPool2DBackward(dxs, dys, as, pg); return nil })
}

func (cpuOps) Dropout(s gpu.Stream, y, mask, x F32, p float32, seed uint64) error {
	const op = "dropout"
	ys, e1 := hostF32(op, "y", y)
	ms, e2 := hostF32(op, "mask", mask)
	xs, e3 := hostF32(op, "x", x)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Dropout(ys, ms, xs, p, seed); return nil })
}

func (cpuOps) NormalizeU8(s gpu.Stream, dst F32, src U8, channels, inner int, mean, std []float32) error {
	const op = "normalize u8"
	ds, e1 := hostF32(op, "dst", dst)
	ss, e2 := hostU8(op, "src", src)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	m, sd := append([]float32(nil), mean...), append([]float32(nil), std...)
	return s.Host(func() error { cpu.NormalizeU8(ds, ss, channels, inner, m, sd); return nil })
}

func (cpuOps) SGDStep(s gpu.Stream, w, g, v F32, p SGD) error {
	const op = "sgd"
	ws, e1 := hostF32(op, "w", w)
	gs, e2 := hostF32(op, "g", g)
	vs, e3 := hostF32(op, "v", v)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.SGD(ws, gs, vs, p.LR, p.Momentum, p.WeightDecay, p.Nesterov); return nil })
}

func (cpuOps) AdamWStep(s gpu.Stream, w, g, m, v, vmax F32, p AdamW) error {
	const op = "adamw"
	ws, e1 := hostF32(op, "w", w)
	gs, e2 := hostF32(op, "g", g)
	ms, e3 := hostF32(op, "m", m)
	vs, e4 := hostF32(op, "v", v)
	vms, e5 := hostF32(op, "vmax", vmax)
	if err := firstErr(e1, e2, e3, e4, e5); err != nil {
		return err
	}
	if !p.AMSGrad {
		vms = nil
	}
	return s.Host(func() error {
		cpu.AdamW(ws, gs, ms, vs, vms, p.LR, p.Beta1, p.Beta2, p.Eps, p.WeightDecay, p.Step)
		return nil
	})
}

func (cpuOps) RMSpropStep(s gpu.Stream, w, g, sq, b, ga F32, p RMSprop) error {
	const op = "rmsprop"
	ws, e1 := hostF32(op, "w", w)
	gs, e2 := hostF32(op, "g", g)
	sqs, e3 := hostF32(op, "sq", sq)
	bs, e4 := hostF32(op, "b", b)
	gas, e5 := hostF32(op, "ga", ga)
	if err := firstErr(e1, e2, e3, e4, e5); err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.RMSprop(ws, gs, sqs, bs, gas, p.LR, p.Alpha, p.Eps, p.WeightDecay, p.Momentum, p.Centered)
		return nil
	})
}

func (cpuOps) Add(s gpu.Stream, z, x, y F32) error {
	zs, e1 := hostF32("add", "z", z)
	xs, e2 := hostF32("add", "x", x)
	ys, e3 := hostF32("add", "y", y)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Add(zs, xs, ys); return nil })
}

// bnViews resolves the views of a batch or layer norm (an empty one resolves to nil: skipped).
func bnViews(op string, names []string, views ...F32) ([][]float32, error) {
	out := make([][]float32, len(views))
	for i, v := range views {
		var err error
		if out[i], err = hostF32(op, names[i], v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func bnGeom(g BatchNorm) cpu.BNGeom { return cpu.BNGeom{N: g.N, C: g.C, HW: g.HW} }

func (cpuOps) BatchNormTrain(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32, g BatchNorm) error {
	v, err := bnViews("batch norm", []string{"y", "x", "gamma", "beta", "running mean", "running var", "saved mean", "saved inverse std"},
		y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		if g.N > 0 {
			cpu.BatchNormTrain(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], bnGeom(g), g.Momentum, g.Eps)
		}
		return nil
	})
}

func (cpuOps) BatchNormEval(s gpu.Stream, y, x, gamma, beta, runMean, runVar F32, g BatchNorm) error {
	v, err := bnViews("batch norm eval", []string{"y", "x", "gamma", "beta", "running mean", "running var"}, y, x, gamma, beta, runMean, runVar)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.BatchNormEval(v[0], v[1], v[2], v[3], v[4], v[5], bnGeom(g), g.Eps); return nil })
}

func (cpuOps) BatchNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd F32, g BatchNorm) error {
	v, err := bnViews("batch norm backward", []string{"dx", "dy", "x", "dgamma", "dbeta", "gamma", "saved mean", "saved inverse std"},
		dx, dy, x, dgamma, dbeta, gamma, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		if g.N > 0 {
			cpu.BatchNormBackward(v[0], v[3], v[4], v[1], v[2], v[5], v[6], v[7], bnGeom(g))
		}
		return nil
	})
}

func (cpuOps) BatchNormStats(s gpu.Stream, stats, x F32, g BatchNorm) error {
	v, err := bnViews("batch norm stats", []string{"stats", "x"}, stats, x)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.BatchNormStats(v[0], v[1], bnGeom(g)); return nil })
}

func (cpuOps) BatchNormTrainStats(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats F32, g BatchNorm) error {
	v, err := bnViews("batch norm over gathered stats",
		[]string{"y", "x", "gamma", "beta", "running mean", "running var", "saved mean", "saved inverse std", "stats"},
		y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.BatchNormTrainStats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], bnGeom(g), g.Momentum, g.Eps)
		return nil
	})
}

func (cpuOps) BatchNormBackwardInput(s gpu.Stream, dx, dy, x, gamma, saveMean, saveInvStd, sums F32, g BatchNorm) error {
	v, err := bnViews("batch norm input gradient", []string{"dx", "dy", "x", "gamma", "saved mean", "saved inverse std", "sums"},
		dx, dy, x, gamma, saveMean, saveInvStd, sums)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.BatchNormBackwardInput(v[0], v[1], v[2], v[3], v[4], v[5], v[6], bnGeom(g))
		return nil
	})
}

func (cpuOps) ToBF16(s gpu.Stream, dst U8, src F32) error {
	return to16(s, "to bf16", dst, src, half.F32ToBF16)
}

func (cpuOps) FromBF16(s gpu.Stream, dst F32, src U8) error {
	return from16(s, "from bf16", dst, src, half.BF16ToF32)
}

func (cpuOps) ToFP16(s gpu.Stream, dst U8, src F32) error {
	return to16(s, "to fp16", dst, src, half.F32ToFP16)
}

func (cpuOps) FromFP16(s gpu.Stream, dst F32, src U8) error {
	return from16(s, "from fp16", dst, src, half.FP16ToF32)
}

// to16 writes src rounded by round into dst, 2 bytes little-endian per value.
func to16(s gpu.Stream, op string, dst U8, src F32, round func(float32) uint16) error {
	ds, e1 := hostU8(op, "dst", dst)
	ss, e2 := hostF32(op, "src", src)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error {
		for i, f := range ss {
			binary.LittleEndian.PutUint16(ds[2*i:], round(f))
		}
		return nil
	})
}

// from16 widens the 16-bit values of src into dst.
func from16(s gpu.Stream, op string, dst F32, src U8, widen func(uint16) float32) error {
	ds, e1 := hostF32(op, "dst", dst)
	ss, e2 := hostU8(op, "src", src)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error {
		for i := range ds {
			ds[i] = widen(binary.LittleEndian.Uint16(ss[2*i:]))
		}
		return nil
	})
}

func (cpuOps) GlobalAvgPool(s gpu.Stream, y, x F32, inner int) error {
	const op = "global average pool"
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.GlobalAvgPool(ys, xs, inner); return nil })
}

func (cpuOps) GlobalAvgPoolBackward(s gpu.Stream, dx, dy F32, inner int) error {
	const op = "global average pool backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.GlobalAvgPoolBackward(dxs, dys, inner); return nil })
}

// cpuUnary and cpuBinary map the functions to the CPU kernels' (valid ones: check.go).
var (
	cpuUnary = [...]cpu.UnaryOp{Exp: cpu.FExp, Log: cpu.FLog, Sqrt: cpu.FSqrt, Rsqrt: cpu.FRsqrt, Sigmoid: cpu.FSigmoid,
		Tanh: cpu.FTanh, GELU: cpu.FGELU, GELUTanh: cpu.FGELUTanh, SiLU: cpu.FSiLU, Hardswish: cpu.FHardswish,
		Hardsigmoid: cpu.FHardsigmoid, ReLU6: cpu.FReLU6}
	cpuBinary = [...]cpu.BinaryOp{BinaryAdd: cpu.BinAdd, BinarySub: cpu.BinSub, BinaryMul: cpu.BinMul, BinaryDiv: cpu.BinDiv}
)

func (cpuOps) Unary(s gpu.Stream, f UnaryFunc, y, x F32) error {
	ys, e1 := hostF32("unary", "y", y)
	xs, e2 := hostF32("unary", "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	uf := cpuUnary[f]
	return s.Host(func() error { cpu.Unary(uf, ys, xs); return nil })
}

func (cpuOps) UnaryGrad(s gpu.Stream, f UnaryFunc, dx, dy, x F32) error {
	const op = "unary grad"
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	xs, e3 := hostF32(op, "x", x)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	uf := cpuUnary[f]
	return s.Host(func() error { cpu.UnaryGrad(uf, dxs, dys, xs); return nil })
}

func (cpuOps) Binary(s gpu.Stream, f BinaryFunc, z, x, y F32, shape, xStrides, yStrides []int) error {
	zs, e1 := hostF32("binary", "z", z)
	xs, e2 := hostF32("binary", "x", x)
	ys, e3 := hostF32("binary", "y", y)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	l, bf := cpu.NewLayout(shape, cpu.Packed(shape), xStrides, yStrides), cpuBinary[f]
	return s.Host(func() error { cpu.Binary(bf, zs, xs, ys, l); return nil })
}

func (cpuOps) SumTo(s gpu.Stream, y, x F32, shape, keep []int) error {
	ys, e1 := hostF32("sum to", "y", y)
	xs, e2 := hostF32("sum to", "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	yStrides := cpu.Packed(keep)
	for d := range keep {
		if keep[d] != shape[d] {
			yStrides[d] = 0 // summed
		}
	}
	l := cpu.NewLayout(shape, cpu.Packed(shape), yStrides)
	return s.Host(func() error { cpu.SumTo(ys, xs, l); return nil })
}

func (cpuOps) CopyStrided(s gpu.Stream, dst F32, dstStrides []int, src F32, srcStrides []int, shape []int) error {
	ds, e1 := hostF32("copy strided", "dst", dst)
	ss, e2 := hostF32("copy strided", "src", src)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	l := cpu.NewLayout(shape, dstStrides, srcStrides)
	return s.Host(func() error { cpu.CopyStrided(ds, ss, l); return nil })
}

func (cpuOps) Softmax(s gpu.Stream, y, x F32, rows, cols int) error {
	ys, e1 := hostF32("softmax", "y", y)
	xs, e2 := hostF32("softmax", "x", x)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { cpu.Softmax(ys, xs, rows, cols); return nil })
}

func (cpuOps) SoftmaxBackward(s gpu.Stream, dx, dy, y F32, rows, cols int) error {
	const op = "softmax backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	ys, e3 := hostF32(op, "y", y)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error { cpu.SoftmaxBackward(dxs, dys, ys, rows, cols); return nil })
}

func (cpuOps) LayerNorm(s gpu.Stream, y, mean, rstd, x, gamma, beta F32, rows, cols int, eps float32) error {
	v, err := bnViews("layer norm", []string{"y", "mean", "rstd", "x", "gamma", "beta"}, y, mean, rstd, x, gamma, beta)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.LayerNorm(v[0], v[1], v[2], v[3], v[4], v[5], rows, cols, eps); return nil })
}

func (cpuOps) LayerNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd F32, rows, cols int) error {
	v, err := bnViews("layer norm backward", []string{"dx", "dgamma", "dbeta", "dy", "x", "gamma", "mean", "rstd"},
		dx, dgamma, dbeta, dy, x, gamma, mean, rstd)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.LayerNormBackward(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], rows, cols)
		return nil
	})
}

func (o cpuOps) GemmStrided(s gpu.Stream, transA, transB bool, batch, m, n, k int, alpha float32, a F32, strideA int, b F32, strideB int, beta float32, c F32, strideC int) error {
	const op = "gemm strided"
	as, e1 := hostF32(op, "a", a)
	bs, e2 := hostF32(op, "b", b)
	cs, e3 := hostF32(op, "c", c)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.GemmStrided(transA, transB, batch, m, n, k, alpha, o.operands(as), strideA, o.operands(bs), strideB, beta, cs, strideC)
		return nil
	})
}

func attnGeom(g Attention) cpu.AttnGeom {
	return cpu.AttnGeom{Batch: g.Batch, LQ: g.LQ, LK: g.LK, D: g.D, Scale: g.Scale}
}

func (cpuOps) Attention(s gpu.Stream, y, lse, q, k, v F32, g Attention) error {
	vs, err := bnViews("attention", []string{"y", "lse", "q", "k", "v"}, y, lse, q, k, v)
	if err != nil {
		return err
	}
	return s.Host(func() error { cpu.Attention(vs[0], vs[1], vs[2], vs[3], vs[4], attnGeom(g)); return nil })
}

func (cpuOps) AttentionBackward(s gpu.Stream, dq, dk, dv, dy, q, k, v, y, lse F32, g Attention) error {
	vs, err := bnViews("attention backward", []string{"dq", "dk", "dv", "dy", "q", "k", "v", "y", "lse"}, dq, dk, dv, dy, q, k, v, y, lse)
	if err != nil {
		return err
	}
	return s.Host(func() error {
		cpu.AttentionBackward(vs[0], vs[1], vs[2], vs[3], vs[4], vs[5], vs[6], vs[7], vs[8], attnGeom(g))
		return nil
	})
}
