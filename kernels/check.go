package kernels

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/stoke-ml/stoke/gpu"
)

// checked is the op set For and CPU hand out: it checks every call's arguments (a stream, the
// views inside their buffers, their lengths against the op's dimensions, the geometry and
// settings, the overlaps the Ops doc forbids) and only then calls the backend. The rules are
// stated here once for every backend, a user's registered one included; a backend checks only
// what it alone can know (whether a buffer is memory of its device, whether a stream is its own).
type checked struct{ b Ops }

var _ Ops = checked{}

// withChecks puts the argument checks in front of o (once).
func withChecks(o Ops) Ops {
	if _, ok := o.(checked); ok {
		return o
	}
	return checked{o}
}

// Operand roles: an output (written, possibly also read) must not overlap any other operand,
// unless it is exactly an input the op's doc says it may be.
const (
	in  = 0
	out = 1
	opt = 2 // an empty view is allowed ("none")
)

// anyLen: the operand's length is not constrained by the op's dimensions.
const anyLen = -1

// view is an operand of any element type: a buffer and a byte range.
type view struct {
	buf      gpu.Buffer
	off, len int // in elements
	size     int // bytes per element
}

func vf(v F32) view { return view{v.Buf, v.Off, v.Len, 4} }
func vi(v I32) view { return view{v.Buf, v.Off, v.Len, 4} }
func vu(v U8) view  { return view{v.Buf, v.Off, v.Len, 1} }

type operand struct {
	name   string
	v      view
	role   int
	mayBe  string // the output this input may be exactly, "" for none
	lo, hi int    // the byte range, set by view when the range is good
	cmp    bool   // the buffer can be compared with == (a backend's type need not be)
}

// call gathers one op call's checks; the first failure is its error.
type call struct {
	op  string
	err error
	ops [10]operand
	n   int
}

func newCall(op string, s gpu.Stream) call {
	c := call{op: op}
	if s == nil {
		c.err = fmt.Errorf("kernels: %w: %s: nil stream", ErrArgument, op)
	}
	return c
}

// arg fails the call with ErrArgument; the message follows the op's name. (Callers test the
// condition themselves: boxing the values for every good call would allocate.)
func (c *call) arg(format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("kernels: %w: %s: %s", ErrArgument, c.op, fmt.Sprintf(format, a...))
	}
}

// valid fails the call with err (a geometry's Validate).
func (c *call) valid(err error) {
	if c.err == nil {
		c.err = err
	}
}

// view adds an operand: its range must lie inside its buffer and, unless want is anyLen (or the
// view is empty and role has opt), its length must be want.
func (c *call) view(role int, name string, v view, want int) {
	c.ops[c.n] = operand{name: name, v: v, role: role}
	c.n++
	if c.err != nil {
		return
	}
	switch {
	case v.len == 0: // the empty view: no memory
	case v.buf == nil:
		c.err = fmt.Errorf("kernels: %w: %s: %s has no buffer", ErrArgument, c.op, name)
		return
	case v.off < 0 || v.len < 0 || v.len > v.buf.Len()/v.size-v.off: // no overflow
		c.err = fmt.Errorf("kernels: %w: %s: %s bytes [%d,%d) outside its buffer of %d bytes", ErrShape, c.op, name,
			v.off*v.size, (v.off+v.len)*v.size, v.buf.Len())
		return
	default:
		o := &c.ops[c.n-1]
		o.lo, o.hi, o.cmp = v.off*v.size, (v.off+v.len)*v.size, reflect.TypeOf(v.buf).Comparable()
	}
	if want != anyLen && v.len != want && !(role&opt != 0 && v.len == 0) {
		c.err = fmt.Errorf("kernels: %w: %s: %s has %d elements; want %d", ErrShape, c.op, name, v.len, want)
	}
}

// mayBe records that output may be exactly one of inputs (the op's doc says so).
func (c *call) mayBe(output string, inputs ...string) {
	for i := range c.n {
		if slices.Contains(inputs, c.ops[i].name) {
			c.ops[i].mayBe = output
		}
	}
}

// done checks the overlaps and returns the call's first error.
func (c *call) done() error {
	if c.err != nil {
		return c.err
	}
	for i := range c.n {
		a := &c.ops[i]
		if a.role&out == 0 || a.lo == a.hi {
			continue
		}
		for j := range c.n {
			b := &c.ops[j]
			if j == i || (b.role&out != 0 && j < i) || b.lo >= a.hi || a.lo >= b.hi || !(a.cmp && b.cmp && a.v.buf == b.v.buf) {
				continue // the same operand, a pair already seen, or no shared byte
			}
			if a.v == b.v && b.mayBe == a.name {
				continue
			}
			return fmt.Errorf("kernels: %w: %s: %s overlaps %s", ErrArgument, c.op, a.name, b.name)
		}
	}
	return nil
}

