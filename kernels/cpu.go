package kernels

import (
	"fmt"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels/internal/cpu"
)

func init() {
	Register("cpu", func(gpu.Device) (Ops, error) { return CPU(), nil })
}

// CPU returns the CPU op set: each op is a host function enqueued on the stream, running over the
// Go memory behind CPU-backend buffers (gpu.HostBytes). Large ops split their work into a fixed
// number of parts run in parallel; the parts never depend on the number of cores, so results are
// bit-for-bit repeatable.
func CPU() Ops { return cpuOps{} }

// cpuOps is the CPU op set; a reduced prec emulates that precision in its products (see
// ForPrecision).
type cpuOps struct{ prec Precision }

func (cpuOps) withPrecision(p Precision) Ops { return cpuOps{prec: p} }

// operands returns the products' operands as prec rounds them: v itself in fp32.
func (o cpuOps) operands(v []float32) []float32 {
	if !o.prec.reduced() {
		return v
	}
	return o.prec.rounded(v)
}

var _ Ops = cpuOps{}

func (cpuOps) Backend() string { return "cpu" }

// hostF32 resolves a view to its Go memory; it checks that the view lies inside the buffer.
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
	if buf == nil {
		return nil, fmt.Errorf("%w: %s: %s has no buffer", ErrArgument, op, name)
	}
	b, ok := gpu.HostBytes(buf)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %s is not CPU-backend memory", ErrBuffer, op, name)
	}
	if off < 0 || n < 0 || off+n > len(b) {
		return nil, fmt.Errorf("%w: %s: %s bytes [%d,%d) outside its buffer of %d bytes", ErrShape, op, name, off, off+n, len(b))
	}
	return b[off : off+n : off+n], nil
}

func wantLen(op, name string, got, want int) error {
	if got != want {
		return fmt.Errorf("%w: %s: %s has %d elements; want %d", ErrShape, op, name, got, want)
	}
	return nil
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

func host(s gpu.Stream, fn func() error) error {
	if s == nil {
		return fmt.Errorf("%w: nil stream", ErrArgument)
	}
	return s.Host(fn)
}

func (cpuOps) Fill(s gpu.Stream, x F32, v float32) error {
	xs, err := hostF32("fill", "x", x)
	if err != nil {
		return err
	}
	return host(s, func() error { cpu.Fill(xs, v); return nil })
}

func (cpuOps) Copy(s gpu.Stream, dst, src F32) error {
	d, e1 := hostF32("copy", "dst", dst)
	x, e2 := hostF32("copy", "src", src)
	if err := firstErr(e1, e2, wantLen("copy", "dst", dst.Len, src.Len)); err != nil {
		return err
	}
	return host(s, func() error { copy(d, x); return nil })
}

func (cpuOps) Axpy(s gpu.Stream, y F32, alpha float32, x F32) error {
	ys, e1 := hostF32("axpy", "y", y)
	xs, e2 := hostF32("axpy", "x", x)
	if err := firstErr(e1, e2, wantLen("axpy", "x", x.Len, y.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.Axpy(ys, alpha, xs); return nil })
}

func (cpuOps) Scale(s gpu.Stream, x F32, alpha float32) error {
	xs, err := hostF32("scale", "x", x)
	if err != nil {
		return err
	}
	return host(s, func() error { cpu.Scale(xs, alpha); return nil })
}

func (cpuOps) Mul(s gpu.Stream, z, x, y F32) error {
	zs, e1 := hostF32("mul", "z", z)
	xs, e2 := hostF32("mul", "x", x)
	ys, e3 := hostF32("mul", "y", y)
	if err := firstErr(e1, e2, e3, wantLen("mul", "x", x.Len, z.Len), wantLen("mul", "y", y.Len, z.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.Mul(zs, xs, ys); return nil })
}

func (o cpuOps) Gemm(s gpu.Stream, transA, transB bool, m, n, k int, alpha float32, a, b F32, beta float32, c F32) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: gemm: m, n, k = %d, %d, %d", ErrArgument, m, n, k)
	}
	as, e1 := hostF32("gemm", "a", a)
	bs, e2 := hostF32("gemm", "b", b)
	cs, e3 := hostF32("gemm", "c", c)
	if err := firstErr(e1, e2, e3, wantLen("gemm", "a", a.Len, m*k), wantLen("gemm", "b", b.Len, k*n), wantLen("gemm", "c", c.Len, m*n)); err != nil {
		return err
	}
	return host(s, func() error {
		cpu.Gemm(transA, transB, m, n, k, alpha, o.operands(as), o.operands(bs), beta, cs)
		return nil
	})
}

