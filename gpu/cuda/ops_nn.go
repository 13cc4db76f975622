//go:build cuda

package cuda

import (
	"gorgonia.org/cu"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// The classifier ops of the CUDA op set (kernels at the end of ops.cu).

func (o *cudaOps) SoftmaxCrossEntropySmooth(gs gpu.Stream, loss, dlogits, logits kernels.F32, labels kernels.I32, n, classes int, smoothing float32) error {
	return o.softmaxCrossEntropy(gs, loss, dlogits, logits, labels, n, classes, smoothing)
}

// softmaxCrossEntropy is both losses: one kernel, softmax_ce_f32, whose smoothing 0 gives one-hot
// targets bit for bit.
func (o *cudaOps) softmaxCrossEntropy(gs gpu.Stream, loss, dlogits, logits kernels.F32, labels kernels.I32, n, classes int, smoothing float32) error {
	const op = "softmax cross-entropy"
	s, e0 := o.stream(op, gs)
	lp, e1 := o.f32(op, "loss", loss)
	dp, e2 := o.f32(op, "dlogits", dlogits)
	xp, e3 := o.f32(op, "logits", logits)
	yp, e4 := o.i32(op, "labels", labels)
	if err := firstErr(e0, e1, e2, e3, e4); err != nil {
		return err
	}
	if n == 0 {
		return o.launchN(s, "fill_f32", 1, parg(lp), iarg(1), farg(0))
	}
	return o.launchChecked(gs, s, op, "softmax_ce_f32", n, classes, parg(lp), parg(dp), parg(xp), parg(yp), iarg(n), iarg(classes), farg(smoothing))
}

func (o *cudaOps) FloatLoss(gs gpu.Stream, loss, dpred, pred, target, posWeight kernels.F32, n, dim int, l kernels.Loss) error {
	const op = "float loss"
	s, e0 := o.stream(op, gs)
	lp, e1 := o.f32(op, "loss", loss)
	dp, e2 := o.f32(op, "dpred", dpred)
	xp, e3 := o.f32(op, "pred", pred)
	tp, e4 := o.f32(op, "target", target)
	wp, e5 := o.f32(op, "posWeight", posWeight) // 0 when empty: all weights 1
	if err := firstErr(e0, e1, e2, e3, e4, e5); err != nil {
		return err
	}
	if n == 0 {
		return o.launchN(s, "fill_f32", 1, parg(lp), iarg(1), farg(0))
	}
	return o.launch(s, "float_loss_f32", 1, 1024, parg(lp), parg(dp), parg(xp), parg(tp), parg(wp), iarg(n), iarg(dim), iarg(int(l.Kind)), farg(l.Beta))
}

// bnPtrs resolves the views of a batch or layer norm, in order (an empty view resolves to 0:
// skipped, or gamma 1 and beta 0).
func (o *cudaOps) bnPtrs(op string, names []string, views ...kernels.F32) ([]uint64, error) {
	out := make([]uint64, len(views))
	for i, v := range views {
		p, err := o.f32(op, names[i], v)
		if err != nil {
			return nil, err
		}
		out[i] = parg(p)
	}
	return out, nil
}

// maxPoolPad runs the padded pooling kernels (MaxPool2D and its backward pass hand over here when
// g.Pad > 0); name is "maxpool_pad_f32" or "maxpool_pad_grad_f32", ptrs their three pointers.
func (o *cudaOps) maxPoolPad(gs gpu.Stream, name string, n int, g kernels.Pool2D, ptrs ...uint64) error {
	s, err := o.stream("maxpool2d", gs)
	if err != nil {
		return err
	}
	return o.launchN(s, name, n, append(append(ptrs, poolArgs(g)...), iarg(g.Pad))...)
}

// The differentiable core's ops (package nn): their kernels end ops.cu.

// dims is ops.cu's struct dims, the last parameter of the strided kernels, passed by value: an
// index space of up to kernels.MaxRank dimensions (MAX_RANK there) and the element strides s0 and
// s1 of two operands over it. The stand-in checks its size against the kernel's signature.
type dims struct {
	rank   int
	shape  [kernels.MaxRank]int
	s0, s1 [kernels.MaxRank]int
}

// newDims is the simplified index space of shape with the strides s0 and s1.
func newDims(shape, s0, s1 []int) *dims {
	d := &dims{rank: len(shape)}
	copy(d.shape[:], shape)
	copy(d.s0[:], s0)
	copy(d.s1[:], s1)
	d.simplify()
	return d
}

// simplify drops the dimensions of size 1 and merges each dimension into the one outside it
// where both operands step through the two as through one (outer stride = inner stride · inner
// size), so that the kernels divide less: a packed operand plus a broadcast row over [B][T][C]
// becomes [B·T][C]. The elements and their order stay the same.
func (d *dims) simplify() {
	out := 0
	for k := range d.rank {
		if d.shape[k] == 1 {
			continue
		}
		if out > 0 && d.s0[out-1] == d.s0[k]*d.shape[k] && d.s1[out-1] == d.s1[k]*d.shape[k] {
			d.shape[out-1] *= d.shape[k]
			d.s0[out-1], d.s1[out-1] = d.s0[k], d.s1[k]
			continue
		}
		d.shape[out], d.s0[out], d.s1[out] = d.shape[k], d.s0[k], d.s1[k]
		out++
	}
	for k := out; k < d.rank; k++ {
		d.shape[k], d.s0[k], d.s1[k] = 0, 0, 0
	}
	d.rank = out
}

// words is the struct as the kernel reads it: 8-byte words in field order.
func (d *dims) words() []uint64 {
	w := make([]uint64, 0, 1+3*kernels.MaxRank)
	w = append(w, iarg(d.rank))
	for _, a := range [][kernels.MaxRank]int{d.shape, d.s0, d.s1} {
		for _, v := range a {
			w = append(w, iarg(v))
		}
	}
	return w
}

// numel is the number of elements of shape (the checks bound the product).
func numel(shape []int) int {
	n := 1
	for _, v := range shape {
		n *= v
	}
	return n
}

// launchDims launches a grid-stride kernel over n elements whose last parameter is d.
func (o *cudaOps) launchDims(s cu.Stream, name string, n int, d *dims, args ...uint64) error {
	if n == 0 {
		return nil
	}
	return o.launchByValue(s, name, min((n+blockSize-1)/blockSize, maxBlocks), blockSize, d.words(), args...)
}

// rowBlock is the block size of the kernels that reduce n values per block (block_sum's limits):
// the power of two in [32, 256] nearest above n, so that a small reduction (a batch norm's channel
// at 1x1) leaves no idle threads waiting at each level's barrier.
func rowBlock(n int) int {
	b := 32
	for b < n && b < 256 {
		b *= 2
	}
	return b
}

// SumTo runs one block per element of y over the r = x.Len/y.Len elements summed into it (a
// copy when every summed dimension has size 1).
func (o *cudaOps) SumTo(gs gpu.Stream, y, x kernels.F32, shape, keep []int) error {
	const op = "sum to"
	s, e0 := o.stream(op, gs)
	yp, e1 := o.f32(op, "y", y)
	xp, e2 := o.f32(op, "x", x)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	if y.Len == x.Len {
		return o.Copy(gs, y, x)
	}
	// s0: x's packed strides; s1: y's, 0 on the summed dimensions.
	var xs, ys [kernels.MaxRank]int
	for k, xstride, ystride := len(shape)-1, 1, 1; k >= 0; k-- {
		xs[k] = xstride
		xstride *= shape[k]
		if keep[k] == shape[k] {
			ys[k] = ystride
			ystride *= shape[k]
		}
	}
	d := newDims(shape, xs[:len(shape)], ys[:len(shape)])
	r := x.Len / y.Len
	return o.launchByValue(s, "sum_to_f32", min(y.Len, maxBlocks), rowBlock(r), d.words(), parg(yp), parg(xp), iarg(y.Len), iarg(r))
}

// LayerNormBackward launches layer_norm_grad_f32 for dx, one block of rowBlock(cols) threads per
// row, and again for dgamma and dbeta, one block of 256 threads per 32 columns.
func (o *cudaOps) LayerNormBackward(gs gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd kernels.F32, rows, cols int) error {
	const op = "layer norm backward"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"dx", "dgamma", "dbeta", "dy", "x", "gamma", "mean", "rstd"}, dx, dgamma, dbeta, dy, x, gamma, mean, rstd)
	if err != nil {
		return err
	}
	in := append(p[3:], iarg(rows), iarg(cols))
	if dx.Len > 0 {
		if err := o.launch(s, "layer_norm_grad_f32", min(rows, maxBlocks), rowBlock(cols), append([]uint64{p[0], 0, 0}, in...)...); err != nil {
			return err
		}
	}
	if dgamma.Len == 0 && dbeta.Len == 0 {
		return nil
	}
	return o.launch(s, "layer_norm_grad_f32", min((cols+31)/32, maxBlocks), 256, append([]uint64{0, p[1], p[2]}, in...)...)
}