// mul returns a*b, two dimensions >= 0, failing the call when the product overflows an int: a
// wrapped length could match a small (or empty) view while the backend walks the dimensions.
func (c *call) mul(a, b int) int {
	if a > 0 && b > math.MaxInt/a {
		c.arg("dimensions %d x %d overflow an int", a, b)
		return 0
	}
	return a * b
}

func (c *call) classes(n, classes int) {
	if n < 0 || classes <= 0 {
		c.arg("n = %d, classes = %d", n, classes)
	}
}

func (o checked) Backend() string { return o.b.Backend() }

func (o checked) Fill(s gpu.Stream, x F32, v float32) error {
	c := newCall("fill", s)
	c.view(out, "x", vf(x), anyLen)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Fill(s, x, v)
}

func (o checked) Copy(s gpu.Stream, dst, src F32) error {
	c := newCall("copy", s)
	c.view(in, "src", vf(src), anyLen)
	c.view(out, "dst", vf(dst), src.Len)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Copy(s, dst, src)
}

func (o checked) Axpy(s gpu.Stream, y F32, alpha float32, x F32) error {
	c := newCall("axpy", s)
	c.view(out, "y", vf(y), anyLen)
	c.view(in, "x", vf(x), y.Len)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Axpy(s, y, alpha, x)
}

func (o checked) Scale(s gpu.Stream, x F32, alpha float32) error {
	c := newCall("scale", s)
	c.view(out, "x", vf(x), anyLen)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Scale(s, x, alpha)
}

// checkElementwise checks z = f(x, y) with z allowed to be x or y (Mul, Add).
func checkElementwise(op string, s gpu.Stream, z, x, y F32) error {
	c := newCall(op, s)
	c.view(out, "z", vf(z), anyLen)
	c.view(in, "x", vf(x), z.Len)
	c.view(in, "y", vf(y), z.Len)
	c.mayBe("z", "x", "y")
	return c.done()
}

func (o checked) Mul(s gpu.Stream, z, x, y F32) error {
	if err := checkElementwise("mul", s, z, x, y); err != nil {
		return err
	}
	return o.b.Mul(s, z, x, y)
}

func (o checked) Add(s gpu.Stream, z, x, y F32) error {
	if err := checkElementwise("add", s, z, x, y); err != nil {
		return err
	}
	return o.b.Add(s, z, x, y)
}

func (o checked) Gemm(s gpu.Stream, transA, transB bool, m, n, k int, alpha float32, a, b F32, beta float32, cv F32) error {
	c := newCall("gemm", s)
	if m < 0 || n < 0 || k < 0 {
		c.arg("m, n, k = %d, %d, %d", m, n, k)
	}
	c.view(in, "a", vf(a), c.mul(m, k))
	c.view(in, "b", vf(b), c.mul(k, n))
	c.view(out, "c", vf(cv), c.mul(m, n))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Gemm(s, transA, transB, m, n, k, alpha, a, b, beta, cv)
}

func (o checked) BiasAdd(s gpu.Stream, x, bias F32, outer, inner int) error {
	c := newCall("bias add", s)
	if outer < 0 || inner < 0 {
		c.arg("outer = %d, inner = %d", outer, inner)
	}
	c.view(in, "bias", vf(bias), anyLen)
	c.view(out, "x", vf(x), c.mul(c.mul(outer, bias.Len), inner))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.BiasAdd(s, x, bias, outer, inner)
}

func (o checked) BiasGrad(s gpu.Stream, dbias, dy F32, outer, inner int) error {
	c := newCall("bias grad", s)
	if outer < 0 || inner < 0 {
		c.arg("outer = %d, inner = %d", outer, inner)
	}
	c.view(out, "dbias", vf(dbias), anyLen)
	c.view(in, "dy", vf(dy), c.mul(c.mul(outer, dbias.Len), inner))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.BiasGrad(s, dbias, dy, outer, inner)
}

func (o checked) ReLU(s gpu.Stream, y, x F32) error {
	c := newCall("relu", s)
	c.view(in, "x", vf(x), anyLen)
	c.view(out, "y", vf(y), x.Len)
	c.mayBe("y", "x")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.ReLU(s, y, x)
}

func (o checked) ReLUGrad(s gpu.Stream, dx, dy, y F32) error {
	c := newCall("relu grad", s)
	c.view(out, "dx", vf(dx), anyLen)
	c.view(in, "dy", vf(dy), dx.Len)
	c.view(in, "y", vf(y), dx.Len)
	c.mayBe("dx", "dy")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.ReLUGrad(s, dx, dy, y)
}

// checkCrossEntropy checks both losses' operands.
func checkCrossEntropy(c *call, loss, dlogits, logits F32, labels I32, n, classes int) error {
	c.classes(n, classes)
	c.view(out, "loss", vf(loss), 1)
	c.view(in, "logits", vf(logits), c.mul(n, classes))
	c.view(out, "dlogits", vf(dlogits), c.mul(n, classes))
	c.view(in, "labels", vi(labels), n)
	return c.done()
}