func (cpuOps) BiasAdd(s gpu.Stream, x, bias F32, outer, inner int) error {
	xs, e1 := hostF32("bias add", "x", x)
	bs, e2 := hostF32("bias add", "bias", bias)
	if err := firstErr(e1, e2, wantLen("bias add", "x", x.Len, outer*bias.Len*inner)); err != nil {
		return err
	}
	return host(s, func() error { cpu.BiasAdd(xs, bs, outer, inner); return nil })
}

func (cpuOps) BiasGrad(s gpu.Stream, dbias, dy F32, outer, inner int) error {
	db, e1 := hostF32("bias grad", "dbias", dbias)
	d, e2 := hostF32("bias grad", "dy", dy)
	if err := firstErr(e1, e2, wantLen("bias grad", "dy", dy.Len, outer*dbias.Len*inner)); err != nil {
		return err
	}
	return host(s, func() error { cpu.BiasGrad(db, d, outer, inner); return nil })
}

func (cpuOps) ReLU(s gpu.Stream, y, x F32) error {
	ys, e1 := hostF32("relu", "y", y)
	xs, e2 := hostF32("relu", "x", x)
	if err := firstErr(e1, e2, wantLen("relu", "y", y.Len, x.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.ReLU(ys, xs); return nil })
}

func (cpuOps) ReLUGrad(s gpu.Stream, dx, dy, y F32) error {
	dxs, e1 := hostF32("relu grad", "dx", dx)
	dys, e2 := hostF32("relu grad", "dy", dy)
	ys, e3 := hostF32("relu grad", "y", y)
	if err := firstErr(e1, e2, e3, wantLen("relu grad", "dy", dy.Len, dx.Len), wantLen("relu grad", "y", y.Len, dx.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.ReLUGrad(dxs, dys, ys); return nil })
}

func checkClasses(op string, n, classes int) error {
	if n < 0 || classes <= 0 {
		return fmt.Errorf("%w: %s: n = %d, classes = %d", ErrArgument, op, n, classes)
	}
	return nil
}

func (cpuOps) SoftmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int) error {
	return softmaxCrossEntropy(s, loss, dlogits, logits, labels, n, classes, 0)
}

