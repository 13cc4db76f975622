//go:build cuda

package cuda

import (
	"cmp"
	"fmt"
	"math"
	"regexp"

	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

func init() { kernels.Register("cuda", cudaFor) }

// cudaFor is the factory kernels.For calls: one op set per device, kept by the device, so that
// the module load and the cuBLAS handle happen once and end with the device (Close).
func cudaFor(d gpu.Device) (kernels.Ops, error) {
	dev, ok := d.(*cudaDevice)
	if !ok || dev == nil {
		return nil, fmt.Errorf("cuda: op set for device %T: %w", d, gpu.ErrForeign)
	}
	dev.opsMu.Lock()
	defer dev.opsMu.Unlock()
	if dev.ops != nil {
		return dev.ops, nil
	}
	dev.mu.Lock()
	closed := dev.closed
	dev.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("cuda: op set of %s: %w", dev.info, gpu.ErrClosed)
	}
	o, err := newCUDAOps(dev)
	if err != nil {
		return nil, err
	}
	dev.ops = o
	return o, nil
}

// cudaOps is the CUDA op set: the kernels of ops.cu compiled for the device's architecture,
// and GEMM through cuBLAS. The methods that are a plain launch are generated from the op table
// (ops_gen.go, from the entries' CUDA code); those that do more are written here and in
// ops_nn.go. Every launch goes through the device's context thread (cudaDevice.th).
// Its arguments passed package kernels' checks (kernels.For puts them in front); it checks only that
// streams and buffers are its device's.
// The op sets of one device's precisions (precision.go) share all but prec.
type cudaOps struct {
	dev  *cudaDevice
	blas cublasHandle
	host *hostArena
	fn   map[string]cudaFunction
	prec kernels.Precision // BF16, FP16: the products' operands are converted (see ForPrecision)
	// staging holds the converted operands, per stream, for every precision of the device.
	staging *stagingCache
}

var _ kernels.Ops = (*cudaOps)(nil)

// cudaKernels names every kernel of ops.cu, the functions the op set loads from its module: each
// line `extern "C" __global__ void NAME(` (the rule scripts/cuda-sim.sh's table follows too), so
// that a new kernel is written once, in ops.cu.
var cudaKernels = kernelNames(opsSource)