func (o checked) SoftmaxCrossEntropy(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int) error {
	c := newCall("softmax cross-entropy", s)
	if err := checkCrossEntropy(&c, loss, dlogits, logits, labels, n, classes); err != nil {
		return err
	}
	return o.b.SoftmaxCrossEntropy(s, loss, dlogits, logits, labels, n, classes)
}

func (o checked) SoftmaxCrossEntropySmooth(s gpu.Stream, loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32) error {
	c := newCall("softmax cross-entropy", s)
	if !(smoothing >= 0 && smoothing < 1) {
		c.arg("label smoothing %v; want [0,1)", smoothing)
	}
	if err := checkCrossEntropy(&c, loss, dlogits, logits, labels, n, classes); err != nil {
		return err
	}
	return o.b.SoftmaxCrossEntropySmooth(s, loss, dlogits, logits, labels, n, classes, smoothing)
}

func (o checked) FloatLoss(s gpu.Stream, loss, dpred, pred, target, posWeight F32, n, dim int, l Loss) error {
	c := newCall("float loss", s)
	if l.Kind < SoftCrossEntropy || l.Kind > SmoothL1 {
		c.arg("loss kind %d", l.Kind)
	}
	if !(l.Beta >= 0) || math.IsInf(float64(l.Beta), 0) {
		c.arg("SmoothL1 beta %v; want finite and >= 0", l.Beta)
	}
	c.classes(n, dim)
	nd := c.mul(n, dim)
	c.view(out, "loss", vf(loss), 1)
	c.view(out, "dpred", vf(dpred), nd)
	c.view(in, "pred", vf(pred), nd)
	c.view(in, "target", vf(target), nd)
	if posWeight.Len != 0 {
		if l.Kind != BCEWithLogits {
			c.arg("posWeight given to loss kind %d; only BCEWithLogits takes one", l.Kind)
		}
		c.view(in, "posWeight", vf(posWeight), dim)
	}
	if err := c.done(); err != nil {
		return err
	}
	return o.b.FloatLoss(s, loss, dpred, pred, target, posWeight, n, dim, l)
}

func (o checked) Argmax(s gpu.Stream, dst I32, logits F32, n, classes int) error {
	c := newCall("argmax", s)
	c.classes(n, classes)
	c.view(out, "dst", vi(dst), n)
	c.view(in, "logits", vf(logits), c.mul(n, classes))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Argmax(s, dst, logits, n, classes)
}

func (o checked) CountCorrect(s gpu.Stream, count I32, logits F32, labels I32, n, classes int) error {
	c := newCall("count correct", s)
	c.classes(n, classes)
	c.view(out, "count", vi(count), 1)
	c.view(in, "logits", vf(logits), c.mul(n, classes))
	c.view(in, "labels", vi(labels), n)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.CountCorrect(s, count, logits, labels, n, classes)
}

func (o checked) CountNonFinite(s gpu.Stream, count I32, x F32) error {
	c := newCall("count non-finite", s)
	c.view(out, "count", vi(count), 1)
	c.view(in, "x", vf(x), anyLen)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.CountNonFinite(s, count, x)
}

func (o checked) Conv2D(s gpu.Stream, y, x, w, bias, ws F32, g Conv2D) error {
	c := newCall("conv2d", s)
	c.valid(g.Validate())
	c.view(out, "y", vf(y), g.OutLen())
	c.view(in, "x", vf(x), g.InLen())
	c.view(in, "w", vf(w), g.WeightLen())
	c.view(in|opt, "bias", vf(bias), g.OutC)
	c.view(out, "workspace", vf(ws), g.WorkspaceLen())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Conv2D(s, y, x, w, bias, ws, g)
}

func (o checked) Conv2DBackward(s gpu.Stream, dx, dw, dbias, dy, w, ws F32, g Conv2D) error {
	c := newCall("conv2d backward", s)
	c.valid(g.Validate())
	c.view(out|opt, "dx", vf(dx), g.InLen())
	c.view(out, "dw", vf(dw), g.WeightLen())
	c.view(out|opt, "dbias", vf(dbias), g.OutC)
	c.view(in, "dy", vf(dy), g.OutLen())
	c.view(in, "w", vf(w), g.WeightLen())
	c.view(out, "workspace", vf(ws), g.WorkspaceLen())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Conv2DBackward(s, dx, dw, dbias, dy, w, ws, g)
}

func (o checked) DepthwiseConv2D(s gpu.Stream, y, x, w, bias F32, g Depthwise2D) error {
	c := newCall("depthwise conv2d", s)
	c.valid(g.Validate())
	c.view(out, "y", vf(y), g.OutLen())
	c.view(in, "x", vf(x), g.InLen())
	c.view(in, "w", vf(w), g.WeightLen())
	c.view(in|opt, "bias", vf(bias), g.C)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.DepthwiseConv2D(s, y, x, w, bias, g)
}

