package nn

import (
	"fmt"

	"github.com/stoke-ml/stoke/kernels"
)

// ConvBatchNorm returns b(c(x)), a convolution followed by a batch norm, as b.Forward(c.Forward(x))
// computes it. In a frozen graph's evaluation pass (Graph.Freeze) it is instead one convolution
// over weights with the norm folded in, as onnxruntime folds them: w·s and (bias−mean)·s + β per
// output channel, s = γ/√(var+ε), made once from the weights and statistics and kept with what
// the graph prepared (a pass over the output fewer: the batch norms were 8% of efficientnet_b0's
// inference). The result equals the two ops' within float32 rounding. Such a pass has no backward
// pass: the weights the convolution ran over are not c's (Backward says so). Grouped
// convolutions other than depthwise ones are not folded. Sequential and Dict call it for a
// Conv2dLayer that a BatchNorm2dLayer follows.
func ConvBatchNorm(x *Tensor, c *Conv2dLayer, b *BatchNorm2dLayer) *Tensor {
	g := graphOf("conv2d", x)
	if g == nil || !g.folds(x, c, b) {
		return b.Forward(c.Forward(x))
	}
	f := g.folded(c, b)
	if f == nil {
		return &Tensor{g: g}
	}
	g.foldedPass = true
	return Conv2d(x, f.w, f.b, c.Options)
}

// foldedConv is a convolution's weights and bias with a batch norm folded in: constants of the
// frozen graph, in memory it took from its allocator (bufs), which Thaw returns to its pool.
type foldedConv struct {
	w, b *Tensor
	bufs []kernels.F32
}

// folds reports whether ConvBatchNorm folds b into c for x: a frozen graph's evaluation pass
// over parameters of their own tensors, a plain or depthwise convolution, matching shapes.
func (g *Graph) folds(x *Tensor, c *Conv2dLayer, b *BatchNorm2dLayer) bool {
	if !g.frozen || g.train || g.meta || g.err != nil || len(x.shape) != 4 || c.Weight == nil || c.Weight.p == nil {
		return false
	}
	out := c.Weight.Dim(0)
	groups := max(c.Options.Groups, 1)
	if groups > 1 && !(groups == x.shape[1] && groups == out) {
		return false
	}
	for _, t := range [...]*Tensor{b.Weight, b.Bias, b.RunningMean, b.RunningVar} {
		if t == nil || t.p == nil || len(t.shape) != 1 || t.shape[0] != out {
			return false
		}
	}
	return c.Bias == nil || (c.Bias.p != nil && c.Bias.Len() == out)
}

// folded returns c's weights and bias with b folded in, made on the graph's stream the first
// time, or nil after failing the graph.
func (g *Graph) folded(c *Conv2dLayer, b *BatchNorm2dLayer) *foldedConv {
	if f := g.foldedConvs[c.Weight.data]; f != nil {
		return f
	}
	out := c.Weight.Dim(0)
	per := c.Weight.Len() / out
	f := &foldedConv{}
	take := func(n int) kernels.F32 {
		v, err := g.alloc.F32(n)
		if err != nil {
			g.fail(fmt.Errorf("nn: conv2d with batch norm folded in: %w", err))
			return kernels.F32{}
		}
		v = v.Slice(0, n)
		f.bufs = append(f.bufs, v)
		return v
	}
	w, bias, zeros := take(c.Weight.Len()), take(out), take(out)
	if g.err != nil {
		g.releaseFolded(f)
		return nil
	}
	cb := zeros
	if c.Bias != nil {
		cb = c.Bias.data
	}
	// BatchNormEval computes (x−mean)/√(var+ε)·γ + β: the weights are x with mean and β zero, the
	// bias the convolution's bias with the statistics.
	g.run(func() error {
		if err := g.ops.Fill(g.s, zeros, 0); err != nil {
			return err
		}
		bn := b.Weight.data
		if err := g.ops.BatchNormEval(g.s, w, c.Weight.data, bn, zeros, zeros, b.RunningVar.data,
			kernels.BatchNorm{N: 1, C: out, HW: per, Eps: b.Eps}); err != nil {
			return err
		}
		return g.ops.BatchNormEval(g.s, bias, cb, bn, b.Bias.data, b.RunningMean.data, b.RunningVar.data,
			kernels.BatchNorm{N: 1, C: out, HW: 1, Eps: b.Eps})
	})
	if g.err != nil {
		g.releaseFolded(f)
		return nil
	}
	f.w = &Tensor{shape: c.Weight.shape, data: w, p: &param{}}
	f.b = &Tensor{shape: []int{out}, data: bias, p: &param{}}
	if g.foldedConvs == nil {
		g.foldedConvs = map[kernels.F32]*foldedConv{}
	}
	g.foldedConvs[c.Weight.data] = f
	return f
}

// releaseFolded returns f's memory to the graph's pool.
func (g *Graph) releaseFolded(f *foldedConv) {
	for _, v := range f.bufs {
		if v.Len > 0 {
			g.pool[v.Len] = append(g.pool[v.Len], v)
		}
	}
}
