package kernels

import (
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
)

// PreparedConv2D is a forward convolution over weights an op set prepared once (PrepareConv2D).
type PreparedConv2D interface {
	// Conv2D is Ops.Conv2D over the prepared weights: g's OutC, InC, KH and KW must be those the
	// weights were prepared for; its batch, input size, stride and padding may change from call to
	// call.
	Conv2D(s gpu.Stream, y, x, bias, ws F32, g Conv2D) error
}

// ConvPreparer is implemented by an op set whose forward convolutions gain from weights prepared
// once for many calls (the CPU op set's: transformed for Winograd, packed for its GEMM, which it
// otherwise does at every call). PrepareConv2D asks the op set a backend's Factory made for it.
type ConvPreparer interface {
	// PrepareConv2D returns the forward convolution over the weights w (checked: g.WeightLen()
	// elements), which do not change while it is in use.
	PrepareConv2D(w F32, g Conv2D) (PreparedConv2D, error)
}

// PrepareConv2D returns the forward convolution of geometry g's weights (OutC, InC, KH and KW;
// the rest of g is not read) over w, prepared by ops
// where it implements ConvPreparer, else ops.Conv2D over w: for inference, whose weights stay as
// they are. The convolution reads w when a call first needs a form of it (on the stream, in
// order), and w must not change after that; its results are ops.Conv2D's. Its calls pass the
// argument checks of ops.Conv2D, and their weight geometry must be g's.
func PrepareConv2D(ops Ops, w F32, g Conv2D) (PreparedConv2D, error) {
	c := call{op: "prepare conv2d"}
	if g.OutC <= 0 || g.InC <= 0 || g.KH <= 0 || g.KW <= 0 || !fits(g.OutC, g.InC, g.KH, g.KW) {
		c.arg("weights of %dx%dx%dx%d", g.OutC, g.InC, g.KH, g.KW)
	}
	c.view(in, "w", vf(w), g.WeightLen())
	if err := c.done(); err != nil {
		return nil, err
	}
	b := ops
	if ch, ok := ops.(checked); ok {
		b = ch.b
	}
	p := prepared{ops: ops, w: w, g: g}
	if cp, ok := b.(ConvPreparer); ok {
		var err error
		if p.b, err = cp.PrepareConv2D(w, g); err != nil {
			return nil, fmt.Errorf("kernels: prepare conv2d on the %s op set: %w", ops.Backend(), err)
		}
	}
	return p, nil
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
	return checked{preparedOps{b: p.b}}.Conv2D(s, y, x, p.w, bias, ws, g)
}

// preparedOps is the op set whose Conv2D is a prepared convolution, for the checks of Conv2D in
// front of it; it has no other op.
type preparedOps struct {
	Ops
	b PreparedConv2D
}

func (o preparedOps) Conv2D(s gpu.Stream, y, x, _, bias, ws F32, g Conv2D) error {
	return o.b.Conv2D(s, y, x, bias, ws, g)
}