func dwArgs(g kernels.Depthwise2D) []uint64 {
	return []uint64{iarg(g.N), iarg(g.C), iarg(g.H), iarg(g.W), iarg(g.K), iarg(max(g.Stride, 1)), iarg(g.Pad), iarg(g.OutH()), iarg(g.OutW())}
}

// DepthwiseConv2DBackward runs dwconv_grad_x_f32 for dx (one thread per input), dwconv_grad_w_f32
// for dw and bias_grad_f32 for dbias (one block per channel each).
func (o *cudaOps) DepthwiseConv2DBackward(gs gpu.Stream, dx, dw, dbias, dy, x, w kernels.F32, g kernels.Depthwise2D) error {
	const op = "depthwise conv2d backward"
	s, e0 := o.stream(op, gs)
	dxp, e1 := o.f32(op, "dx", dx)
	dwp, e2 := o.f32(op, "dw", dw)
	dbp, e3 := o.f32(op, "dbias", dbias)
	dyp, e4 := o.f32(op, "dy", dy)
	xp, e5 := o.f32(op, "x", x)
	wp, e6 := o.f32(op, "w", w)
	if err := firstErr(e0, e1, e2, e3, e4, e5, e6); err != nil {
		return err
	}
	geo := dwArgs(g)
	if err := o.launchN(s, "dwconv_grad_x_f32", dx.Len, append([]uint64{parg(dxp), parg(dyp), parg(wp)}, geo...)...); err != nil {
		return err
	}
	if err := o.launch(s, "dwconv_grad_w_f32", min(g.C, maxBlocks), rowBlock(g.N*g.OutH()*g.OutW()), append([]uint64{parg(dwp), parg(dyp), parg(xp)}, geo...)...); err != nil {
		return err
	}
	if dbias.Len == 0 {
		return nil
	}
	return o.biasGrad(s, dbp, dyp, g.N, g.C, g.OutH()*g.OutW())
}