func (o checked) DepthwiseConv2DBackward(s gpu.Stream, dx, dw, dbias, dy, x, w F32, g Depthwise2D) error {
	c := newCall("depthwise conv2d backward", s)
	c.valid(g.Validate())
	c.view(out|opt, "dx", vf(dx), g.InLen())
	c.view(out, "dw", vf(dw), g.WeightLen())
	c.view(out|opt, "dbias", vf(dbias), g.C)
	c.view(in, "dy", vf(dy), g.OutLen())
	c.view(in, "x", vf(x), g.InLen())
	c.view(in, "w", vf(w), g.WeightLen())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.DepthwiseConv2DBackward(s, dx, dw, dbias, dy, x, w, g)
}

func (o checked) MaxPool2D(s gpu.Stream, y F32, arg I32, x F32, g Pool2D) error {
	c := newCall("maxpool2d", s)
	c.valid(g.Validate())
	c.view(out, "y", vf(y), g.OutLen())
	c.view(out, "arg", vi(arg), g.OutLen())
	c.view(in, "x", vf(x), g.InLen())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.MaxPool2D(s, y, arg, x, g)
}

func (o checked) MaxPool2DBackward(s gpu.Stream, dx, dy F32, arg I32, g Pool2D) error {
	c := newCall("maxpool2d backward", s)
	c.valid(g.Validate())
	c.view(out, "dx", vf(dx), g.InLen())
	c.view(in, "dy", vf(dy), g.OutLen())
	c.view(in, "arg", vi(arg), g.OutLen())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.MaxPool2DBackward(s, dx, dy, arg, g)
}

// checkBatchNorm checks a batch norm's operands: full are [N][C][HW] tensors, the others [C].
func checkBatchNorm(c *call, g BatchNorm, full []operand, perChannel []operand) error {
	c.valid(g.Validate())
	for _, v := range full {
		c.view(v.role, v.name, v.v, g.Len())
		c.ops[c.n-1].mayBe = v.mayBe
	}
	for _, v := range perChannel {
		c.view(v.role, v.name, v.v, g.C)
	}
	return c.done()
}

// checkBatchNormTrain checks the operands of a batch norm in training: y and x [N][C][HW], the
// others [C].
func checkBatchNormTrain(c *call, g BatchNorm, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32) error {
	return checkBatchNorm(c, g,
		[]operand{{name: "y", v: vf(y), role: out}, {name: "x", v: vf(x)}},
		[]operand{{name: "gamma", v: vf(gamma)}, {name: "beta", v: vf(beta)}, {name: "running mean", v: vf(runMean), role: out},
			{name: "running var", v: vf(runVar), role: out}, {name: "saved mean", v: vf(saveMean), role: out},
			{name: "saved inverse std", v: vf(saveInvStd), role: out}})
}

func (o checked) BatchNormTrain(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32, g BatchNorm) error {
	c := newCall("batch norm", s)
	err := checkBatchNormTrain(&c, g, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return o.b.BatchNormTrain(s, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, g)
}

func (o checked) BatchNormEval(s gpu.Stream, y, x, gamma, beta, runMean, runVar F32, g BatchNorm) error {
	c := newCall("batch norm eval", s)
	err := checkBatchNorm(&c, g,
		[]operand{{name: "y", v: vf(y), role: out}, {name: "x", v: vf(x), mayBe: "y"}},
		[]operand{{name: "gamma", v: vf(gamma)}, {name: "beta", v: vf(beta)}, {name: "running mean", v: vf(runMean)},
			{name: "running var", v: vf(runVar)}})
	if err != nil {
		return err
	}
	return o.b.BatchNormEval(s, y, x, gamma, beta, runMean, runVar, g)
}

func (o checked) BatchNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd F32, g BatchNorm) error {
	c := newCall("batch norm backward", s)
	err := checkBatchNorm(&c, g,
		[]operand{{name: "dx", v: vf(dx), role: out | opt}, {name: "dy", v: vf(dy)}, {name: "x", v: vf(x)}},
		[]operand{{name: "dgamma", v: vf(dgamma), role: out}, {name: "dbeta", v: vf(dbeta), role: out}, {name: "gamma", v: vf(gamma)},
			{name: "saved mean", v: vf(saveMean)}, {name: "saved inverse std", v: vf(saveInvStd)}})
	if err != nil {
		return err
	}
	return o.b.BatchNormBackward(s, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd, g)
}

// bnRecord is the length of one record of BatchNormStats (and of BatchNormBackwardInput's sums).
func bnRecord(g BatchNorm) int { return 2*g.C + 1 }

func (o checked) BatchNormStats(s gpu.Stream, stats, x F32, g BatchNorm) error {
	c := newCall("batch norm stats", s)
	c.valid(g.Validate())
	c.view(out, "stats", vf(stats), bnRecord(g))
	c.view(in, "x", vf(x), g.Len())
	if err := c.done(); err != nil {
		return err
	}
	return o.b.BatchNormStats(s, stats, x, g)
}

