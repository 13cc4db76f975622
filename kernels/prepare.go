package kernels

import (
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
)

// PreparedConv2D is a forward convolution over weights an op set prepared once (PrepareConv2D).
type PreparedConv2D interface {
	// Conv2D is Ops.Conv2D over the prepared weights: g's OutC, InC, KH and KW must be those the
	// weights were prepared for; its batch, input size, stride and padding may change from call to
	// call. It is a forward pass only: what it leaves in ws is not for Conv2DBackward, which
	// needs Ops.Conv2D's.
	Conv2D(s gpu.Stream, y, x, bias, ws F32, g Conv2D) error
}

// PreparedGemm is a matrix product whose B operand an op set prepared once (PrepareGemm).
type PreparedGemm interface {
	// Gemm is Ops.Gemm with the prepared B: c = alpha*op(a)*op(B) + beta*c, op(a) m x k.
	Gemm(s gpu.Stream, transA bool, m int, alpha float32, a F32, beta float32, c F32) error
}

// Preparer is implemented by an op set whose convolutions and matrix products gain from weights
// prepared once for many calls (the CPU op set's: transformed for Winograd, packed for its GEMM,
// which it otherwise does at every call). PrepareConv2D and PrepareGemm ask the op set a
// backend's Factory made for the device.
type Preparer interface {
	// PrepareConv2D returns the forward convolution over the weights w (checked: g.WeightLen()
	// elements), which do not change while it is in use.
	PrepareConv2D(w F32, g Conv2D) (PreparedConv2D, error)
	// PrepareGemm returns the products by B = b (checked: k x n, n x k when transB), which does
	// not change while it is in use.
	PrepareGemm(transB bool, n, k int, b F32) (PreparedGemm, error)
}

// PrepareConv2D returns the forward convolution of geometry g's weights (OutC, InC, KH and KW;
// the rest of g is not read) over w, prepared by ops where it implements Preparer, else
// ops.Conv2D over w: for inference, whose weights stay as they are. The convolution reads w when
// a call first needs a form of it (on the stream, in order), and w must not change after that;
// its results are ops.Conv2D's. Its calls pass the argument checks of ops.Conv2D, and their
// weight geometry must be g's.
func PrepareConv2D(ops Ops, w F32, g Conv2D) (PreparedConv2D, error) {
	c := call{op: "prepare conv2d"}
	if g.OutC <= 0 || g.InC <= 0 || g.KH <= 0 || g.KW <= 0 || !fits(g.OutC, g.InC, g.KH, g.KW) {
		c.arg("weights of %dx%dx%dx%d", g.OutC, g.InC, g.KH, g.KW)
	} else {
		c.view(in, "w", vf(w), g.WeightLen())
	}
	if err := c.done(); err != nil {
		return nil, err
	}
	p := prepared{ops: ops, w: w, g: g}
	if cp, ok := preparer(ops); ok {
		var err error
		if p.b, err = cp.PrepareConv2D(w, g); err != nil {
			return nil, fmt.Errorf("kernels: prepare conv2d on the %s op set: %w", ops.Backend(), err)
		}
	}
	return p, nil
}

// PrepareGemm returns the matrix products by B = b (k x n, n x k when transB), prepared by ops
// where it implements Preparer (the CPU op set packs B once), else ops.Gemm over b: for
// inference, whose weights stay as they are (a linear layer's B is its weights, transposed). The
// products read b when the first call needs it, and b must not change after that; their results
// are ops.Gemm's. Their calls pass the argument checks of ops.Gemm.
func PrepareGemm(ops Ops, transB bool, n, k int, b F32) (PreparedGemm, error) {
	c := call{op: "prepare gemm"}
	if n <= 0 || k <= 0 || !fits(n, k) {
		c.arg("B of %dx%d", k, n)
	} else {
		c.view(in, "b", vf(b), n*k)
	}
	if err := c.done(); err != nil {
		return nil, err
	}
	p := preparedGemm{ops: ops, b: b, transB: transB, n: n, k: k}
	if gp, ok := preparer(ops); ok {
		var err error
		if p.p, err = gp.PrepareGemm(transB, n, k, b); err != nil {
			return nil, fmt.Errorf("kernels: prepare gemm on the %s op set: %w", ops.Backend(), err)
		}
	}
	return p, nil
}

// preparer is the Preparer behind ops' checks, if its op set is one.
func preparer(ops Ops) (Preparer, bool) {
	if ch, ok := ops.(checked); ok {
		ops = ch.b
	}
	p, ok := ops.(Preparer)
	return p, ok
}

// preparedGemm is PrepareGemm's result: the argument checks in front of the op set's prepared
// product p, or of ops.Gemm over b where p is nil.
type preparedGemm struct {
	ops    Ops
	b      F32
	transB bool
	n, k   int
	p      PreparedGemm
}

func (p preparedGemm) Gemm(s gpu.Stream, transA bool, m int, alpha float32, a F32, beta float32, c F32) error {
	if p.p == nil {
		return p.ops.Gemm(s, transA, p.transB, m, p.n, p.k, alpha, a, p.b, beta, c)
	}
	return checked{preparedOps{gemm: p.p}}.Gemm(s, transA, p.transB, m, p.n, p.k, alpha, a, p.b, beta, c)
}

// prepared is PrepareConv2D's result: the argument checks in front of the op set's prepared
// convolution b, or of ops.Conv2D over w where b is nil.
type prepared struct {
	ops Ops
	w   F32
	g   Conv2D
	b   PreparedConv2D
}

func (p prepared) Conv2D(s gpu.Stream, y, x, bias, ws F32, g Conv2D) error {
	if g.OutC != p.g.OutC || g.InC != p.g.InC || g.KH != p.g.KH || g.KW != p.g.KW {
		return fmt.Errorf("kernels: %w: conv2d over weights prepared for %dx%dx%dx%d, called with %+v",
			ErrArgument, p.g.OutC, p.g.InC, p.g.KH, p.g.KW, g)
	}
	if p.b == nil {
		return p.ops.Conv2D(s, y, x, p.w, bias, ws, g)
	}
	return checked{preparedOps{conv: p.b}}.Conv2D(s, y, x, p.w, bias, ws, g)
}

// preparedOps is the op set whose Conv2D is a prepared convolution, or whose Gemm a prepared
// product, for the checks of Conv2D or Gemm in front of it; it has no other op.
type preparedOps struct {
	Ops
	conv PreparedConv2D
	gemm PreparedGemm
}

func (o preparedOps) Conv2D(s gpu.Stream, y, x, _, bias, ws F32, g Conv2D) error {
	return o.conv.Conv2D(s, y, x, bias, ws, g)
}

func (o preparedOps) Gemm(s gpu.Stream, transA, _ bool, m, _, _ int, alpha float32, a, _ F32, beta float32, c F32) error {
	return o.gemm.Gemm(s, transA, m, alpha, a, beta, c)
}