func kernelNames(src string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^extern "C" __global__ void ([A-Za-z_][A-Za-z0-9_]*)\(`).FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	return names
}

func newCUDAOps(dev *cudaDevice) (*cudaOps, error) {
	info := dev.Info()
	arch, err := nvrtcArch(info.ComputeCapability)
	if err != nil {
		return nil, err
	}
	ptx, err := ptxFor(arch, cu.Version())
	if err != nil {
		return nil, err
	}
	o := &cudaOps{dev: dev, host: &hostArena{dev: dev}, staging: &stagingCache{}}
	err = dev.th.do(func() (err error) {
		o.fn, err = loadKernels(ptx, cudaKernels)
		if err != nil {
			return fmt.Errorf("load module for %s (a driver older than NVRTC rejects its PTX: update the driver): %w", arch, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", info, err)
	}
	if o.blas, err = newCublas(dev); err != nil {
		return nil, err
	}
	return o, nil
}

func (*cudaOps) Backend() string { return "cuda" }

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Kernel arguments: the launcher (launch.go) passes 8 bytes per argument, so every value is
// widened to 8 bytes here and every kernel parameter is 8 bytes wide (see ops.cu), but for a
// struct passed by value as a kernel's last parameter (dims, in ops_nn.go).
func iarg(v int) uint64          { return uint64(int64(v)) }
func farg(v float32) uint64      { return math.Float64bits(float64(v)) }
func parg(p cu.DevicePtr) uint64 { return uint64(p) }

// barg is a flag argument: 1 for true, 0 for false.
func barg(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// adamwArgs are adamw_f32's arguments after the element count: the step's scalars exactly as the
// CPU op set computes them (in float64, rounded once), then eps and the AMSGrad flag.
func adamwArgs(p kernels.AdamW) []uint64 {
	keep := float32(1 - float64(p.LR)*float64(p.WeightDecay))
	size := float32(float64(p.LR) / (1 - math.Pow(p.Beta1, float64(p.Step))))
	root := float32(math.Sqrt(1 - math.Pow(p.Beta2, float64(p.Step))))
	return []uint64{farg(keep), farg(float32(p.Beta1)), farg(float32(1 - p.Beta1)), farg(float32(p.Beta2)), farg(float32(1 - p.Beta2)),
		farg(size), farg(root), farg(p.Eps), barg(p.AMSGrad)}
}

// stream resolves s to the driver stream; it must be a stream of this op set's device.
func (o *cudaOps) stream(op string, s gpu.Stream) (cu.Stream, error) {
	cs, err := stream(s)
	if err != nil {
		return cu.Stream{}, fmt.Errorf("cuda: %w: %s: %w", kernels.ErrArgument, op, err)
	}
	if cs.dev != o.dev {
		return cu.Stream{}, fmt.Errorf("cuda: %w: %s: stream of %s given to the op set of %s", kernels.ErrArgument, op, cs.dev.info, o.dev.info)
	}
	return cs.s, nil
}

// ptr resolves n bytes at byte offset off of buf (empty, or inside buf: the checks of package
// kernels) to a device address (0 for an empty range); buf must be memory of this op set's device.
func (o *cudaOps) ptr(op, name string, buf gpu.Buffer, off, n int) (cu.DevicePtr, error) {
	if n == 0 {
		return 0, nil
	}
	if cb, ok := buf.(*cudaBuffer); !ok || cb == nil || cb.dev != o.dev {
		return 0, fmt.Errorf("cuda: %w: %s: %s is not memory of %s", kernels.ErrBuffer, op, name, o.dev.info)
	}
	cb, err := buffer(buf)
	if err != nil {
		return 0, fmt.Errorf("cuda: %w: %s: %s: %w", kernels.ErrBuffer, op, name, err)
	}
	return cb.ptr + cu.DevicePtr(off), nil
}

func (o *cudaOps) f32(op, name string, v kernels.F32) (cu.DevicePtr, error) {
	return o.ptr(op, name, v.Buf, 4*v.Off, 4*v.Len)
}

func (o *cudaOps) i32(op, name string, v kernels.I32) (cu.DevicePtr, error) {
	return o.ptr(op, name, v.Buf, 4*v.Off, 4*v.Len)
}

func (o *cudaOps) u8(op, name string, v kernels.U8) (cu.DevicePtr, error) {
	return o.ptr(op, name, v.Buf, v.Off, v.Len)
}

// Launch geometry: grid-stride kernels get at most maxBlocks blocks of blockSize threads.
const (
	blockSize = 256
	maxBlocks = 8192
)

// launchN launches a grid-stride kernel over n elements (nothing for n == 0).
func (o *cudaOps) launchN(s cu.Stream, name string, n int, args ...uint64) error {
	if n == 0 {
		return nil
	}
	return o.launch(s, name, min((n+blockSize-1)/blockSize, maxBlocks), blockSize, args...)
}

func (o *cudaOps) launch(s cu.Stream, name string, grid, block int, args ...uint64) error {
	return o.launchByValue(s, name, grid, block, nil, args...)
}

// launchByValue launches a kernel whose last parameter is a struct passed by value, byValue's
// 8-byte words (nil: none), after args.
func (o *cudaOps) launchByValue(s cu.Stream, name string, grid, block int, byValue []uint64, args ...uint64) error {
	fn, ok := o.fn[name]
	if !ok {
		return fmt.Errorf("cuda: launch %s: ops.cu has no such kernel", name)
	}
	err := o.dev.th.do(func() error { return fn.launch(s, grid, block, args, byValue) })
	if err != nil {
		return fmt.Errorf("cuda: launch %s on %s: %w", name, o.dev.Info(), err)
	}
	return nil
}

// launchChecked launches a kernel that reports a bad label through a mapped host slot, then a
// host function that turns the report into the stream's sticky ErrLabel error and frees the slot.
// (After an earlier sticky error the host function is skipped and the slot is not reused.)
func (o *cudaOps) launchChecked(gs gpu.Stream, s cu.Stream, op, name string, n, classes int, args ...uint64) error {
	slot, err := o.host.get()
	if err != nil {
		return err
	}
	flag := slot.int32s(2)
	flag[0], flag[1] = int32(n), 0
	if err := o.launch(s, name, 1, 1024, append(args, parg(slot.dev))...); err != nil {
		o.host.put(slot)
		return err
	}
	return gs.Host(func() error {
		bad, label := int(flag[0]), flag[1]
		o.host.put(slot)
		if bad < n {
			return fmt.Errorf("cuda: %w: %s: sample %d of the batch has label %d; want [0,%d)", kernels.ErrLabel, op, bad, label, classes)
		}
		return nil
	})
}

func (o *cudaOps) Copy(gs gpu.Stream, dst, src kernels.F32) error {
	s, e1 := o.stream("copy", gs)
	dp, e2 := o.f32("copy", "dst", dst)
	sp, e3 := o.f32("copy", "src", src)
	if err := firstErr(e1, e2, e3); err != nil {
		return err
	}
	if dst.Len == 0 {
		return nil
	}
	err := o.dev.th.do(func() error { return cu.MemcpyDtoDAsync(dp, sp, int64(4*dst.Len), s) })
	if err != nil {
		return fmt.Errorf("cuda: copy on %s: %w", o.dev.Info(), err)
	}
	return nil
}

func (o *cudaOps) Gemm(gs gpu.Stream, transA, transB bool, m, n, k int, alpha float32, a, b kernels.F32, beta float32, c kernels.F32) error {
	s, e1 := o.stream("gemm", gs)
	ap, e2 := o.f32("gemm", "a", a)
	bp, e3 := o.f32("gemm", "b", b)
	cp, e4 := o.f32("gemm", "c", c)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	g := gemmBatch{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta, a: ap, b: bp, c: cp, batch: 1}
	if !o.reduced() {
		return o.blas.gemm(o.dev, s, g)
	}
	offB := align16(m * k)
	st, done, err := o.stage(gs, offB+k*n)
	if err != nil {
		return err
	}
	defer done()
	g.a, g.b, g.half = st.at(0), st.at(offB), o.prec
	if err := firstErr(o.toHalf(s, g.a, ap, m*k), o.toHalf(s, g.b, bp, k*n)); err != nil {
		return err
	}
	return o.blas.gemm(o.dev, s, g)
}

// GemmStrided is one strided-batched cuBLAS GEMM (cublasSgemmStridedBatched, or
// cublasGemmStridedBatchedEx on 16-bit operands). In bf16/fp16 each operand's span (batch-1
// strides and one matrix) is converted into staging memory, where the strides stay the same.
func (o *cudaOps) GemmStrided(gs gpu.Stream, transA, transB bool, batch, m, n, k int, alpha float32, a kernels.F32, strideA int, b kernels.F32, strideB int, beta float32, c kernels.F32, strideC int) error {
	const op = "gemm strided"
	s, e1 := o.stream(op, gs)
	ap, e2 := o.f32(op, "a", a)
	bp, e3 := o.f32(op, "b", b)
	cp, e4 := o.f32(op, "c", c)
	if err := firstErr(e1, e2, e3, e4); err != nil {
		return err
	}
	if batch == 0 || m == 0 || n == 0 {
		return nil
	}
	g := gemmBatch{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta, a: ap, b: bp, c: cp,
		strideA: strideA, strideB: strideB, strideC: strideC, batch: batch}
	if !o.reduced() {
		return o.blas.gemm(o.dev, s, g)
	}
	spanA, spanB := span(batch, strideA, m*k), span(batch, strideB, k*n)
	offB := align16(spanA)
	st, done, err := o.stage(gs, offB+spanB)
	if err != nil {
		return err
	}
	defer done()
	g.a, g.b, g.half = st.at(0), st.at(offB), o.prec
	if err := firstErr(o.toHalf(s, g.a, ap, spanA), o.toHalf(s, g.b, bp, spanB)); err != nil {
		return err
	}
	return o.blas.gemm(o.dev, s, g)
}

// span is the elements from the first to the last of batch matrices of size elements each,
// stride apart (none when the matrices are empty).
func span(batch, stride, size int) int {
	if size == 0 {
		return 0
	}
	return (batch-1)*stride + size
}

func (o *cudaOps) biasGrad(s cu.Stream, dbias, dy cu.DevicePtr, outer, channels, inner int) error {
	if channels == 0 {
		return nil
	}
	return o.launch(s, "bias_grad_f32", channels, rowBlock(outer*inner), parg(dbias), parg(dy), iarg(outer), iarg(channels), iarg(inner))
}

func (o *cudaOps) SoftmaxCrossEntropy(gs gpu.Stream, loss, dlogits, logits kernels.F32, labels kernels.I32, n, classes int) error {
	return o.softmaxCrossEntropy(gs, loss, dlogits, logits, labels, n, classes, 0)
}

func (o *cudaOps) CountCorrect(gs gpu.Stream, count kernels.I32, logits kernels.F32, labels kernels.I32, n, classes int) error {
	const op = "count correct"
	s, e0 := o.stream(op, gs)
	cp, e1 := o.i32(op, "count", count)
	xp, e2 := o.f32(op, "logits", logits)
	yp, e3 := o.i32(op, "labels", labels)
	if err := firstErr(e0, e1, e2, e3); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return o.launchChecked(gs, s, op, "count_correct_f32", n, classes, parg(cp), parg(xp), parg(yp), iarg(n), iarg(classes))
}

// convArgs are the geometry arguments of im2col_f32 and col2im_f32, after the two pointers.
func convArgs(g kernels.Conv2D) []uint64 {
	return []uint64{iarg(g.N), iarg(g.InC), iarg(g.InH), iarg(g.InW), iarg(g.KH), iarg(g.KW), iarg(max(g.Stride, 1)), iarg(g.Pad), iarg(g.OutH()), iarg(g.OutW())}
}

// Conv2D is im2col into the workspace, one strided-batched GEMM y_n = w * col_n, and the bias. In
// bf16/fp16 the columns are written in 16 bits (they stay in the workspace for the backward pass)
// and the weights converted into staging memory.
func (o *cudaOps) Conv2D(gs gpu.Stream, y, x, w, bias, ws kernels.F32, g kernels.Conv2D) error {
	const op = "conv2d"
	s, e0 := o.stream(op, gs)
	yp, e1 := o.f32(op, "y", y)
	xp, e2 := o.f32(op, "x", x)
	wp, e3 := o.f32(op, "w", w)
	bp, e4 := o.f32(op, "bias", bias)
	wsp, e5 := o.f32(op, "workspace", ws)
	if err := firstErr(e0, e1, e2, e3, e4, e5); err != nil {
		return err
	}
	if g.N == 0 {
		return nil
	}
	rows, cols := g.InC*g.KH*g.KW, g.OutH()*g.OutW()
	gm := gemmBatch{m: g.OutC, n: cols, k: rows, alpha: 1, beta: 0, a: wp, b: wsp, strideB: rows * cols, c: yp, strideC: g.OutC * cols, batch: g.N}
	if o.reduced() {
		st, done, err := o.stage(gs, g.WeightLen())
		if err != nil {
			return err
		}
		defer done()
		gm.a, gm.half = st.at(0), o.prec
		err = firstErr(o.launchN(s, "im2col_x16", g.N*rows*cols, append(append([]uint64{parg(wsp), parg(xp)}, convArgs(g)...), o.fp16Arg())...),
			o.toHalf(s, gm.a, wp, g.WeightLen()))
		if err != nil {
			return err
		}
	} else if err := o.launchN(s, "im2col_f32", ws.Len, append([]uint64{parg(wsp), parg(xp)}, convArgs(g)...)...); err != nil {
		return err
	}
	if err := o.blas.gemm(o.dev, s, gm); err != nil || bias.Len == 0 {
		return err
	}
	return o.launchN(s, "bias_add_f32", y.Len, parg(yp), parg(bp), iarg(g.N), iarg(g.OutC), iarg(cols))
}

// Conv2DBackward: dw accumulates dy_n * col_n^T over the batch in sample order (as the CPU op set
// does), dbias sums dy, and dx is col2im of w^T * dy_n, computed into the workspace. In bf16/fp16
// dy and w are converted into staging memory and the columns are the forward pass's 16-bit ones.
func (o *cudaOps) Conv2DBackward(gs gpu.Stream, dx, dw, dbias, dy, w, ws kernels.F32, g kernels.Conv2D) error {
	const op = "conv2d backward"
	s, e0 := o.stream(op, gs)
	dxp, e1 := o.f32(op, "dx", dx)
	dwp, e2 := o.f32(op, "dw", dw)
	dbp, e3 := o.f32(op, "dbias", dbias)
	dyp, e4 := o.f32(op, "dy", dy)
	wp, e5 := o.f32(op, "w", w)
	wsp, e6 := o.f32(op, "workspace", ws)
	if err := firstErr(e0, e1, e2, e3, e4, e5, e6); err != nil {
		return err
	}
	if g.N == 0 {
		if err := o.launchN(s, "fill_f32", dw.Len, parg(dwp), iarg(dw.Len), farg(0)); err != nil {
			return err
		}
		return o.launchN(s, "fill_f32", dbias.Len, parg(dbp), iarg(dbias.Len), farg(0))
	}
	dyA, wA, size := dyp, wp, 4 // the products' operands dy and w, and their element size
	if o.reduced() {
		wLen := w.Len // w enters only dx's product
		if dx.Len == 0 {
			wLen = 0
		}
		offW := align16(dy.Len)
		st, done, err := o.stage(gs, offW+wLen)
		if err != nil {
			return err
		}
		defer done()
		dyA, wA, size = st.at(0), st.at(offW), 2
		if err := firstErr(o.toHalf(s, dyA, dyp, dy.Len), o.toHalf(s, wA, wp, wLen)); err != nil {
			return err
		}
	}
	return o.convBackward(s, dxp, dwp, dbp, dyp, dyA, wA, wsp, size, g, dx.Len != 0, dbias.Len != 0)
}

// convBackward enqueues Conv2DBackward's work on resolved pointers: dyA and wA are the products'
// operands dy and w (float32, or 16-bit as the workspace's columns when size is 2), dyp the
// float32 dy the bias gradient sums.
func (o *cudaOps) convBackward(s cu.Stream, dxp, dwp, dbp, dyp, dyA, wA, wsp cu.DevicePtr, size int, g kernels.Conv2D, wantDX, wantDB bool) error {
	rows, cols := g.InC*g.KH*g.KW, g.OutH()*g.OutW()
	half := kernels.Precision("")
	if size == 2 {
		half = o.prec
	}
	for n := range g.N {
		beta := float32(1)
		if n == 0 {
			beta = 0
		}
		err := o.blas.gemm(o.dev, s, gemmBatch{transB: true, m: g.OutC, n: rows, k: cols, alpha: 1, beta: beta,
			a: dyA + cu.DevicePtr(size*n*g.OutC*cols), b: wsp + cu.DevicePtr(size*n*rows*cols), c: dwp, batch: 1, half: half})
		if err != nil {
			return err
		}
	}
	if wantDB {
		if err := o.biasGrad(s, dbp, dyp, g.N, g.OutC, cols); err != nil {
			return err
		}
	}
	if !wantDX {
		return nil
	}
	// The float32 result overwrites the columns, which the dw products above have read.
	err := o.blas.gemm(o.dev, s, gemmBatch{transA: true, m: rows, n: cols, k: g.OutC, alpha: 1, beta: 0,
		a: wA, b: dyA, strideB: g.OutC * cols, c: wsp, strideC: rows * cols, batch: g.N, half: half})
	if err != nil {
		return err
	}
	return o.launchN(s, "col2im_f32", g.InLen(), append([]uint64{parg(dxp), parg(wsp)}, convArgs(g)...)...)
}

func poolArgs(g kernels.Pool2D) []uint64 {
	return []uint64{iarg(g.N * g.C), iarg(g.H), iarg(g.W), iarg(g.K), iarg(cmp.Or(g.Stride, g.K)), iarg(g.OutH()), iarg(g.OutW())}
}

func (o *cudaOps) MaxPool2D(gs gpu.Stream, y kernels.F32, arg kernels.I32, x kernels.F32, g kernels.Pool2D) error {
	const op = "maxpool2d"
	s, e0 := o.stream(op, gs)
	yp, e1 := o.f32(op, "y", y)
	ap, e2 := o.i32(op, "arg", arg)
	xp, e3 := o.f32(op, "x", x)
	if err := firstErr(e0, e1, e2, e3); err != nil {
		return err
	}
	if g.Pad > 0 {
		return o.maxPoolPad(gs, "maxpool_pad_f32", y.Len, g, parg(yp), parg(ap), parg(xp))
	}
	return o.launchN(s, "maxpool_f32", y.Len, append([]uint64{parg(yp), parg(ap), parg(xp)}, poolArgs(g)...)...)
}

func (o *cudaOps) MaxPool2DBackward(gs gpu.Stream, dx, dy kernels.F32, arg kernels.I32, g kernels.Pool2D) error {
	const op = "maxpool2d backward"
	s, e0 := o.stream(op, gs)
	dxp, e1 := o.f32(op, "dx", dx)
	dyp, e2 := o.f32(op, "dy", dy)
	ap, e3 := o.i32(op, "arg", arg)
	if err := firstErr(e0, e1, e2, e3); err != nil {
		return err
	}
	if g.Pad > 0 {
		return o.maxPoolPad(gs, "maxpool_pad_grad_f32", dx.Len, g, parg(dxp), parg(dyp), parg(ap))
	}
	return o.launchN(s, "maxpool_grad_f32", dx.Len, append([]uint64{parg(dxp), parg(dyp), parg(ap)}, poolArgs(g)...)...)
}

// NormalizeU8 reads its per-channel table from a mapped host slot, filled here and handed back by
// a host function after the kernel; per-channel statistics are limited to maxNormChannels.
func (o *cudaOps) NormalizeU8(gs gpu.Stream, dst kernels.F32, src kernels.U8, channels, inner int, mean, std []float32) error {
	const op = "normalize u8"
	// With one statistic for all channels the table needs one entry: view the data as 1 channel.
	tabC := channels
	if len(mean) <= 1 && len(std) <= 1 {
		tabC, inner = 1, channels*inner
	}
	if tabC > maxNormChannels {
		return fmt.Errorf("cuda: %w: %s: per-channel statistics for %d channels; the cuda op set takes at most %d", kernels.ErrArgument, op, tabC, maxNormChannels)
	}
	s, e0 := o.stream(op, gs)
	dp, e1 := o.f32(op, "dst", dst)
	sp, e2 := o.u8(op, "src", src)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	if dst.Len == 0 {
		return nil
	}
	slot, err := o.host.get()
	if err != nil {
		return err
	}
	tab := slot.float32s(2 * tabC)
	for c := range tabC {
		m, sd := float32(0), float32(1)
		if len(mean) > 0 {
			m = mean[c%len(mean)]
		}
		if len(std) > 0 {
			sd = std[c%len(std)]
		}
		tab[c], tab[tabC+c] = 1/(255*sd), -m/sd // the CPU op set's mul and add
	}
	if err := o.launchN(s, "normalize_u8", dst.Len, parg(dp), parg(sp), iarg(dst.Len), iarg(tabC), iarg(inner), parg(slot.dev)); err != nil {
		o.host.put(slot)
		return err
	}
	return gs.Host(func() error { o.host.put(slot); return nil })
}