func (cpuOps) SoftmaxCrossEntropySmooth(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error {
	if err := checkSmoothing(smoothing); err != nil {
		return err
	}
	return softmaxCrossEntropy(s, loss, dlogits, logits, labels, n, classes, smoothing)
}

func checkSmoothing(smoothing float32) error {
	if !(smoothing >= 0 && smoothing < 1) {
		return fmt.Errorf("%w: softmax cross-entropy: label smoothing %v; want [0,1)", ErrArgument, smoothing)
	}
	return nil
}

func softmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error {
	const op = "softmax cross-entropy"
	ls, e1 := hostF32(op, "loss", loss)
	ds, e2 := hostF32(op, "dlogits", dlogits)
	xs, e3 := hostF32(op, "logits", logits)
	ys, e4 := hostI32(op, "labels", labels)
	if err := firstErr(checkClasses(op, n, classes), e1, e2, e3, e4, wantLen(op, "loss", loss.Len, 1),
		wantLen(op, "logits", logits.Len, n*classes), wantLen(op, "dlogits", dlogits.Len, n*classes), wantLen(op, "labels", labels.Len, n)); err != nil {
		return err
	}
	return host(s, func() error {
		if n == 0 {
			ls[0] = 0
			return nil
		}
		l, bad := cpu.SoftmaxCrossEntropy(ds, xs, ys, n, classes, smoothing)
		if bad >= 0 {
			return fmt.Errorf("%w: %s: sample %d of the batch has label %d; want [0,%d)", ErrLabel, op, bad, ys[bad], classes)
		}
		ls[0] = float32(l)
		return nil
	})
}

func (cpuOps) Argmax(s gpu.Stream, dst I32, logits F32, n, classes int) error {
	ds, e1 := hostI32("argmax", "dst", dst)
	xs, e2 := hostF32("argmax", "logits", logits)
	if err := firstErr(checkClasses("argmax", n, classes), e1, e2, wantLen("argmax", "dst", dst.Len, n), wantLen("argmax", "logits", logits.Len, n*classes)); err != nil {
		return err
	}
	return host(s, func() error { cpu.Argmax(ds, xs, n, classes); return nil })
}

func (cpuOps) CountCorrect(s gpu.Stream, count I32, logits F32, labels I32, n, classes int) error {
	const op = "count correct"
	cs, e1 := hostI32(op, "count", count)
	xs, e2 := hostF32(op, "logits", logits)
	ys, e3 := hostI32(op, "labels", labels)
	if err := firstErr(checkClasses(op, n, classes), e1, e2, e3, wantLen(op, "count", count.Len, 1),
		wantLen(op, "logits", logits.Len, n*classes), wantLen(op, "labels", labels.Len, n)); err != nil {
		return err
	}
	return host(s, func() error {
		for i, l := range ys {
			if l < 0 || int(l) >= classes {
				return fmt.Errorf("%w: %s: sample %d of the batch has label %d; want [0,%d)", ErrLabel, op, i, l, classes)
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
	if err := firstErr(e1, e2, wantLen(op, "count", count.Len, 1)); err != nil {
		return err
	}
	return host(s, func() error {
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
	if err := g.Validate(); err != nil {
		return err
	}
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	wv, e3 := hostF32(op, "w", w)
	bs, e4 := hostF32(op, "bias", bias)
	wsv, e5 := hostF32(op, "workspace", ws)
	var e6 error
	if bias.Len != 0 {
		e6 = wantLen(op, "bias", bias.Len, g.OutC)
	}
	if err := firstErr(e1, e2, e3, e4, e5, e6, wantLen(op, "y", y.Len, g.OutLen()), wantLen(op, "x", x.Len, g.InLen()),
		wantLen(op, "w", w.Len, g.WeightLen()), wantLen(op, "workspace", ws.Len, g.WorkspaceLen())); err != nil {
		return err
	}
	cg := convGeom(g)
	// Rounding x before im2col is rounding the columns: im2col copies elements and pads with 0.
	return host(s, func() error { cpu.Conv2D(ys, o.operands(xs), o.operands(wv), bs, wsv, cg); return nil })
}

func (o cpuOps) Conv2DBackward(s gpu.Stream, dx, dw, dbias, dy, w, ws F32, g Conv2D) error {
	const op = "conv2d backward"
	if err := g.Validate(); err != nil {
		return err
	}
	dxs, e1 := hostF32(op, "dx", dx)
	dws, e2 := hostF32(op, "dw", dw)
	dbs, e3 := hostF32(op, "dbias", dbias)
	dys, e4 := hostF32(op, "dy", dy)
	wv, e5 := hostF32(op, "w", w)
	wsv, e6 := hostF32(op, "workspace", ws)
	var e7, e8 error
	if dbias.Len != 0 {
		e7 = wantLen(op, "dbias", dbias.Len, g.OutC)
	}
	if dx.Len != 0 {
		e8 = wantLen(op, "dx", dx.Len, g.InLen())
	}
	if err := firstErr(e1, e2, e3, e4, e5, e6, e7, e8, wantLen(op, "dy", dy.Len, g.OutLen()), wantLen(op, "dw", dw.Len, g.WeightLen()),
		wantLen(op, "w", w.Len, g.WeightLen()), wantLen(op, "workspace", ws.Len, g.WorkspaceLen())); err != nil {
		return err
	}
	cg := convGeom(g)
	// The workspace holds the columns of the rounded input; the bias gradient sums the fp32 dy.
	return host(s, func() error {
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

func poolGeom(g Pool2D) cpu.PoolGeom {
	return cpu.PoolGeom{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, Stride: g.stride(), Pad: g.Pad}
}

func (cpuOps) MaxPool2D(s gpu.Stream, y F32, arg I32, x F32, g Pool2D) error {
	const op = "maxpool2d"
	if err := g.Validate(); err != nil {
		return err
	}
	ys, e1 := hostF32(op, "y", y)
	as, e2 := hostI32(op, "arg", arg)
	xs, e3 := hostF32(op, "x", x)
	if err := firstErr(e1, e2, e3, wantLen(op, "y", y.Len, g.OutLen()), wantLen(op, "arg", arg.Len, g.OutLen()), wantLen(op, "x", x.Len, g.InLen())); err != nil {
		return err
	}
	pg := poolGeom(g)
	return host(s, func() error { cpu.MaxPool2D(ys, as, xs, pg); return nil })
}

func (cpuOps) MaxPool2DBackward(s gpu.Stream, dx, dy F32, arg I32, g Pool2D) error {
	const op = "maxpool2d backward"
	if err := g.Validate(); err != nil {
		return err
	}
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	as, e3 := hostI32(op, "arg", arg)
	if err := firstErr(e1, e2, e3, wantLen(op, "dx", dx.Len, g.InLen()), wantLen(op, "dy", dy.Len, g.OutLen()), wantLen(op, "arg", arg.Len, g.OutLen())); err != nil {
		return err
	}
	pg := poolGeom(g)
	return host(s, func() error { cpu.MaxPool2DBackward(dxs, dys, as, pg); return nil })
}

func (cpuOps) Dropout(s gpu.Stream, y, mask, x F32, p float32, seed uint64) error {
	const op = "dropout"
	if !(p >= 0 && p < 1) {
		return fmt.Errorf("%w: %s: p = %v; want [0,1)", ErrArgument, op, p)
	}
	ys, e1 := hostF32(op, "y", y)
	ms, e2 := hostF32(op, "mask", mask)
	xs, e3 := hostF32(op, "x", x)
	if err := firstErr(e1, e2, e3, wantLen(op, "y", y.Len, x.Len), wantLen(op, "mask", mask.Len, x.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.Dropout(ys, ms, xs, p, seed); return nil })
}

func (cpuOps) NormalizeU8(s gpu.Stream, dst F32, src U8, channels, inner int, mean, std []float32) error {
	const op = "normalize u8"
	if channels <= 0 || inner <= 0 || dst.Len%(channels*inner) != 0 {
		return fmt.Errorf("%w: %s: %d elements are not [N][%d][%d]", ErrArgument, op, dst.Len, channels, inner)
	}
	if (len(mean) != 0 && len(mean) != 1 && len(mean) != channels) || (len(std) != 0 && len(std) != 1 && len(std) != channels) {
		return fmt.Errorf("%w: %s: %d means and %d stds for %d channels", ErrArgument, op, len(mean), len(std), channels)
	}
	for _, v := range std {
		if !(v > 0) {
			return fmt.Errorf("%w: %s: std %v; want > 0", ErrArgument, op, v)
		}
	}
	ds, e1 := hostF32(op, "dst", dst)
	ss, e2 := hostU8(op, "src", src)
	if err := firstErr(e1, e2, wantLen(op, "src", src.Len, dst.Len)); err != nil {
		return err
	}
	m, sd := append([]float32(nil), mean...), append([]float32(nil), std...)
	return host(s, func() error { cpu.NormalizeU8(ds, ss, channels, inner, m, sd); return nil })
}

func (cpuOps) SGDStep(s gpu.Stream, w, g, v F32, p SGD) error {
	const op = "sgd"
	ws, e1 := hostF32(op, "w", w)
	gs, e2 := hostF32(op, "g", g)
	vs, e3 := hostF32(op, "v", v)
	var e4 error
	if p.Momentum != 0 {
		e4 = wantLen(op, "v", v.Len, w.Len)
	}
	if err := firstErr(e1, e2, e3, e4, wantLen(op, "g", g.Len, w.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.SGD(ws, gs, vs, p.LR, p.Momentum, p.WeightDecay, p.Nesterov); return nil })
}

func (cpuOps) AdamWStep(s gpu.Stream, w, g, m, v F32, p AdamW) error {
	const op = "adamw"
	if p.Step < 1 {
		return fmt.Errorf("%w: %s: step %d; want >= 1", ErrArgument, op, p.Step)
	}
	ws, e1 := hostF32(op, "w", w)
	gs, e2 := hostF32(op, "g", g)
	ms, e3 := hostF32(op, "m", m)
	vs, e4 := hostF32(op, "v", v)
	if err := firstErr(e1, e2, e3, e4, wantLen(op, "g", g.Len, w.Len), wantLen(op, "m", m.Len, w.Len), wantLen(op, "v", v.Len, w.Len)); err != nil {
		return err
	}
	return host(s, func() error {
		cpu.AdamW(ws, gs, ms, vs, p.LR, p.Beta1, p.Beta2, p.Eps, p.WeightDecay, p.Step)
		return nil
	})
}

func (cpuOps) Add(s gpu.Stream, z, x, y F32) error {
	zs, e1 := hostF32("add", "z", z)
	xs, e2 := hostF32("add", "x", x)
	ys, e3 := hostF32("add", "y", y)
	if err := firstErr(e1, e2, e3, wantLen("add", "x", x.Len, z.Len), wantLen("add", "y", y.Len, z.Len)); err != nil {
		return err
	}
	return host(s, func() error { cpu.Add(zs, xs, ys); return nil })
}

// bnViews resolves the views of a batch norm: the first full are [N][C][HW] tensors, the others
// per-channel [C]; an empty view named "dx" is allowed (skipped).
func bnViews(op string, g BatchNorm, full int, names []string, views ...F32) ([][]float32, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(views))
	for i, v := range views {
		var err error
		if out[i], err = hostF32(op, names[i], v); err != nil {
			return nil, err
		}
		want := g.C
		if i < full {
			want = g.Len()
		}
		if names[i] == "dx" && v.Len == 0 {
			continue
		}
		if err := wantLen(op, names[i], v.Len, want); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func bnGeom(g BatchNorm) cpu.BNGeom { return cpu.BNGeom{N: g.N, C: g.C, HW: g.HW} }

func (cpuOps) BatchNormTrain(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32, g BatchNorm) error {
	v, err := bnViews("batch norm", g, 2, []string{"y", "x", "gamma", "beta", "running mean", "running var", "saved mean", "saved inverse std"},
		y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return host(s, func() error {
		if g.N > 0 {
			cpu.BatchNormTrain(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], bnGeom(g), g.Momentum, g.Eps)
		}
		return nil
	})
}

func (cpuOps) BatchNormEval(s gpu.Stream, y, x, gamma, beta, runMean, runVar F32, g BatchNorm) error {
	v, err := bnViews("batch norm eval", g, 2, []string{"y", "x", "gamma", "beta", "running mean", "running var"}, y, x, gamma, beta, runMean, runVar)
	if err != nil {
		return err
	}
	return host(s, func() error { cpu.BatchNormEval(v[0], v[1], v[2], v[3], v[4], v[5], bnGeom(g), g.Eps); return nil })
}

func (cpuOps) BatchNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd F32, g BatchNorm) error {
	v, err := bnViews("batch norm backward", g, 3, []string{"dx", "dy", "x", "dgamma", "dbeta", "gamma", "saved mean", "saved inverse std"},
		dx, dy, x, dgamma, dbeta, gamma, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return host(s, func() error {
		if g.N > 0 {
			cpu.BatchNormBackward(v[0], v[3], v[4], v[1], v[2], v[5], v[6], v[7], bnGeom(g))
		}
		return nil
	})
}

func checkInner(op string, inner int) error {
	if inner <= 0 {
		return fmt.Errorf("%w: %s: inner = %d", ErrArgument, op, inner)
	}
	return nil
}

func (cpuOps) GlobalAvgPool(s gpu.Stream, y, x F32, inner int) error {
	const op = "global average pool"
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	if err := firstErr(checkInner(op, inner), e1, e2, wantLen(op, "x", x.Len, y.Len*inner)); err != nil {
		return err
	}
	return host(s, func() error { cpu.GlobalAvgPool(ys, xs, inner); return nil })
}

func (cpuOps) GlobalAvgPoolBackward(s gpu.Stream, dx, dy F32, inner int) error {
	const op = "global average pool backward"
	dxs, e1 := hostF32(op, "dx", dx)
	dys, e2 := hostF32(op, "dy", dy)
	if err := firstErr(checkInner(op, inner), e1, e2, wantLen(op, "dx", dx.Len, dy.Len*inner)); err != nil {
		return err
	}
	return host(s, func() error { cpu.GlobalAvgPoolBackward(dxs, dys, inner); return nil })
}