func (o checked) BatchNormTrainStats(s gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats F32, g BatchNorm) error {
	c := newCall("batch norm over gathered stats", s)
	c.view(in, "stats", vf(stats), anyLen)
	if c.err == nil && g.C > 0 && (stats.Len == 0 || stats.Len%bnRecord(g) != 0) {
		c.err = fmt.Errorf("kernels: %w: %s: stats has %d elements; want records of 2C+1 = %d", ErrShape, c.op, stats.Len, bnRecord(g))
	}
	err := checkBatchNormTrain(&c, g, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if err != nil {
		return err
	}
	return o.b.BatchNormTrainStats(s, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats, g)
}

func (o checked) BatchNormBackwardInput(s gpu.Stream, dx, dy, x, gamma, saveMean, saveInvStd, sums F32, g BatchNorm) error {
	c := newCall("batch norm input gradient", s)
	c.view(in, "sums", vf(sums), bnRecord(g))
	err := checkBatchNorm(&c, g,
		[]operand{{name: "dx", v: vf(dx), role: out}, {name: "dy", v: vf(dy)}, {name: "x", v: vf(x)}},
		[]operand{{name: "gamma", v: vf(gamma)}, {name: "saved mean", v: vf(saveMean)}, {name: "saved inverse std", v: vf(saveInvStd)}})
	if err != nil {
		return err
	}
	return o.b.BatchNormBackwardInput(s, dx, dy, x, gamma, saveMean, saveInvStd, sums, g)
}

// check16 checks a conversion's operands: 2 bytes of bf16 or fp16 per float32, 2-byte aligned.
func check16(c *call, f F32, fname string, frole int, b U8, bname string, brole int) error {
	c.view(frole, fname, vf(f), anyLen)
	c.view(brole, bname, vu(b), c.mul(f.Len, 2))
	if c.err == nil && b.Off%2 != 0 {
		c.arg("%s at byte %d; want an even offset", bname, b.Off)
	}
	return c.done()
}

func (o checked) ToBF16(s gpu.Stream, dst U8, src F32) error {
	return checkTo16(s, "to bf16", dst, src, o.b.ToBF16)
}

func (o checked) FromBF16(s gpu.Stream, dst F32, src U8) error {
	return checkFrom16(s, "from bf16", dst, src, o.b.FromBF16)
}

func (o checked) ToFP16(s gpu.Stream, dst U8, src F32) error {
	return checkTo16(s, "to fp16", dst, src, o.b.ToFP16)
}

func (o checked) FromFP16(s gpu.Stream, dst F32, src U8) error {
	return checkFrom16(s, "from fp16", dst, src, o.b.FromFP16)
}

// checkTo16 checks a conversion to 16 bits and hands it to the backend's, next.
func checkTo16(s gpu.Stream, op string, dst U8, src F32, next func(gpu.Stream, U8, F32) error) error {
	c := newCall(op, s)
	if err := check16(&c, src, "src", in, dst, "dst", out); err != nil {
		return err
	}
	return next(s, dst, src)
}

// checkFrom16 checks a conversion from 16 bits and hands it to the backend's, next.
func checkFrom16(s gpu.Stream, op string, dst F32, src U8, next func(gpu.Stream, F32, U8) error) error {
	c := newCall(op, s)
	if err := check16(&c, dst, "dst", out, src, "src", in); err != nil {
		return err
	}
	return next(s, dst, src)
}

func (o checked) GlobalAvgPool(s gpu.Stream, y, x F32, inner int) error {
	c := newCall("global average pool", s)
	if inner <= 0 {
		c.arg("inner = %d", inner)
	}
	c.view(out, "y", vf(y), anyLen)
	c.view(in, "x", vf(x), c.mul(y.Len, inner))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.GlobalAvgPool(s, y, x, inner)
}

func (o checked) GlobalAvgPoolBackward(s gpu.Stream, dx, dy F32, inner int) error {
	c := newCall("global average pool backward", s)
	if inner <= 0 {
		c.arg("inner = %d", inner)
	}
	c.view(in, "dy", vf(dy), anyLen)
	c.view(out, "dx", vf(dx), c.mul(dy.Len, inner))
	if err := c.done(); err != nil {
		return err
	}
	return o.b.GlobalAvgPoolBackward(s, dx, dy, inner)
}

func (o checked) Dropout(s gpu.Stream, y, mask, x F32, p float32, seed uint64) error {
	c := newCall("dropout", s)
	if !(p >= 0 && p < 1) {
		c.arg("p = %v; want [0,1)", p)
	}
	c.view(in, "x", vf(x), anyLen)
	c.view(out, "y", vf(y), x.Len)
	c.view(out, "mask", vf(mask), x.Len)
	c.mayBe("y", "x")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Dropout(s, y, mask, x, p, seed)
}

func (o checked) NormalizeU8(s gpu.Stream, dst F32, src U8, channels, inner int, mean, std []float32) error {
	c := newCall("normalize u8", s)
	if channels <= 0 || inner <= 0 {
		c.arg("%d elements are not [N][%d][%d]", dst.Len, channels, inner)
	} else if ci := c.mul(channels, inner); ci == 0 || dst.Len%ci != 0 {
		c.arg("%d elements are not [N][%d][%d]", dst.Len, channels, inner)
	}
	perChannel := func(n int) bool { return n == 0 || n == 1 || n == channels }
	if !perChannel(len(mean)) || !perChannel(len(std)) {
		c.arg("%d means and %d stds for %d channels", len(mean), len(std), channels)
	}
	for _, v := range std {
		if !(v > 0) {
			c.arg("std %v; want > 0", v)
		}
	}
	c.view(out, "dst", vf(dst), anyLen)
	c.view(in, "src", vu(src), dst.Len)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.NormalizeU8(s, dst, src, channels, inner, mean, std)
}

func (o checked) SGDStep(s gpu.Stream, w, g, v F32, p SGD) error {
	c := newCall("sgd", s)
	c.view(out, "w", vf(w), anyLen)
	c.view(in, "g", vf(g), w.Len)
	wantV := w.Len
	if p.Momentum == 0 {
		wantV = anyLen // v is not used
	}
	c.view(out, "v", vf(v), wantV)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.SGDStep(s, w, g, v, p)
}

func (o checked) AdamWStep(s gpu.Stream, w, g, m, v, vmax F32, p AdamW) error {
	c := newCall("adamw", s)
	if p.Step < 1 {
		c.arg("step %d; want >= 1", p.Step)
	}
	c.view(out, "w", vf(w), anyLen)
	c.view(in, "g", vf(g), w.Len)
	c.view(out, "m", vf(m), w.Len)
	c.view(out, "v", vf(v), w.Len)
	wantVmax := w.Len
	if !p.AMSGrad {
		wantVmax = anyLen // vmax is not used
	}
	c.view(out, "vmax", vf(vmax), wantVmax)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.AdamWStep(s, w, g, m, v, vmax, p)
}

func (o checked) RMSpropStep(s gpu.Stream, w, g, sq, b, ga F32, p RMSprop) error {
	c := newCall("rmsprop", s)
	c.view(out, "w", vf(w), anyLen)
	c.view(in, "g", vf(g), w.Len)
	c.view(out, "sq", vf(sq), w.Len)
	wantB, wantGA := w.Len, w.Len
	if p.Momentum == 0 {
		wantB = anyLen // b is not used
	}
	if !p.Centered {
		wantGA = anyLen // ga is not used
	}
	c.view(out, "b", vf(b), wantB)
	c.view(out, "ga", vf(ga), wantGA)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.RMSpropStep(s, w, g, sq, b, ga, p)
}

// shape checks an index space of rank 1..MaxRank with every dim >= 1, and the stride lists named
// by names (one per stride list): each of the shape's rank, every stride >= 0. It returns the
// number of indices (0 after a failure).
func (c *call) shape(shape []int, names []string, strides ...[]int) int {
	if len(shape) < 1 || len(shape) > MaxRank {
		c.arg("rank %d; want 1..%d", len(shape), MaxRank)
		return 0
	}
	n := 1
	for d, v := range shape {
		if v < 1 {
			c.arg("shape %v: dim %d is %d; want >= 1", shape, d, v)
			return 0
		}
		n = c.mul(n, v)
	}
	for i, st := range strides {
		if len(st) != len(shape) {
			c.arg("%d %s for rank %d", len(st), names[i], len(shape))
			return 0
		}
		for d, v := range st {
			if v < 0 {
				c.arg("%s %v: %d on dim %d; want >= 0", names[i], st, v, d)
				return 0
			}
		}
	}
	if c.err != nil {
		return 0
	}
	return n
}

// reach checks that every element v's strides address over shape lies inside v (an operand
// already added): the last one, Σ (shape[d]-1)·strides[d], must be below v.len, without overflow.
func (c *call) reach(name string, v view, shape, strides []int) {
	if c.err != nil {
		return
	}
	last := 0
	for d, st := range strides {
		t := c.mul(shape[d]-1, st)
		if c.err != nil {
			return
		}
		if last > math.MaxInt-t {
			c.arg("%s strides %v over shape %v overflow an int", name, strides, shape)
			return
		}
		last += t
	}
	if last >= v.len {
		c.err = fmt.Errorf("kernels: %w: %s: %s strides %v over shape %v reach element %d of its %d", ErrShape, c.op, name,
			strides, shape, last, v.len)
	}
}

// unary checks a UnaryFunc.
func (c *call) unary(f UnaryFunc) {
	if !f.valid() {
		c.arg("unknown %v", f)
	}
}

func (o checked) Unary(s gpu.Stream, f UnaryFunc, y, x F32) error {
	c := newCall("unary", s)
	c.unary(f)
	c.view(in, "x", vf(x), anyLen)
	c.view(out, "y", vf(y), x.Len)
	c.mayBe("y", "x")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Unary(s, f, y, x)
}

func (o checked) UnaryGrad(s gpu.Stream, f UnaryFunc, dx, dy, x F32) error {
	c := newCall("unary grad", s)
	c.unary(f)
	c.view(out, "dx", vf(dx), anyLen)
	c.view(in, "dy", vf(dy), dx.Len)
	c.view(in, "x", vf(x), dx.Len)
	c.mayBe("dx", "dy")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.UnaryGrad(s, f, dx, dy, x)
}

func (o checked) Binary(s gpu.Stream, f BinaryFunc, z, x, y F32, shape, xStrides, yStrides []int) error {
	c := newCall("binary", s)
	if !f.valid() {
		c.arg("unknown %v", f)
	}
	n := c.shape(shape, []string{"x strides", "y strides"}, xStrides, yStrides)
	c.view(out, "z", vf(z), n)
	c.view(in, "x", vf(x), anyLen)
	c.reach("x", vf(x), shape, xStrides)
	c.view(in, "y", vf(y), anyLen)
	c.reach("y", vf(y), shape, yStrides)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Binary(s, f, z, x, y, shape, xStrides, yStrides)
}

func (o checked) SumTo(s gpu.Stream, y, x F32, shape, keep []int) error {
	c := newCall("sum to", s)
	n := c.shape(shape, nil)
	kept := 0
	if c.err == nil && len(keep) != len(shape) {
		c.arg("keep %v for shape %v: ranks differ", keep, shape)
	}
	if c.err == nil {
		kept = 1
		for d := range keep {
			if keep[d] != shape[d] && keep[d] != 1 {
				c.arg("keep %v for shape %v: dim %d is neither %d nor 1", keep, shape, d, shape[d])
				break
			}
			kept *= keep[d] // at most n: no overflow
		}
	}
	c.view(in, "x", vf(x), n)
	c.view(out, "y", vf(y), kept)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.SumTo(s, y, x, shape, keep)
}

func (o checked) CopyStrided(s gpu.Stream, dst F32, dstStrides []int, src F32, srcStrides []int, shape []int) error {
	c := newCall("copy strided", s)
	c.shape(shape, []string{"dst strides", "src strides"}, dstStrides, srcStrides)
	c.view(in, "src", vf(src), anyLen)
	c.reach("src", vf(src), shape, srcStrides)
	c.view(out, "dst", vf(dst), anyLen)
	c.reach("dst", vf(dst), shape, dstStrides)
	if c.err == nil {
		c.distinct(shape, dstStrides)
	}
	if err := c.done(); err != nil {
		return err
	}
	return o.b.CopyStrided(s, dst, dstStrides, src, srcStrides, shape)
}

// distinct checks that strides (which reach passed: no sum overflows) address distinct elements
// over shape: taken by increasing stride, each dim of size > 1 steps past every element the
// smaller ones reach.
func (c *call) distinct(shape, strides []int) {
	var dims [MaxRank]int
	k := 0
	for d, n := range shape {
		if n > 1 {
			dims[k] = d
			k++
		}
	}
	sorted := dims[:k]
	slices.SortFunc(sorted, func(a, b int) int { return strides[a] - strides[b] })
	last := 0 // the largest offset the dims so far reach
	for _, d := range sorted {
		if strides[d] <= last {
			c.arg("dst strides %v over shape %v: dim %d steps onto the positions of smaller strides (taken by increasing stride, "+
				"each must step past all of them)", strides, shape, d)
			return
		}
		last += strides[d] * (shape[d] - 1)
	}
}

// rowsCols checks a [rows][cols] operand's dimensions and returns rows*cols.
func (c *call) rowsCols(rows, cols int) int {
	if rows < 0 || cols < 1 {
		c.arg("rows = %d, cols = %d", rows, cols)
		return 0
	}
	return c.mul(rows, cols)
}

func (o checked) Softmax(s gpu.Stream, y, x F32, rows, cols int) error {
	c := newCall("softmax", s)
	n := c.rowsCols(rows, cols)
	c.view(in, "x", vf(x), n)
	c.view(out, "y", vf(y), n)
	c.mayBe("y", "x")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Softmax(s, y, x, rows, cols)
}

func (o checked) SoftmaxBackward(s gpu.Stream, dx, dy, y F32, rows, cols int) error {
	c := newCall("softmax backward", s)
	n := c.rowsCols(rows, cols)
	c.view(out, "dx", vf(dx), n)
	c.view(in, "dy", vf(dy), n)
	c.view(in, "y", vf(y), n)
	c.mayBe("dx", "dy")
	if err := c.done(); err != nil {
		return err
	}
	return o.b.SoftmaxBackward(s, dx, dy, y, rows, cols)
}

func (o checked) LayerNorm(s gpu.Stream, y, mean, rstd, x, gamma, beta F32, rows, cols int, eps float32) error {
	c := newCall("layer norm", s)
	if !(eps > 0) || math.IsInf(float64(eps), 0) {
		c.arg("eps %v; want finite and > 0", eps)
	}
	n := c.rowsCols(rows, cols)
	c.view(out, "y", vf(y), n)
	c.view(out, "mean", vf(mean), rows)
	c.view(out, "rstd", vf(rstd), rows)
	c.view(in, "x", vf(x), n)
	c.view(in|opt, "gamma", vf(gamma), cols)
	c.view(in|opt, "beta", vf(beta), cols)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.LayerNorm(s, y, mean, rstd, x, gamma, beta, rows, cols, eps)
}

func (o checked) LayerNormBackward(s gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd F32, rows, cols int) error {
	c := newCall("layer norm backward", s)
	n := c.rowsCols(rows, cols)
	c.view(out|opt, "dx", vf(dx), n)
	c.view(out|opt, "dgamma", vf(dgamma), cols)
	c.view(out|opt, "dbeta", vf(dbeta), cols)
	c.view(in, "dy", vf(dy), n)
	c.view(in, "x", vf(x), n)
	c.view(in|opt, "gamma", vf(gamma), cols)
	c.view(in, "mean", vf(mean), rows)
	c.view(in, "rstd", vf(rstd), rows)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.LayerNormBackward(s, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, rows, cols)
}

// batched checks that v holds batch matrices of size elements stride apart (stride >= 0): its
// length is at least (batch-1)*stride + size when batch and size are not 0.
func (c *call) batched(role int, name string, v view, batch, stride, size int) {
	c.view(role, name, v, anyLen)
	if c.err != nil || batch == 0 || size == 0 {
		return
	}
	last := c.mul(batch-1, stride)
	if c.err == nil && last > math.MaxInt-size {
		c.arg("%s: %d matrices of %d elements %d apart overflow an int", name, batch, size, stride)
	}
	if c.err == nil && v.len < last+size {
		c.err = fmt.Errorf("kernels: %w: %s: %s has %d elements; want %d matrices of %d elements %d apart (%d)", ErrShape, c.op,
			name, v.len, batch, size, stride, last+size)
	}
}

func (o checked) GemmStrided(s gpu.Stream, transA, transB bool, batch, m, n, k int, alpha float32, a F32, strideA int, b F32, strideB int, beta float32, cv F32, strideC int) error {
	c := newCall("gemm strided", s)
	if batch < 0 || m < 0 || n < 0 || k < 0 {
		c.arg("batch, m, n, k = %d, %d, %d, %d", batch, m, n, k)
	}
	if strideA < 0 || strideB < 0 {
		c.arg("strides %d, %d; want >= 0", strideA, strideB)
	}
	mn := c.mul(m, n)
	if c.err == nil && strideC < mn {
		c.arg("c stride %d below m*n = %d: the outputs overlap", strideC, mn)
	}
	c.batched(in, "a", vf(a), batch, strideA, c.mul(m, k))
	c.batched(in, "b", vf(b), batch, strideB, c.mul(k, n))
	c.batched(out, "c", vf(cv), batch, strideC, mn)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.GemmStrided(s, transA, transB, batch, m, n, k, alpha, a, strideA, b, strideB, beta, cv, strideC)
}

func (o checked) Attention(s gpu.Stream, y, lse, q, k, v F32, g Attention) error {
	c := newCall("attention", s)
	c.valid(g.Validate())
	qn, kn, rows := g.QLen(), g.KLen(), g.Rows()
	c.view(out, "y", vf(y), qn)
	c.view(out, "lse", vf(lse), rows)
	c.view(in, "q", vf(q), qn)
	c.view(in, "k", vf(k), kn)
	c.view(in, "v", vf(v), kn)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.Attention(s, y, lse, q, k, v, g)
}

func (o checked) AttentionBackward(s gpu.Stream, dq, dk, dv, dy, q, k, v, y, lse F32, g Attention) error {
	c := newCall("attention backward", s)
	c.valid(g.Validate())
	qn, kn, rows := g.QLen(), g.KLen(), g.Rows()
	c.view(out, "dq", vf(dq), qn)
	c.view(out, "dk", vf(dk), kn)
	c.view(out, "dv", vf(dv), kn)
	c.view(in, "dy", vf(dy), qn)
	c.view(in, "q", vf(q), qn)
	c.view(in, "k", vf(k), kn)
	c.view(in, "v", vf(v), kn)
	c.view(in, "y", vf(y), qn)
	c.view(in, "lse", vf(lse), rows)
	if err := c.done(); err != nil {
		return err
	}
	return o.b.AttentionBackward(s, dq, dk, dv, dy, q, k, v, y, lse, g)
}
