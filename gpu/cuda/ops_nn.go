//go:build cuda

package cuda

import (
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// The classifier ops of the CUDA op set (kernels at the end of ops.cu).

func (o *cudaOps) Add(gs gpu.Stream, z, x, y kernels.F32) error {
	s, e0 := o.stream("add", gs)
	zp, e1 := o.f32("add", "z", z)
	xp, e2 := o.f32("add", "x", x)
	yp, e3 := o.f32("add", "y", y)
	if err := firstErr(e0, e1, e2, e3); err != nil {
		return err
	}
	return o.launchN(s, "add_f32", z.Len, parg(zp), parg(xp), parg(yp), iarg(z.Len))
}

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

// bnPtrs resolves the views of a batch norm (an empty dx resolves to 0: skipped).
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

func bnArgs(g kernels.BatchNorm) []uint64 { return []uint64{iarg(g.N), iarg(g.C), iarg(g.HW)} }

func (o *cudaOps) BatchNormTrain(gs gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"y", "x", "gamma", "beta", "running mean", "running var", "saved mean", "saved inverse std"},
		y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd)
	if err != nil || g.N == 0 {
		return err
	}
	// One block per channel (the kernel's shared array holds blockSize partial sums).
	return o.launch(s, "bn_train_f32", g.C, blockSize, append(append(p, bnArgs(g)...), farg(g.Momentum), farg(g.Eps))...)
}

func (o *cudaOps) BatchNormEval(gs gpu.Stream, y, x, gamma, beta, runMean, runVar kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm eval"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"y", "x", "gamma", "beta", "running mean", "running var"}, y, x, gamma, beta, runMean, runVar)
	if err != nil {
		return err
	}
	return o.launchN(s, "bn_eval_f32", g.Len(), append(append(p, bnArgs(g)...), farg(g.Eps))...)
}

func (o *cudaOps) BatchNormBackward(gs gpu.Stream, dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm backward"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"dx", "dy", "x", "dgamma", "dbeta", "gamma", "saved mean", "saved inverse std"},
		dx, dy, x, dgamma, dbeta, gamma, saveMean, saveInvStd)
	if err != nil || g.N == 0 {
		return err
	}
	// The kernel takes dx, dgamma, dbeta, dy, x, gamma, saved mean, saved inverse std.
	args := []uint64{p[0], p[3], p[4], p[1], p[2], p[5], p[6], p[7]}
	return o.launch(s, "bn_backward_f32", g.C, blockSize, append(args, bnArgs(g)...)...)
}

func (o *cudaOps) BatchNormStats(gs gpu.Stream, stats, x kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm stats"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"stats", "x"}, stats, x)
	if err != nil {
		return err
	}
	return o.launch(s, "bn_stats_f32", g.C, blockSize, append(p, bnArgs(g)...)...)
}

func (o *cudaOps) BatchNormTrainStats(gs gpu.Stream, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm over gathered stats"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"y", "x", "gamma", "beta", "running mean", "running var", "saved mean", "saved inverse std", "stats"},
		y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats)
	if err != nil {
		return err
	}
	args := append(append(p, iarg(stats.Len/(2*g.C+1))), bnArgs(g)...)
	return o.launch(s, "bn_train_stats_f32", g.C, blockSize, append(args, farg(g.Momentum), farg(g.Eps))...)
}

func (o *cudaOps) BatchNormBackwardInput(gs gpu.Stream, dx, dy, x, gamma, saveMean, saveInvStd, sums kernels.F32, g kernels.BatchNorm) error {
	const op = "batch norm input gradient"
	s, err := o.stream(op, gs)
	if err != nil {
		return err
	}
	p, err := o.bnPtrs(op, []string{"dx", "dy", "x", "gamma", "saved mean", "saved inverse std", "sums"}, dx, dy, x, gamma, saveMean, saveInvStd, sums)
	if err != nil {
		return err
	}
	return o.launchN(s, "bn_backward_input_f32", g.Len(), append(p, bnArgs(g)...)...)
}

func (o *cudaOps) ToBF16(gs gpu.Stream, dst kernels.U8, src kernels.F32) error {
	return o.to16(gs, "to bf16", dst, src, 0)
}

func (o *cudaOps) FromBF16(gs gpu.Stream, dst kernels.F32, src kernels.U8) error {
	return o.from16(gs, "from bf16", dst, src, 0)
}

func (o *cudaOps) ToFP16(gs gpu.Stream, dst kernels.U8, src kernels.F32) error {
	return o.to16(gs, "to fp16", dst, src, 1)
}

func (o *cudaOps) FromFP16(gs gpu.Stream, dst kernels.F32, src kernels.U8) error {
	return o.from16(gs, "from fp16", dst, src, 1)
}

// to16 rounds src into dst's bf16 (fp16 0) or fp16 (fp16 1) values: to_x16, the products'
// operand conversion.
func (o *cudaOps) to16(gs gpu.Stream, op string, dst kernels.U8, src kernels.F32, fp16 uint64) error {
	s, e0 := o.stream(op, gs)
	dp, e1 := o.u8(op, "dst", dst)
	sp, e2 := o.f32(op, "src", src)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	return o.launchN(s, "to_x16", src.Len, parg(dp), parg(sp), iarg(src.Len), fp16)
}

// from16 widens src's bf16 (fp16 0) or fp16 (fp16 1) values into dst.
func (o *cudaOps) from16(gs gpu.Stream, op string, dst kernels.F32, src kernels.U8, fp16 uint64) error {
	s, e0 := o.stream(op, gs)
	dp, e1 := o.f32(op, "dst", dst)
	sp, e2 := o.u8(op, "src", src)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	return o.launchN(s, "x16_to_f32", dst.Len, parg(dp), parg(sp), iarg(dst.Len), fp16)
}

func (o *cudaOps) GlobalAvgPool(gs gpu.Stream, y, x kernels.F32, inner int) error {
	const op = "global average pool"
	s, e0 := o.stream(op, gs)
	yp, e1 := o.f32(op, "y", y)
	xp, e2 := o.f32(op, "x", x)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	return o.launchN(s, "gap_f32", y.Len, parg(yp), parg(xp), iarg(y.Len), iarg(inner))
}

func (o *cudaOps) GlobalAvgPoolBackward(gs gpu.Stream, dx, dy kernels.F32, inner int) error {
	const op = "global average pool backward"
	s, e0 := o.stream(op, gs)
	dxp, e1 := o.f32(op, "dx", dx)
	dyp, e2 := o.f32(op, "dy", dy)
	if err := firstErr(e0, e1, e2); err != nil {
		return err
	}
	return o.launchN(s, "gap_grad_f32", dx.Len, parg(dxp), parg(dyp), iarg(dy.Len), iarg(inner))
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
