package nn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// Checkpoint returns m.Forward(x) keeping, in a training pass, only x and the result: the
// tensors m makes on the way are given back to the graph's pool as soon as the result is
// computed, and Backward runs m's forward pass again from x to compute its gradients
// (torch.utils.checkpoint, activation checkpointing). A model whose blocks each hold many
// activations trades one more forward pass of each block for the memory of all but one block's
// activations.
//
// The gradients are the ones without Checkpoint, bit for bit: the recomputation draws the same
// random masks (Dropout, DropPath), and a batch norm's running statistics are updated once, by
// the first pass, where torch's recomputation updates them twice. Outside a training pass (and
// in the recomputation itself, where a Checkpoint nested in m is a plain call) it is
// m.Forward(x). Batch norms synchronized across ranks (SyncBatchNorm) cannot be recomputed in
// the backward pass, whose collective calls would interleave with the gradients' all-reduce: the
// graph fails with ErrGraph.
//
// m must compute the same function of x both times: it may use the graph's parameters and its
// ops, but no tensor of the graph made outside it other than x. No tensor it makes but its result
// may be used after it: its memory is given back, and an op that reads it fails the graph with
// ErrGraph.
func Checkpoint(m Module, x *Tensor) *Tensor {
	g := x.g
	if g == nil {
		return orphan("checkpoint")
	}
	if g.meta && g.train && g.seg == nil {
		// Activations' pass: the part of the record m makes is a segment.
		n0 := len(g.nodes)
		g.seg = &segment{}
		y := m.Forward(x)
		g.seg = nil
		g.segs = append(g.segs, [2]int{n0, len(g.nodes)})
		return y
	}
	if !g.train || g.meta || g.backward || g.recomputing || g.err != nil {
		return m.Forward(x)
	}
	if g.sync != nil {
		g.fail(fmt.Errorf("nn: checkpoint: batch norms synchronized across ranks cannot be recomputed in the backward pass: %w", ErrGraph))
		return &Tensor{g: g}
	}
	// The first pass: nothing recorded, every tensor m makes but the result given back.
	draws, mark := g.draws, len(g.used)
	seg := &segment{}
	g.seg, g.backward = seg, true
	y := m.Forward(x)
	g.seg, g.backward = nil, false
	if g.err != nil {
		return &Tensor{g: g}
	}
	if y == nil || y.g != g {
		g.fail(fmt.Errorf("nn: checkpoint: the module returned no tensor of the graph: %w", ErrGraph))
		return &Tensor{g: g}
	}
	seg.note([]*Tensor{y}) // a parameter returned as it is
	out := g.keep(y, mark)
	ins := append(g.lists.take(1 + len(seg.params))[:0], x)
	ins = append(ins, seg.params...)
	g.record(out, OpCheckpoint, nil, ins, func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.recompute(m, x, dy, draws)
	})
	return out
}

// segment gathers the parameters a checkpointed module uses in its first pass (Checkpoint's
// operands, through which Backward's schedule of OnGradient and its check that the loss reaches
// a parameter see them).
type segment struct{ params []*Tensor }

// note adds the trained parameters among an op's operands to the segment.
func (s *segment) note(ts []*Tensor) {
	for _, t := range ts {
		if t.Trained() && !slices.Contains(s.params, t) {
			s.params = append(s.params, t)
		}
	}
}

// keep gives back the memory the graph handed out since mark, all but a copy of y's values,
// which it returns. The copy is enqueued before the memory is reused, on the same stream.
func (g *Graph) keep(y *Tensor, mark int) *Tensor {
	out := g.newTensor(y.shape)
	g.run(func() error { return g.ops.Copy(g.s, out.data, y.data) })
	if g.err == nil {
		last := g.used[len(g.used)-1]
		g.release(mark, len(g.used)-1)
		g.used = append(g.used, last)
	}
	return out
}

// release gives the memory the graph handed out from the mark from to to back to its pool, and
// forgets what it handed out after.
func (g *Graph) release(from, to int) {
	for _, v := range g.used[from:to] {
		g.pool[v.Len] = append(g.pool[v.Len], v)
	}
	g.used = g.used[:from]
}

