package nn

import (
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// The fused ops: one kernel forward, one backward, and their VJP written here by hand.

// Linear returns x·wᵀ + b for x [..., in], w [out in] (PyTorch's layout) and b [out] or nil.
func Linear(x, w, b *Tensor) *Tensor {
	g := graphOf("linear", x, w, b)
	if g == nil {
		return orphan("linear")
	}
	if len(x.shape) < 1 || len(w.shape) != 2 || x.shape[len(x.shape)-1] != w.shape[1] || (b != nil && !slices.Equal(b.shape, w.shape[:1])) {
		g.fail(fmt.Errorf("nn: linear of input %v, weight %v, bias %v: %w", x.shape, w.shape, shapeOf(b), ErrShape))
		return &Tensor{g: g}
	}
	rows, in, out := x.Len()/max(x.shape[len(x.shape)-1], 1), w.shape[1], w.shape[0]
	y := g.newTensor(g.shape(x.shape[:len(x.shape)-1], out))
	pg := g.preparedLinear(w)
	g.run(func() error {
		var err error
		if pg != nil {
			err = pg.Gemm(g.s, false, rows, 1, x.data, 0, y.data)
		} else {
			err = g.ops.Gemm(g.s, false, true, rows, out, in, 1, x.data, w.data, 0, y.data)
		}
		if err != nil {
			return err
		}
		if b == nil {
			return nil
		}
		return g.ops.BiasAdd(g.s, y.data, b.data, rows, 1)
	})
	g.record(y, OpLinear, nil, g.operands(x, w, b), func(dy *Tensor, grads []*Tensor) {
		if x.grad {
			dx := g.newTensor(x.shape)
			g.run(func() error { return g.ops.Gemm(g.s, false, false, rows, in, out, 1, dy.data, w.data, 0, dx.data) })
			grads[0] = dx
		}
		if w.grad {
			dw := g.gradFor(w)
			g.run(func() error { return g.ops.Gemm(g.s, true, false, out, in, rows, 1, dy.data, x.data, 0, dw.data) })
			grads[1] = dw
		}
		if b != nil && b.grad {
			db := g.gradFor(b)
			g.run(func() error { return g.ops.BiasGrad(g.s, db.data, dy.data, rows, 1) })
			grads[2] = db
		}
	})
	return y
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func shapeOf(t *Tensor) []int {
	if t == nil {
		return nil
	}
	return t.shape
}

// ConvOptions are a convolution's stride, zero padding and groups (0 stride or groups mean 1).
type ConvOptions struct {
	Stride, Padding, Groups int
}

// Conv2d returns the convolution of x [N C H W] with w [O C/groups KH KW], plus b [O] unless nil
// (torch.nn.functional.conv2d with dilation 1). With groups > 1, output channels
// [i·O/groups, (i+1)·O/groups) see input channels [i·C/groups, (i+1)·C/groups) only (grouped
// and depthwise convolutions). A depthwise convolution (groups = C = O, square kernels) runs
// kernels of its own (kernels.Ops.DepthwiseConv2D); other groupings are computed one group at a
// time.
func Conv2d(x, w, b *Tensor, o ConvOptions) *Tensor {
	g := graphOf("conv2d", x, w, b)
	if g == nil {
		return orphan("conv2d")
	}
	groups := max(o.Groups, 1)
	if len(x.shape) != 4 || len(w.shape) != 4 || x.shape[1] != w.shape[1]*groups || w.shape[0]%groups != 0 || (b != nil && !slices.Equal(b.shape, w.shape[:1])) {
		g.fail(fmt.Errorf("nn: conv2d of input %v, weight %v, bias %v, groups %d: %w", x.shape, w.shape, shapeOf(b), groups, ErrShape))
		return &Tensor{g: g}
	}
	if groups > 1 && groups == x.shape[1] && w.shape[0] == groups && w.shape[2] == w.shape[3] {
		return depthwiseConv2d(g, x, w, b, o)
	}
	if groups > 1 && !g.meta {
		ci, co := x.shape[1]/groups, w.shape[0]/groups
		o.Groups = 1
		ys := make([]*Tensor, groups)
		for i := range ys {
			var bi *Tensor
			if b != nil {
				bi = Narrow(b, 0, i*co, co)
			}
			ys[i] = Conv2d(Narrow(x, 1, i*ci, ci), Narrow(w, 0, i*co, co), bi, o)
		}
		return Concat(1, ys...)
	}
	// A grouped convolution of a meta graph (Infer, Trace) is one step of all its groups: no
	// kernel runs, and the per-group views above cannot be taken of parameters, which belong to
	// no graph there.
	geo := kernels.Conv2D{N: x.shape[0], InC: x.shape[1], InH: x.shape[2], InW: x.shape[3],
		OutC: w.shape[0], KH: w.shape[2], KW: w.shape[3], Stride: o.Stride, Pad: o.Padding}
	if err := geo.Validate(); err != nil {
		g.fail(fmt.Errorf("nn: conv2d of input %v, weight %v, %+v: %w", x.shape, w.shape, o, err))
		return &Tensor{g: g}
	}
	attr := func() Attr {
		a := Attr{"stride": geo.Stride, "padding": geo.Pad}
		if groups > 1 {
			a["groups"] = groups
		}
		return a
	}
	y := g.newTensor(g.shape(nil, geo.N, geo.OutC, geo.OutH(), geo.OutW()))
	ws := g.buf(geo.WorkspaceLen())
	var bias kernels.F32
	if b != nil {
		bias = b.data
	}
	pc := g.preparedConv(w, geo)
	g.run(func() error {
		if pc != nil {
			return pc.Conv2D(g.s, y.data, x.data, bias, ws, geo)
		}
		return g.ops.Conv2D(g.s, y.data, x.data, w.data, bias, ws, geo)
	})
	g.record(y, OpConv2D, attr, g.operands(x, w, b), func(dy *Tensor, grads []*Tensor) {
		var dx, db kernels.F32
		if x.grad {
			grads[0] = g.newTensor(x.shape)
			dx = grads[0].data
		}
		grads[1] = g.gradFor(w)
		if b != nil {
			grads[2] = g.gradFor(b)
			db = grads[2].data
		}
		if pc != nil { // the prepared forward pass left nothing in ws for the backward pass
			again := g.newTensor(y.shape)
			g.run(func() error { return g.ops.Conv2D(g.s, again.data, x.data, w.data, bias, ws, geo) })
		}
		g.run(func() error { return g.ops.Conv2DBackward(g.s, dx, grads[1].data, db, dy.data, w.data, ws, geo) })
		if !w.grad {
			grads[1] = nil
		}
		if b != nil && !b.grad {
			grads[2] = nil
		}
	})
	return y
}

// depthwiseConv2d is Conv2d of x [N C H W] with w [C 1 K K] and groups C, recorded as a conv2d
// step with its groups. Its VJP is the kernel's backward pass: dx (when x needs it), dw and dbias
// from dy, x and w.
func depthwiseConv2d(g *Graph, x, w, b *Tensor, o ConvOptions) *Tensor {
	geo := kernels.Depthwise2D{N: x.shape[0], C: x.shape[1], H: x.shape[2], W: x.shape[3], K: w.shape[2], Stride: o.Stride, Pad: o.Padding}
	if err := geo.Validate(); err != nil {
		g.fail(fmt.Errorf("nn: conv2d of input %v, weight %v, %+v: %w", x.shape, w.shape, o, err))
		return &Tensor{g: g}
	}
	y := g.newTensor(g.shape(nil, geo.N, geo.C, geo.OutH(), geo.OutW()))
	var bias kernels.F32
	if b != nil {
		bias = b.data
	}
	g.run(func() error { return g.ops.DepthwiseConv2D(g.s, y.data, x.data, w.data, bias, geo) })
	attr := func() Attr { return Attr{"stride": geo.Stride, "padding": geo.Pad, "groups": geo.C} }
	g.record(y, OpConv2D, attr, g.operands(x, w, b), func(dy *Tensor, grads []*Tensor) {
		var dx, db kernels.F32
		if x.grad {
			grads[0] = g.newTensor(x.shape)
			dx = grads[0].data
		}
		grads[1] = g.gradFor(w)
		if b != nil && b.grad {
			grads[2] = g.gradFor(b)
			db = grads[2].data
		}
		g.run(func() error {
			return g.ops.DepthwiseConv2DBackward(g.s, dx, grads[1].data, db, dy.data, x.data, w.data, geo)
		})
		if !w.grad {
			grads[1] = nil
		}
	})
	return y
}

// BatchNorm normalizes x [N C ...] per channel (torch.nn.functional.batch_norm): in training with
// the batch's statistics, updating the running ones (momentum as PyTorch's), in evaluation with
// the running ones, as in training when weight is a parameter bound without gradient memory (a
// frozen batch norm). weight and bias are [C].
func BatchNorm(x, runMean, runVar, weight, bias *Tensor, momentum, eps float32) *Tensor {
	g := graphOf("batch norm", x, runMean, runVar, weight, bias)
	if g == nil {
		return orphan("batch norm")
	}
	if len(x.shape) < 2 {
		g.fail(fmt.Errorf("nn: batch norm of a tensor of shape %v: %w", x.shape, ErrShape))
		return &Tensor{g: g}
	}
	c := x.shape[1]
	for _, t := range [...]*Tensor{runMean, runVar, weight, bias} {
		if t == nil || len(t.shape) != 1 || t.shape[0] != c {
			g.fail(fmt.Errorf("nn: batch norm of %v: a statistic or affine tensor of shape %v; want [%d]: %w", x.shape, shapeOf(t), c, ErrShape))
			return &Tensor{g: g}
		}
	}
	geo := kernels.BatchNorm{N: x.shape[0], C: c, HW: prod(x.shape[2:]), Momentum: momentum, Eps: eps}
	if err := geo.Validate(); err != nil {
		g.fail(fmt.Errorf("nn: batch norm of %v: %w", x.shape, err))
		return &Tensor{g: g}
	}
	y := g.newTensor(x.shape)
	attr := func() Attr { return Attr{"eps": eps, "momentum": momentum} }
	// A frozen batch norm (its affine parameters bound without gradient memory: a trainer's
	// frozen backbone) evaluates in training too, as torchvision's FrozenBatchNorm2d.
	frozen := weight.Trained() && !weight.grad
	if !g.train || frozen {
		g.run(func() error {
			return g.ops.BatchNormEval(g.s, y.data, x.data, weight.data, bias.data, runMean.data, runVar.data, geo)
		})
		g.record(y, OpBatchNorm, attr, g.operands(x, weight, bias, runMean, runVar), func(dy *Tensor, dx []*Tensor) {
			// y = x·s + t per channel, s = weight/√(runVar+eps): dx = dy·s. The affine tensors
			// of a batch norm in evaluation (frozen) get no gradient.
			scale := Mul(weight, Rsqrt(AddScalar(runVar, eps)))
			dx[0] = Mul(dy, scale.Reshape(append([]int{c}, ones(len(x.shape)-2)...)...))
		})
		return y
	}
	if g.recomputing {
		// Checkpoint's second pass: the running statistics were updated by the first.
		runMean, runVar = g.copyOf(runMean), g.copyOf(runVar)
	}
	mean, invStd := g.buf(c), g.buf(c)
	sync := g.sync
	if sync == nil {
		g.run(func() error {
			return g.ops.BatchNormTrain(g.s, y.data, x.data, weight.data, bias.data, runMean.data, runVar.data, mean, invStd, geo)
		})
	} else {
		// Every rank writes its record in its own place of the gathered records (zeros
		// elsewhere), and their sum over the ranks is every rank's records.
		rec := 2*c + 1
		stats := g.buf(sync.world * rec)
		g.run(func() error { return g.ops.Fill(g.s, stats, 0) })
		g.run(func() error {
			return g.ops.BatchNormStats(g.s, stats.Slice(sync.rank*rec, (sync.rank+1)*rec), x.data, geo)
		})
		g.run(func() error {
			if err := sync.sum(stats); err != nil {
				return fmt.Errorf("nn: sync batch norm statistics: %w", err)
			}
			return nil
		})
		g.run(func() error {
			return g.ops.BatchNormTrainStats(g.s, y.data, x.data, weight.data, bias.data, runMean.data, runVar.data, mean, invStd, stats, geo)
		})
	}
	g.record(y, OpBatchNorm, attr, g.operands(x, weight, bias, runMean, runVar), func(dy *Tensor, grads []*Tensor) {
		var dx kernels.F32
		grads[1], grads[2] = g.gradFor(weight), g.gradFor(bias)
		if x.grad {
			grads[0] = g.newTensor(x.shape)
			dx = grads[0].data
		}
		if sync == nil || !x.grad {
			g.run(func() error {
				return g.ops.BatchNormBackward(g.s, dx, grads[1].data, grads[2].data, dy.data, x.data, weight.data, mean, invStd, geo)
			})
			return
		}
		// The weight and bias gradients stay this rank's (data-parallel training averages them
		// as any other); their sums over the ranks, with the total count, give dx.
		sums := g.buf(2*c + 1)
		g.run(func() error {
			return g.ops.BatchNormBackward(g.s, kernels.F32{}, grads[1].data, grads[2].data, dy.data, x.data, weight.data, mean, invStd, geo)
		})
		g.run(func() error { return g.ops.Copy(g.s, sums.Slice(0, c), grads[1].data) })
		g.run(func() error { return g.ops.Copy(g.s, sums.Slice(c, 2*c), grads[2].data) })
		g.run(func() error { return g.ops.Fill(g.s, sums.Slice(2*c, 2*c+1), float32(geo.N*geo.HW)) })
		g.run(func() error {
			if err := sync.sum(sums); err != nil {
				return fmt.Errorf("nn: sync batch norm gradient sums: %w", err)
			}
			return nil
		})
		g.run(func() error {
			return g.ops.BatchNormBackwardInput(g.s, dx, dy.data, x.data, weight.data, mean, invStd, sums, geo)
		})
	})
	return y
}

// LayerNorm normalizes each vector along x's last dimension with its mean and biased variance
// (torch.nn.functional.layer_norm over the last dimension); weight and bias are [last] or nil.
func LayerNorm(x, weight, bias *Tensor, eps float32) *Tensor {
	g := graphOf("layer norm", x, weight, bias)
	if g == nil {
		return orphan("layer norm")
	}
	cols := x.Dim(-1)
	for _, t := range [...]*Tensor{weight, bias} {
		if t != nil && (len(t.shape) != 1 || t.shape[0] != cols) {
			g.fail(fmt.Errorf("nn: layer norm of %v: weight or bias of shape %v: %w", x.shape, t.shape, ErrShape))
			return &Tensor{g: g}
		}
	}
	rows := x.Len() / max(cols, 1)
	var gamma, beta kernels.F32
	if weight != nil {
		gamma = weight.data
	}
	if bias != nil {
		beta = bias.data
	}
	y := g.newTensor(x.shape)
	mean, rstd := g.buf(rows), g.buf(rows)
	g.run(func() error { return g.ops.LayerNorm(g.s, y.data, mean, rstd, x.data, gamma, beta, rows, cols, eps) })
	g.record(y, OpLayerNorm, func() Attr { return Attr{"eps": eps} }, g.operands(x, weight, bias), func(dy *Tensor, grads []*Tensor) {
		dx := g.newTensor(x.shape)
		grads[0] = dx
		var dgamma, dbeta kernels.F32
		i := 1
		if weight != nil {
			grads[i] = g.newTensor(weight.shape)
			dgamma, i = grads[i].data, i+1
		}
		if bias != nil {
			grads[i] = g.newTensor(bias.shape)
			dbeta = grads[i].data
		}
		g.run(func() error {
			return g.ops.LayerNormBackward(g.s, dx.data, dgamma, dbeta, dy.data, x.data, gamma, mean, rstd, rows, cols)
		})
	})
	return y
}

// Softmax returns the softmax of x along its last dimension.
func Softmax(x *Tensor) *Tensor {
	g := graphOf("softmax", x)
	if g == nil {
		return orphan("softmax")
	}
	cols := x.Dim(-1)
	rows := x.Len() / max(cols, 1)
	y := g.newTensor(x.shape)
	g.run(func() error { return g.ops.Softmax(g.s, y.data, x.data, rows, cols) })
	g.record(y, OpSoftmax, nil, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.newTensor(x.shape)
		g.run(func() error { return g.ops.SoftmaxBackward(g.s, dx[0].data, dy.data, y.data, rows, cols) })
	})
	return y
}

// ScaledDotProductAttention returns softmax(scale·q·kᵀ)·v over the last two dimensions of q
// [..., Lq, D] and k, v [..., Lk, D] (the leading dimensions, batch and heads, equal), as torch's
// F.scaled_dot_product_attention without a mask or dropout (its default scale is 1/√D). It is one
// fused op (kernels.Ops.Attention) that never holds the whole score matrix, and its VJP recomputes
// the scores block by block; attention dropout needs the composed MatMul, Softmax, Dropout, MatMul.
func ScaledDotProductAttention(q, k, v *Tensor, scale float32) *Tensor {
	g := graphOf("scaled dot-product attention", q, k, v)
	if g == nil {
		return orphan("scaled dot-product attention")
	}
	r := len(q.shape)
	if r < 2 || len(k.shape) != r || !slices.Equal(k.shape, v.shape) || !slices.Equal(q.shape[:r-2], k.shape[:r-2]) || q.shape[r-1] != k.shape[r-1] {
		g.fail(fmt.Errorf("nn: scaled dot-product attention of query %v, key %v, value %v: %w", q.shape, k.shape, v.shape, ErrShape))
		return &Tensor{g: g}
	}
	geo := kernels.Attention{Batch: prod(q.shape[:r-2]), LQ: q.shape[r-2], LK: k.shape[r-2], D: q.shape[r-1], Scale: scale}
	if err := geo.Validate(); err != nil {
		g.fail(fmt.Errorf("nn: scaled dot-product attention of query %v, key %v, value %v, scale %v: %w", q.shape, k.shape, v.shape, scale, err))
		return &Tensor{g: g}
	}
	y := g.newTensor(q.shape)
	lse := g.buf(geo.Rows()) // each query's log-sum-exp, for the backward pass
	g.run(func() error { return g.ops.Attention(g.s, y.data, lse, q.data, k.data, v.data, geo) })
	attr := func() Attr { return Attr{"scale": scale} }
	g.record(y, OpScaledDotProductAttention, attr, g.operands(q, k, v), func(dy *Tensor, dx []*Tensor) {
		dq, dk, dv := g.newTensor(q.shape), g.newTensor(k.shape), g.newTensor(v.shape)
		g.run(func() error {
			return g.ops.AttentionBackward(g.s, dq.data, dk.data, dv.data, dy.data, q.data, k.data, v.data, y.data, lse, geo)
		})
		dx[0], dx[1], dx[2] = dq, dk, dv
	})
	return y
}

// MaxPool2d returns the maximum of each k×k window of x [N C H W], every stride pixels (0: k),
// over x padded with pad pixels of −∞.
func MaxPool2d(x *Tensor, k, stride, pad int) *Tensor {
	g := graphOf("max pool", x)
	if g == nil {
		return orphan("max pool")
	}
	if len(x.shape) != 4 {
		g.fail(fmt.Errorf("nn: max pool of a tensor of shape %v: %w", x.shape, ErrShape))
		return &Tensor{g: g}
	}
	geo := kernels.Pool2D{N: x.shape[0], C: x.shape[1], H: x.shape[2], W: x.shape[3], K: k, Stride: stride, Pad: pad}
	if err := geo.Validate(); err != nil {
		g.fail(fmt.Errorf("nn: max pool of %v: %w", x.shape, err))
		return &Tensor{g: g}
	}
	y := g.newTensor(g.shape(nil, geo.N, geo.C, geo.OutH(), geo.OutW()))
	arg := kernels.I32(g.buf(geo.OutLen()))
	g.run(func() error { return g.ops.MaxPool2D(g.s, y.data, arg, x.data, geo) })
	attr := func() Attr { return Attr{"kernel": k, "stride": geo.Stride, "padding": pad} }
	g.record(y, OpMaxPool2D, attr, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.newTensor(x.shape)
		g.run(func() error { return g.ops.MaxPool2DBackward(g.s, dx[0].data, dy.data, arg, geo) })
	})
	return y
}

