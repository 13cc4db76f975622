package kernels

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels/internal/cpu"
	"github.com/stoke-ml/stoke/transforms"
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
// products (see ForPrecision). The methods that only call their kernel are generated from the op
// table (cpu_gen.go, from the entries' CPU code); those that do more are written here.
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

func poolGeom(g Pool2D) cpu.PoolGeom {
	return cpu.PoolGeom{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, Stride: g.stride(), Pad: g.Pad}
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

func bnGeom(g BatchNorm) cpu.BNGeom { return cpu.BNGeom{N: g.N, C: g.C, HW: g.HW} }

// to16 writes src rounded by round into dst, 2 bytes little-endian per value (ToBF16, ToFP16).
func to16(dst []byte, src []float32, round func(float32) uint16) {
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], round(f))
	}
}

// from16 widens the 16-bit values of src into dst (FromBF16, FromFP16).
func from16(dst []float32, src []byte, widen func(uint16) float32) {
	for i := range dst {
		dst[i] = widen(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// cpuUnary and cpuBinary map the functions to the CPU kernels' (valid ones: check.go).
var (
	cpuUnary = [...]cpu.UnaryOp{Exp: cpu.FExp, Log: cpu.FLog, Sqrt: cpu.FSqrt, Rsqrt: cpu.FRsqrt, Sigmoid: cpu.FSigmoid,
		Tanh: cpu.FTanh, GELU: cpu.FGELU, GELUTanh: cpu.FGELUTanh, SiLU: cpu.FSiLU, Hardswish: cpu.FHardswish,
		Hardsigmoid: cpu.FHardsigmoid, ReLU6: cpu.FReLU6}
	cpuBinary = [...]cpu.BinaryOp{BinaryAdd: cpu.BinAdd, BinarySub: cpu.BinSub, BinaryMul: cpu.BinMul, BinaryDiv: cpu.BinDiv}
)

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

func attnGeom(g Attention) cpu.AttnGeom {
	return cpu.AttnGeom{Batch: g.Batch, LQ: g.LQ, LK: g.LK, D: g.D, Scale: g.Scale}
}

var _ Preparer = cpuOps{}

// PrepareConv2D returns the convolution over w's plan (cpu.ConvPlan), which makes each form of
// the weights once; in a reduced precision, whose operands are rounded at every call, it is
// Conv2D over w.
func (o cpuOps) PrepareConv2D(w F32, g Conv2D) (PreparedConv2D, error) {
	const op = "prepare conv2d"
	wv, err := hostF32(op, "w", w)
	if err != nil {
		return nil, err
	}
	if o.prec.reduced() {
		return unprepared{o, w}, nil
	}
	return cpuPlan{cpu.NewConvPlan(wv)}, nil
}

// unprepared is a convolution over weights as they are.
type unprepared struct {
	o Ops
	w F32
}

func (u unprepared) Conv2D(s gpu.Stream, y, x, bias, ws F32, g Conv2D) error {
	return u.o.Conv2D(s, y, x, u.w, bias, ws, g)
}

// cpuPlan is the CPU op set's prepared convolution.
type cpuPlan struct{ p *cpu.ConvPlan }

func (c cpuPlan) Conv2D(s gpu.Stream, y, x, bias, ws F32, g Conv2D) error {
	const op = "conv2d"
	ys, e1 := hostF32(op, "y", y)
	xs, e2 := hostF32(op, "x", x)
	bs, e3 := hostF32(op, "bias", bias)
	wsv, e4 := hostF32(op, "workspace", ws)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	cg := convGeom(g)
	return s.Host(func() error { c.p.Conv2D(ys, xs, bs, wsv, cg); return nil })
}

// PrepareGemm returns the products by b's plan (cpu.GemmPlan), which packs it once; in a reduced
// precision, whose operands are rounded at every call, they are Gemm over b.
func (o cpuOps) PrepareGemm(transB bool, n, k int, b F32) (PreparedGemm, error) {
	bs, err := hostF32("prepare gemm", "b", b)
	if err != nil {
		return nil, err
	}
	if o.prec.reduced() {
		return unpreparedGemm{o, b, transB, n, k}, nil
	}
	return cpuGemmPlan{cpu.NewGemmPlan(transB, n, k, bs)}, nil
}

// unpreparedGemm is a product by B as it is.
type unpreparedGemm struct {
	o      Ops
	b      F32
	transB bool
	n, k   int
}

func (u unpreparedGemm) Gemm(s gpu.Stream, transA bool, m int, alpha float32, a F32, beta float32, c F32) error {
	return u.o.Gemm(s, transA, u.transB, m, u.n, u.k, alpha, a, u.b, beta, c)
}

// cpuGemmPlan is the CPU op set's prepared product.
type cpuGemmPlan struct{ p *cpu.GemmPlan }

func (g cpuGemmPlan) Gemm(s gpu.Stream, transA bool, m int, alpha float32, a F32, beta float32, c F32) error {
	as, e1 := hostF32("gemm", "a", a)
	cs, e2 := hostF32("gemm", "c", c)
	if err := firstErr(e1, e2); err != nil {
		return err
	}
	return s.Host(func() error { g.p.Gemm(transA, m, alpha, as, beta, cs); return nil })
}

// RenderRecords renders each sample with a transforms.Worker of renderWorkers (its scratch is Go
// memory: ws is only measured against RecordScratch), the samples split among the parallel parts
// of cpu.For; the error is the first failing sample's.
func (cpuOps) RenderRecords(s gpu.Stream, dst, src U8, offsets I32, ws U8, n, channels, h, w int) error {
	const op = "render records"
	ds, e1 := hostU8(op, "dst", dst)
	ss, e2 := hostU8(op, "src", src)
	offs, e3 := hostI32(op, "offsets", offsets)
	_, e4 := hostU8(op, "workspace", ws)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	size, slot := channels*h*w, ws.Len/n
	return s.Host(func() error {
		errs := make([]error, n)
		cpu.For(n, 1<<20, func(lo, hi int) {
			wk := renderWorkers.Get().(*transforms.Worker)
			defer renderWorkers.Put(wk)
			for i := lo; i < hi; i++ {
				if errs[i] = renderSample(wk, ds[i*size:(i+1)*size], ss, offs[2*i], offs[2*i+1], slot); errs[i] != nil {
					errs[i] = fmt.Errorf("kernels: %s: sample %d: %w", op, i, errs[i])
				}
			}
		})
		return firstErr(errs...)
	})
}

// renderWorkers are the Workers of RenderRecords: a Worker of any Chain renders any record.
var renderWorkers = sync.Pool{New: func() any { return transforms.Compose().NewWorker() }}

// renderSample writes sample pixels dst from the src bytes at off, of kind (see RenderRecords), with
// slot bytes of scratch.
func renderSample(wk *transforms.Worker, dst, src []byte, off, kind int32, slot int) error {
	if kind != 0 && kind != 1 {
		return fmt.Errorf("kind %d; want 0 (pixels) or 1 (a record): %w", kind, ErrArgument)
	}
	if off < 0 || int(off) > len(src) || (kind == 0 && len(dst) > len(src)-int(off)) {
		return fmt.Errorf("%d bytes at offset %d of src, %d bytes long: %w", len(dst), off, len(src), ErrShape)
	}
	if kind == 0 {
		copy(dst, src[off:])
		return nil
	}
	// The checks in the CUDA op set's order: the record's fixed part (RecordScratch's), then
	// Render's (its pixels against dst, its blocks and pairs), then its scratch.
	rec := src[off:]
	need, err := wk.RecordScratch(rec)
	if err != nil {
		return err
	}
	if err := wk.Render(dst, rec); err != nil {
		return err
	}
	if need > slot {
		return fmt.Errorf("the record needs %d bytes of scratch, its slot of the workspace has %d: %w", need, slot, ErrShape)
	}
	return nil
}