// recompute is a checkpointed module's VJP: it runs m's forward pass again from x, recorded
// after the end of the record, walks that part of the record backward from dy (the parameters'
// gradients accumulating as everywhere else), returns x's gradient, and forgets the part and
// its memory.
func (g *Graph) recompute(m Module, x, dy *Tensor, draws uint64) *Tensor {
	n0, mark, after := len(g.nodes), len(g.used), g.draws
	g.draws, g.backward, g.recomputing = draws, false, true
	in := g.tensor(x.shape, x.data)
	g.record(in, OpInput, nil, nil, nil)
	in.grad = x.grad
	y := m.Forward(in)
	g.draws, g.backward, g.recomputing = after, true, false
	if g.err != nil {
		return nil
	}
	if y == nil || !slices.Equal(y.shape, dy.shape) {
		g.fail(fmt.Errorf("nn: checkpoint: the module's second pass gave a result of shape %v, its first %v: %w", shapeOf(y), dy.shape, ErrGraph))
		return nil
	}
	defer func() { // forget the second pass's part of the record
		clear(g.nodes[n0:])
		g.nodes, g.grads, g.pieces = g.nodes[:n0], g.grads[:n0], g.pieces[:n0]
	}()
	if y.id <= n0 { // not made by the second pass: a parameter returned as it is
		if y.p != nil && y.grad {
			g.accumulate(y, dy)
		}
		g.release(mark, len(g.used))
		return nil
	}
	// The recorded part's flags and gradients, as Backward sets them for the whole record.
	n := len(g.nodes)
	g.grads = slices.Grow(g.grads, n-len(g.grads))[:n]
	g.pieces = slices.Grow(g.pieces, n-len(g.pieces))[:n]
	for i := n0; i < n; i++ {
		g.grads[i], g.pieces[i] = nil, g.pieces[i][:0]
		if nd := g.nodes[i]; nd.vjp != nil {
			nd.out.grad = slices.ContainsFunc(nd.ins, func(t *Tensor) bool { return t.grad })
		}
	}
	g.grads[y.id-1] = dy
	for i := n - 1; i >= n0 && g.err == nil; i-- {
		g.step(i)
	}
	if gx := g.grads[in.id-1]; gx != nil && g.err == nil {
		return g.keep(gx, mark)
	}
	if g.err == nil {
		g.release(mark, len(g.used))
	}
	return nil
}

// copyOf is a tensor of the graph holding t's values as they are now (a buffer's, which the pass
// updates).
func (g *Graph) copyOf(t *Tensor) *Tensor {
	c := g.newTensor(t.shape)
	g.run(func() error { return g.ops.Copy(g.s, c.data, t.data) })
	return c
}

// Activations counts the float32 values a training pass of m over an input of the given shape
// keeps for its backward pass, found as Infer finds a shape, without memory or kernels: every
// op's output, except that of a Checkpoint only the output is kept, and the largest checkpointed
// module's outputs once more, for its recomputation. largest is the op with the largest output.
// A trainer checks a batch's memory with it before allocating any.
func Activations(m Module, shape ...int) (values int64, largest Step, err error) {
	g := &Graph{train: true, meta: true}
	restore, err := g.lend(m)
	if err != nil {
		return 0, Step{}, err
	}
	defer restore()
	out := m.Forward(g.Input(kernels.F32{}, shape...))
	if g.err != nil {
		return 0, Step{}, g.err
	}
	if out == nil || out.g != g {
		return 0, Step{}, errors.New("nn: the forward pass returned no tensor of its graph")
	}
	inner := make([]bool, len(g.nodes))
	peak := int64(0)
	for _, s := range g.segs {
		sum := int64(0)
		for i := s[0]; i < s[1]-1; i++ { // the segment's last op is its output, which is kept
			inner[i] = true
			sum += int64(g.nodes[i].out.Len())
		}
		peak = max(peak, sum)
	}
	for i, n := range g.nodes[1:] { // not the input, the caller's memory
		v := int64(n.out.Len())
		if !inner[i+1] {
			values += v
		}
		if largest.Out == nil || v > int64(largest.Out.Len()) {
			largest = Step{Op: n.op, In: slices.Clone(n.ins), Out: n.out}
		}
	}
	return values + peak, largest, nil
}