// GlobalAvgPool returns the mean of each channel of x [N C H W] as [N C 1 1]
// (AdaptiveAvgPool2d(1)).
func GlobalAvgPool(x *Tensor) *Tensor {
	g := graphOf("average pool", x)
	if g == nil {
		return orphan("average pool")
	}
	if len(x.shape) != 4 {
		g.fail(fmt.Errorf("nn: global average pool of a tensor of shape %v: %w", x.shape, ErrShape))
		return &Tensor{g: g}
	}
	inner := x.shape[2] * x.shape[3]
	y := g.newTensor(g.shape(nil, x.shape[0], x.shape[1], 1, 1))
	g.run(func() error { return g.ops.GlobalAvgPool(g.s, y.data, x.data, inner) })
	g.record(y, OpGlobalAvgPool, nil, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.newTensor(x.shape)
		g.run(func() error { return g.ops.GlobalAvgPoolBackward(g.s, dx[0].data, dy.data, inner) })
	})
	return y
}

// Dropout zeroes each element with probability p in training and scales the others by 1/(1−p);
// in evaluation it returns x. The mask is a function of the graph's seed and the number of
// random ops before it in the pass.
func Dropout(x *Tensor, p float32) *Tensor {
	g := graphOf("dropout", x)
	if g == nil {
		return orphan("dropout")
	}
	if !g.train || p == 0 {
		return x
	}
	g.draws++
	seed := g.seed ^ (g.draws * 0x9e3779b97f4a7c15)
	y := g.newTensor(x.shape)
	mask := g.newTensor(x.shape)
	g.run(func() error { return g.ops.Dropout(g.s, y.data, mask.data, x.data, p, seed) })
	g.record(y, OpDropout, func() Attr { return Attr{"p": p} }, g.operands(x), func(dy *Tensor, dx []*Tensor) { dx[0] = Mul(dy, mask) })
	return y
}

// DropPath drops each sample's x with probability p in training and scales the others by
// 1/(1−p) (stochastic depth: timm's drop_path, torchvision's StochasticDepth in "row" mode); in
// evaluation it returns x.
func DropPath(x *Tensor, p float32) *Tensor {
	g := graphOf("drop path", x)
	if g == nil {
		return orphan("drop path")
	}
	if !g.train || p == 0 || len(x.shape) == 0 {
		return x
	}
	shape := append([]int{x.shape[0]}, ones(len(x.shape)-1)...)
	return Mul(x, Dropout(g.Full(1, shape...), p))
}