// attRows is ops.cu's ATT_ROWS: the threads of an attention block, one query (or key) row each.
const attRows = 64

func attArgs(g kernels.Attention) []uint64 {
	return []uint64{iarg(g.Batch), iarg(g.LQ), iarg(g.LK), iarg(g.D), farg(g.Scale)}
}

// AttentionBackward runs attention_grad_q_f32 for dq (one block per problem and attRows queries)
// and attention_grad_kv_f32 for dk and dv (one block per problem and attRows keys): each output
// row is one thread's, so no sum needs atomics.
func (o *cudaOps) AttentionBackward(gs gpu.Stream, dq, dk, dv, dy, q, k, v, y, lse kernels.F32, g kernels.Attention) error {
	const op = "attention backward"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"dq", "dk", "dv", "dy", "q", "k", "v", "y", "lse"}, dq, dk, dv, dy, q, k, v, y, lse)
	if err != nil || g.Batch == 0 {
		return err
	}
	in := append(p[3:], attArgs(g)...)
	if qb := g.Batch * ((g.LQ + attRows - 1) / attRows); qb > 0 {
		if err := o.launch(s, "attention_grad_q_f32", min(qb, maxBlocks), attRows, append([]uint64{p[0]}, in...)...); err != nil {
			return err
		}
	}
	kb := g.Batch * ((g.LK + attRows - 1) / attRows)
	return o.launch(s, "attention_grad_kv_f32", min(kb, maxBlocks), attRows, append([]uint64{p[1], p[2]}, in...)...)
}
