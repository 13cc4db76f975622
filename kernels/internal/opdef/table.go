package opdef

// InterfaceDoc is the doc comment of kernels.Ops.
const InterfaceDoc = `Ops is the operation set training needs, enqueued on a stream of the device the op set was made
for. Every method checks its arguments' shapes and returns an error before enqueueing anything
when they are wrong (the op sets that For and CPU return check them the same way for every
backend, before the backend sees the call); errors that only the data can reveal (a label out of range) become the
stream's sticky error, returned by the stream's Synchronize. Matrices are row-major and packed;
tensors are NCHW. Unless a method says otherwise, outputs must not overlap inputs.

An Ops value is safe for concurrent use; ordering is the stream's.`

// BackendDoc is the doc of Ops.Backend, the one method that is no op.
const BackendDoc = `Backend is the name of the gpu backend this op set runs on ("cpu", "cuda").`

// Table is kernels.Ops, group by group.
var Table = []Group{
	{Ops: []Op{
		{Method: "Fill", Name: "fill", Sig: "x F32, v float32",
			Doc:     `Fill sets every element of x to v.`,
			Checks:  []Check{Out("x")},
			Example: "f(4), 1",
			CPU:     "cpu.Fill(xs, v)",
			CUDA:    `return o.launchN(s, "fill_f32", x.Len, parg(xp), iarg(x.Len), farg(v))`},
		{Method: "Copy", Name: "copy", Sig: "dst, src F32",
			Doc:     `Copy copies src to dst (equal lengths).`,
			Checks:  []Check{In("src"), Out("dst", "src.Len")},
			Example: "f(4), f(4)",
			CPU:     "copy(dsts, srcs)"},
		{Method: "Axpy", Name: "axpy", Sig: "y F32, alpha float32, x F32",
			Doc:     `Axpy computes y += alpha*x.`,
			Checks:  []Check{Out("y"), In("x", "y.Len")},
			Example: "f(4), 2, f(4)",
			CPU:     "cpu.Axpy(ys, alpha, xs)",
			CUDA:    `return o.launchN(s, "axpy_f32", y.Len, parg(yp), parg(xp), iarg(y.Len), farg(alpha))`},
		{Method: "Scale", Name: "scale", Sig: "x F32, alpha float32",
			Doc:     `Scale computes x *= alpha.`,
			Checks:  []Check{Out("x")},
			Example: "f(4), 2",
			CPU:     "cpu.Scale(xs, alpha)",
			CUDA:    `return o.launchN(s, "scale_f32", x.Len, parg(xp), iarg(x.Len), farg(alpha))`},
		{Method: "Mul", Name: "mul", Sig: "z, x, y F32",
			Doc:     `Mul computes z = x*y elementwise; z may be x or y.`,
			Checks:  []Check{Out("z"), In("x", "z.Len"), In("y", "z.Len"), MayBe("z", "x", "y")},
			Example: "f(4), f(4), f(4)",
			CPU:     "cpu.Mul(zs, xs, ys)",
			CUDA:    `return o.launchN(s, "mul_f32", z.Len, parg(zp), parg(xp), parg(yp), iarg(z.Len))`},
	}},
	{Ops: []Op{
		{Method: "Gemm", Name: "gemm", Sig: "transA, transB bool, m, n, k int, alpha float32, a, b F32, beta float32, c F32",
			Doc: `Gemm computes c = alpha*op(a)*op(b) + beta*c, where op(a) is m×k (a is stored k×m when
transA), op(b) is k×n (stored n×k when transB) and c is m×n. With beta 0, c's old contents
(even NaN) are ignored.`,
			Checks: []Check{
				Arg("m < 0 || n < 0 || k < 0", "m, n, k = %d, %d, %d", "m", "n", "k"),
				In("a", "m", "k"), In("b", "k", "n"), Out("c", "m", "n"),
			},
			Example: "false, true, 2, 2, 2, 1, f(4), f(4), 0, f(4)",
			CPU:     "cpu.Gemm(transA, transB, m, n, k, alpha, o.operands(as), o.operands(bs), beta, cs)"},
	}},
	{Ops: []Op{
		{Method: "BiasAdd", Name: "bias add", Sig: "x, bias F32, outer, inner int",
			Doc: `BiasAdd adds bias[c] to x viewed as [outer][channels][inner], channels = bias.Len
(Linear: outer = batch, inner = 1; Conv: outer = batch, inner = H*W).`,
			Checks: []Check{
				Arg("outer < 0 || inner < 0", "outer = %d, inner = %d", "outer", "inner"),
				In("bias"), Out("x", "outer", "bias.Len", "inner"),
			},
			Example: "f(4), f(2), 2, 1",
			CPU:     "cpu.BiasAdd(xs, biass, outer, inner)",
			CUDA:    `return o.launchN(s, "bias_add_f32", x.Len, parg(xp), parg(biasp), iarg(outer), iarg(bias.Len), iarg(inner))`},
		{Method: "BiasGrad", Name: "bias grad", Sig: "dbias, dy F32, outer, inner int",
			Doc: `BiasGrad sets dbias[c] to the sum of dy over outer and inner (the shape of BiasAdd).`,
			Checks: []Check{
				Arg("outer < 0 || inner < 0", "outer = %d, inner = %d", "outer", "inner"),
				Out("dbias"), In("dy", "outer", "dbias.Len", "inner"),
			},
			Example: "f(2), f(4), 1, 2",
			CPU:     "cpu.BiasGrad(dbiass, dys, outer, inner)",
			CUDA:    "return o.biasGrad(s, dbiasp, dyp, outer, dbias.Len, inner)"},
	}},
	{Ops: []Op{
		{Method: "ReLU", Name: "relu", Sig: "y, x F32",
			Doc:     `ReLU computes y = max(x, 0); y may be x.`,
			Checks:  []Check{In("x"), Out("y", "x.Len"), MayBe("y", "x")},
			Example: "f(4), f(4)",
			CPU:     "cpu.ReLU(ys, xs)",
			CUDA:    `return o.launchN(s, "relu_f32", x.Len, parg(yp), parg(xp), iarg(x.Len))`},
		{Method: "ReLUGrad", Name: "relu grad", Sig: "dx, dy, y F32",
			Doc:     `ReLUGrad computes dx = dy where y > 0 and 0 elsewhere, from the ReLU's output y; dx may be dy.`,
			Checks:  []Check{Out("dx"), In("dy", "dx.Len"), In("y", "dx.Len"), MayBe("dx", "dy")},
			Example: "f(4), f(4), f(4)",
			CPU:     "cpu.ReLUGrad(dxs, dys, ys)",
			CUDA:    `return o.launchN(s, "relu_grad_f32", dx.Len, parg(dxp), parg(dyp), parg(yp), iarg(dx.Len))`},
	}},
	{Ops: []Op{
		{Method: "SoftmaxCrossEntropy", Name: "softmax cross-entropy", Sig: "loss, dlogits, logits F32, labels I32, n, classes int",
			Doc: `SoftmaxCrossEntropy takes logits [n][classes] and labels [n], writes the batch's mean loss
to loss (one element) and dlogits = (softmax(logits) - onehot(labels))/n (the gradient of
the mean). It is stable for any finite logits (log-sum-exp with the row maximum subtracted).
A label outside [0, classes) makes the stream's error wrap ErrLabel and name the sample.`,
			Checks:  crossEntropyChecks,
			Example: "f(1), f(4), f(4), i(0, 1), 2, 2"},
		{Method: "SoftmaxCrossEntropySmooth", Name: "softmax cross-entropy",
			Sig: "loss, dlogits, logits F32, labels I32, n, classes int, smoothing float32",
			Doc: `SoftmaxCrossEntropySmooth is SoftmaxCrossEntropy against label-smoothed targets
(1-smoothing)*onehot + smoothing/classes: the loss is their cross-entropy with the softmax and
dlogits = (softmax - target)/n. smoothing must be in [0,1); 0 is SoftmaxCrossEntropy.`,
			Checks: append([]Check{
				Arg("!(smoothing >= 0 && smoothing < 1)", "label smoothing %v; want [0,1)", "smoothing"),
			}, crossEntropyChecks...),
			Example: "f(1), f(4), f(4), i(0, 1), 2, 2, 0.1"},
		{Method: "FloatLoss", Name: "float loss", Sig: "loss, dpred, pred, target, posWeight F32, n, dim int, l Loss",
			Doc: `FloatLoss takes predictions pred and float targets target ([n][dim] each), writes the mean
loss of kind l to loss (one element) and its gradient to dpred ([n][dim]). posWeight is
BCEWithLogits' pos_weight ([dim]) or the empty view (all 1); other kinds take the empty
view. The mean is over samples for SoftCrossEntropy, over elements for the others.`,
			Checks: []Check{
				Arg("l.Kind < SoftCrossEntropy || l.Kind > SmoothL1", "loss kind %d", "l.Kind"),
				Arg("!(l.Beta >= 0) || math.IsInf(float64(l.Beta), 0)", "SmoothL1 beta %v; want finite and >= 0", "l.Beta"),
				Do("classes(n, dim)"),
				Out("loss", "1"), Out("dpred", "n", "dim"), In("pred", "n", "dim"), In("target", "n", "dim"),
				Arg("posWeight.Len != 0 && l.Kind != BCEWithLogits", "posWeight given to loss kind %d; only BCEWithLogits takes one", "l.Kind"),
				InOpt("posWeight", "dim"),
			},
			Example: "f(1), f(4), f(4), f(4), none, 2, 2, kernels.Loss{Kind: kernels.MSE}",
			CPU:     "losss[0] = float32(cpu.FloatLoss(dpreds, preds, targets, posWeights, n, dim, int(l.Kind), l.Beta))"},
		{Method: "CountNonFinite", Name: "count non-finite", Sig: "count I32, x F32",
			Doc: `CountNonFinite adds to count (one element) the number of elements of x that are ±Inf or
NaN: a check of gradients for overflow that leaves the result on the device (fp16 loss
scaling reads one count per step, not a tensor per parameter).`,
			Checks:  []Check{Out("count", "1"), In("x")},
			Example: "i(0), f(4)",
			CPU:     "counts[0] += cpu.NonFinite(xs)",
			CUDA:    `return o.launchN(s, "count_nonfinite_f32", x.Len, parg(countp), parg(xp), iarg(x.Len))`},
		{Method: "Argmax", Name: "argmax", Sig: "dst I32, logits F32, n, classes int",
			Doc:     `Argmax writes each row's index of the largest logit (the lowest on ties) to dst [n].`,
			Checks:  []Check{Do("classes(n, classes)"), Out("dst", "n"), In("logits", "n", "classes")},
			Example: "i(0, 0), f(4), 2, 2",
			CPU:     "cpu.Argmax(dsts, logitss, n, classes)",
			CUDA:    `return o.launchN(s, "argmax_f32", n, parg(dstp), parg(logitsp), iarg(n), iarg(classes))`},
		{Method: "CountCorrect", Name: "count correct", Sig: "count I32, logits F32, labels I32, n, classes int",
			Doc: `CountCorrect adds to count (one element) the number of rows whose argmax equals the label.`,
			Checks: []Check{
				Do("classes(n, classes)"), Out("count", "1"), In("logits", "n", "classes"), In("labels", "n"),
			},
			Example: "i(0), f(4), i(0, 1), 2, 2"},
	}},
	{Ops: []Op{
		{Method: "Conv2D", Name: "conv2d", Sig: "y, x, w, bias, ws F32, g Conv2D",
			Doc: `Conv2D computes y = conv(x, w) + bias (bias may be the empty view) and leaves in ws
(g.WorkspaceLen elements) what Conv2DBackward needs: ws must reach the backward pass
unchanged.`,
			Checks: []Check{
				Valid("g"), Out("y", "g.OutLen()"), In("x", "g.InLen()"), In("w", "g.WeightLen()"), InOpt("bias", "g.OutC"),
				Out("ws", "g.WorkspaceLen()").As("workspace"),
			},
			Example: "f(4), f(9), f(4), none, f(29), " + conv},
		{Method: "Conv2DBackward", Name: "conv2d backward", Sig: "dx, dw, dbias, dy, w, ws F32, g Conv2D",
			Doc: `Conv2DBackward overwrites dw, dbias (empty view: skipped) and dx (empty view: skipped, for a
first layer) from dy, the weights w and the workspace ws left by Conv2D, which it overwrites.`,
			Checks: []Check{
				Valid("g"), OutOpt("dx", "g.InLen()"), Out("dw", "g.WeightLen()"), OutOpt("dbias", "g.OutC"),
				In("dy", "g.OutLen()"), In("w", "g.WeightLen()"), Out("ws", "g.WorkspaceLen()").As("workspace"),
			},
			Example: "f(9), f(4), f(1), f(4), f(4), f(29), " + conv},
	}},
	{Ops: []Op{
		{Method: "DepthwiseConv2D", Name: "depthwise conv2d", Sig: "y, x, w, bias F32, g Depthwise2D",
			Doc: `DepthwiseConv2D computes y = the depthwise convolution of x with w, plus bias (bias may be
the empty view): each output is bias[c] (or 0) plus the products of its window's taps, added
in float32 in row-major tap order (padding taps left out). It stays float32 under reduced
precision (it has no GEMM).`,
			Checks: []Check{
				Valid("g"), Out("y", "g.OutLen()"), In("x", "g.InLen()"), In("w", "g.WeightLen()"), InOpt("bias", "g.C"),
			},
			Example: "f(8), f(18), f(8), f(2), " + depthwise,
			CPU:     "cpu.DepthwiseConv2D(ys, xs, ws, biass, depthwiseGeom(g))",
			CUDA: `// One thread per output; bias 0 (empty) is none.
return o.launchN(s, "dwconv_f32", y.Len, append([]uint64{parg(yp), parg(xp), parg(wp), parg(biasp)}, dwArgs(g)...)...)`},
		{Method: "DepthwiseConv2DBackward", Name: "depthwise conv2d backward", Sig: "dx, dw, dbias, dy, x, w F32, g Depthwise2D",
			Doc: `DepthwiseConv2DBackward overwrites dw, dbias (empty view: skipped) and dx (empty view:
skipped) from dy, the forward input x and the weights w. Each dx is a float32 sum of its
taps in row-major tap order; dw and dbias sum over the batch and the output plane in
float64, rounded once.`,
			Checks: []Check{
				Valid("g"), OutOpt("dx", "g.InLen()"), Out("dw", "g.WeightLen()"), OutOpt("dbias", "g.C"),
				In("dy", "g.OutLen()"), In("x", "g.InLen()"), In("w", "g.WeightLen()"),
			},
			Example: "f(18), f(8), f(2), f(8), f(18), f(8), " + depthwise,
			CPU:     "cpu.DepthwiseConv2DBackward(dxs, dws, dbiass, dys, xs, ws, depthwiseGeom(g))"},
	}},
	{Ops: []Op{
		{Method: "MaxPool2D", Name: "maxpool2d", Sig: "y F32, arg I32, x F32, g Pool2D",
			Doc: `MaxPool2D writes each window's maximum to y and the maximum's index within its input plane
(H*W) to arg, for the backward pass. The first maximum wins ties.`,
			Checks:  []Check{Valid("g"), Out("y", "g.OutLen()"), Out("arg", "g.OutLen()"), In("x", "g.InLen()")},
			Example: "f(4), i(0, 0, 0, 0), f(16), " + pool,
			CPU:     "cpu.MaxPool2D(ys, args, xs, poolGeom(g))"},
		{Method: "MaxPool2DBackward", Name: "maxpool2d backward", Sig: "dx, dy F32, arg I32, g Pool2D",
			Doc:     `MaxPool2DBackward overwrites dx with each dy added at its window's maximum.`,
			Checks:  []Check{Valid("g"), Out("dx", "g.InLen()"), In("dy", "g.OutLen()"), In("arg", "g.OutLen()")},
			Example: "f(16), f(4), i(0, 0, 0, 0), " + pool,
			CPU:     "cpu.MaxPool2DBackward(dxs, dys, args, poolGeom(g))"},
	}},
	{Ops: []Op{
		{Method: "Add", Name: "add", Sig: "z, x, y F32",
			Doc:     `Add computes z = x + y elementwise (a residual connection); z may be x or y.`,
			Checks:  []Check{Out("z"), In("x", "z.Len"), In("y", "z.Len"), MayBe("z", "x", "y")},
			Example: "f(4), f(4), f(4)",
			CPU:     "cpu.Add(zs, xs, ys)",
			CUDA:    `return o.launchN(s, "add_f32", z.Len, parg(zp), parg(xp), parg(yp), iarg(z.Len))`},
	}},
	{Ops: []Op{
		{Method: "BatchNormTrain", Name: "batch norm", Sig: "y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd F32, g BatchNorm",
			Doc: `BatchNormTrain normalizes x [N][C][HW] with the batch's per-channel mean and biased variance,
y = (x-mean)/sqrt(var+Eps)*gamma + beta, saves the mean and 1/sqrt(var+Eps) ([C] each) for
the backward pass, and updates the running statistics as PyTorch does:
run = (1-Momentum)*run + Momentum*batch, with the unbiased variance for runVar.`,
			Checks:  batchNormTrainChecks,
			Example: "f(4), f(4), f(2), f(2), f(2), f(2), f(2), f(2), " + batchNorm,
			CPU: `if g.N > 0 {
	cpu.BatchNormTrain(ys, xs, gammas, betas, runMeans, runVars, saveMeans, saveInvStds, bnGeom(g), g.Momentum, g.Eps)
}`,
			CUDA: `if g.N == 0 {
	return nil
}
return o.launch(s, "bn_train_f32", g.C, rowBlock(g.N*g.HW), parg(yp), parg(xp), parg(gammap), parg(betap), parg(runMeanp), parg(runVarp),
	parg(saveMeanp), parg(saveInvStdp), iarg(g.N), iarg(g.C), iarg(g.HW), farg(g.Momentum), farg(g.Eps))`},
		{Method: "BatchNormEval", Name: "batch norm eval", Sig: "y, x, gamma, beta, runMean, runVar F32, g BatchNorm",
			Doc: `BatchNormEval normalizes x with the running statistics (evaluation mode); y may be x.`,
			Checks: []Check{
				Valid("g"), Out("y", "g.Len()"), In("x", "g.Len()"), MayBe("y", "x"), In("gamma", "g.C"), In("beta", "g.C"),
				In("runMean", "g.C").As("running mean"), In("runVar", "g.C").As("running var"),
			},
			Example: "f(4), f(4), f(2), f(2), f(2), f(2), " + batchNorm,
			CPU:     "cpu.BatchNormEval(ys, xs, gammas, betas, runMeans, runVars, bnGeom(g), g.Eps)",
			CUDA: `return o.launchN(s, "bn_eval_f32", g.Len(), parg(yp), parg(xp), parg(gammap), parg(betap), parg(runMeanp), parg(runVarp),
	iarg(g.N), iarg(g.C), iarg(g.HW), farg(g.Eps))`},
		{Method: "BatchNormBackward", Name: "batch norm backward", Sig: "dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd F32, g BatchNorm",
			Doc: `BatchNormBackward overwrites dgamma, dbeta and dx (empty view: skipped) from dy, the
forward input x, gamma and the statistics BatchNormTrain saved.`,
			Checks: []Check{
				Valid("g"), OutOpt("dx", "g.Len()"), In("dy", "g.Len()"), In("x", "g.Len()"),
				Out("dgamma", "g.C"), Out("dbeta", "g.C"), In("gamma", "g.C"),
				In("saveMean", "g.C").As("saved mean"), In("saveInvStd", "g.C").As("saved inverse std"),
			},
			Example: "f(4), f(2), f(2), f(4), f(4), f(2), f(2), f(2), " + batchNorm,
			CPU: `if g.N > 0 {
	cpu.BatchNormBackward(dxs, dgammas, dbetas, dys, xs, gammas, saveMeans, saveInvStds, bnGeom(g))
}`,
			CUDA: `if g.N == 0 {
	return nil
}
return o.launch(s, "bn_backward_f32", g.C, rowBlock(g.N*g.HW), parg(dxp), parg(dgammap), parg(dbetap), parg(dyp), parg(xp), parg(gammap),
	parg(saveMeanp), parg(saveInvStdp), iarg(g.N), iarg(g.C), iarg(g.HW))`},
	}},
	{Doc: `The ops of a batch norm over several batches (one per rank: a synchronized batch norm,
PyTorch's SyncBatchNorm), whose statistics the caller gathers between them.`, Ops: []Op{
		{Method: "BatchNormStats", Name: "batch norm stats", Sig: "stats, x F32, g BatchNorm",
			Doc: `BatchNormStats writes x's per-channel statistics as one record of 2C+1 values to stats: the
mean [C], the sum of squared deviations from it [C] and the count N*HW (exact below 2^24).`,
			Checks:  []Check{Valid("g"), Out("stats", "bnRecord(g)"), In("x", "g.Len()")},
			Example: "f(5), f(4), " + batchNorm,
			CPU:     "cpu.BatchNormStats(statss, xs, bnGeom(g))",
			CUDA:    `return o.launch(s, "bn_stats_f32", g.C, rowBlock(g.N*g.HW), parg(statsp), parg(xp), iarg(g.N), iarg(g.C), iarg(g.HW))`},
		{Method: "BatchNormTrainStats", Name: "batch norm over gathered stats",
			Sig: "y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats F32, g BatchNorm",
			Doc: `BatchNormTrainStats is BatchNormTrain with the statistics of every batch: stats holds W >= 1
records of BatchNormStats end to end ([W][2C+1]), combined in record order, in float64, into
the mean and biased variance of all their values; x (one of the batches) is normalized with
them, they are saved, and the running statistics are updated with the unbiased variance over
the total count. A single record of x's own is BatchNormTrain's arithmetic.`,
			Checks:  append([]Check{In("stats"), Do("records(stats.Len, g)")}, batchNormTrainChecks...),
			Example: "f(4), f(4), f(2), f(2), f(2), f(2), f(2), f(2), f(10), " + batchNorm,
			CPU:     "cpu.BatchNormTrainStats(ys, xs, gammas, betas, runMeans, runVars, saveMeans, saveInvStds, statss, bnGeom(g), g.Momentum, g.Eps)",
			CUDA: `return o.launch(s, "bn_train_stats_f32", g.C, blockSize, parg(yp), parg(xp), parg(gammap), parg(betap), parg(runMeanp), parg(runVarp),
	parg(saveMeanp), parg(saveInvStdp), parg(statsp), iarg(stats.Len/(2*g.C+1)), iarg(g.N), iarg(g.C), iarg(g.HW), farg(g.Momentum), farg(g.Eps))`},
		{Method: "BatchNormBackwardInput", Name: "batch norm input gradient",
			Sig: "dx, dy, x, gamma, saveMean, saveInvStd, sums F32, g BatchNorm",
			Doc: `BatchNormBackwardInput overwrites dx with the gradient of a batch norm over every batch
from sums (2C+1 values): the sums over all the batches of dy*xhat [C] and dy [C] (what
BatchNormBackward writes to dgamma and dbeta for one batch), then their total count;
dx = gamma*inv * (dy - sum(dy)/count - xhat*sum(dy*xhat)/count), xhat = (x-mean)*inv with
the statistics BatchNormTrainStats saved.`,
			Checks: []Check{
				In("sums", "bnRecord(g)"), Valid("g"), Out("dx", "g.Len()"), In("dy", "g.Len()"), In("x", "g.Len()"), In("gamma", "g.C"),
				In("saveMean", "g.C").As("saved mean"), In("saveInvStd", "g.C").As("saved inverse std"),
			},
			Example: "f(4), f(4), f(4), f(2), f(2), f(2), f(5), " + batchNorm,
			CPU:     "cpu.BatchNormBackwardInput(dxs, dys, xs, gammas, saveMeans, saveInvStds, sumss, bnGeom(g))",
			CUDA: `return o.launchN(s, "bn_backward_input_f32", g.Len(), parg(dxp), parg(dyp), parg(xp), parg(gammap), parg(saveMeanp), parg(saveInvStdp),
	parg(sumsp), iarg(g.N), iarg(g.C), iarg(g.HW))`},
	}},
	{Ops: []Op{
		{Method: "GlobalAvgPool", Name: "global average pool", Sig: "y, x F32, inner int",
			Doc: `GlobalAvgPool writes y[r] = the mean of x's row r, x viewed as [y.Len][inner] (NCHW
images: one value per sample and channel, inner = H*W).`,
			Checks:  []Check{Arg("inner <= 0", "inner = %d", "inner"), Out("y"), In("x", "y.Len", "inner")},
			Example: "f(2), f(4), 2",
			CPU:     "cpu.GlobalAvgPool(ys, xs, inner)",
			CUDA:    `return o.launchN(s, "gap_f32", y.Len, parg(yp), parg(xp), iarg(y.Len), iarg(inner))`},
		{Method: "GlobalAvgPoolBackward", Name: "global average pool backward", Sig: "dx, dy F32, inner int",
			Doc:     `GlobalAvgPoolBackward overwrites dx [dy.Len][inner] with dy[r]/inner.`,
			Checks:  []Check{Arg("inner <= 0", "inner = %d", "inner"), In("dy"), Out("dx", "dy.Len", "inner")},
			Example: "f(4), f(2), 2",
			CPU:     "cpu.GlobalAvgPoolBackward(dxs, dys, inner)",
			CUDA:    `return o.launchN(s, "gap_grad_f32", dx.Len, parg(dxp), parg(dyp), iarg(dy.Len), iarg(inner))`},
	}},
	{Ops: []Op{
		{Method: "Dropout", Name: "dropout", Sig: "y, mask, x F32, p float32, seed uint64",
			Doc: `Dropout zeroes each element of x with probability p and scales survivors by 1/(1-p), writing
y and the multiplier mask (0 or 1/(1-p)); the backward pass is Mul(dx, dy, mask). The mask
is a function of (seed, element index) only, the same on every backend. p must be in [0,1);
y may be x.`,
			Checks: []Check{
				Arg("!(p >= 0 && p < 1)", "p = %v; want [0,1)", "p"),
				In("x"), Out("y", "x.Len"), Out("mask", "x.Len"), MayBe("y", "x"),
			},
			Example: "f(4), f(4), f(4), 0.5, 1",
			CPU:     "cpu.Dropout(ys, masks, xs, p, seed)",
			CUDA:    `return o.launchN(s, "dropout_f32", x.Len, parg(yp), parg(maskp), parg(xp), iarg(x.Len), farg(p), seed)`},
	}},
	{Ops: []Op{
		{Method: "NormalizeU8", Name: "normalize u8", Sig: "dst F32, src U8, channels, inner int, mean, std []float32",
			Doc: `NormalizeU8 converts uint8 src viewed as [N][channels][inner] to float32 dst:
dst = (src/255 - mean[c]) / std[c]. mean and std hold one value per channel or a single
value for all; an empty mean is 0 and an empty std is 1. The values are copied at enqueue.`,
			Checks:  []Check{Do("normalize(dst.Len, channels, inner, mean, std)"), Out("dst"), In("src", "dst.Len")},
			Example: "f(4), u(4), 2, 2, []float32{0.5}, []float32{0.2, 0.3}"},
	}},
	{Ops: []Op{
		{Method: "RenderRecords", Name: "render records", Sig: "dst, src U8, offsets I32, ws U8, n, channels, h, w int",
			Doc: `RenderRecords is the device half of a device decode: it writes the uint8 pixels of n samples into
dst [n][channels][h][w] (channels 1 or 3). offsets [n][2] holds each sample's byte offset in src
and its kind: 1, a record of transforms.Worker.ApplyCoefficients there, which it renders as
transforms.Worker.Render does, byte for byte (dequantization, the scaled IDCT, the resampling, the
colour conversion and the orientation); 0, channels*h*w bytes of pixels that the host made
(Apply's), which it copies. ws is its scratch, n slots of ws.Len/n bytes (ws.Len a multiple of n),
sample i's the i-th: a record takes transforms.Worker.RecordScratch of it there (a caller that
reserves ws once sends the samples whose records need more down the host path), pixels none; what
ws holds afterwards is unspecified. A record is outside data, checked as Render checks it: a kind
other than 0 and 1 (ErrArgument), an offset outside src or pixels past its end, a record that
needs more than its slot (ErrShape), a record whose C*H*W pixels are not channels*h*w
(transforms.ErrShape) or one that does not hold together (transforms.ErrCorrupt) makes the
stream's error wrap that sentinel and name the first such sample; dst is then unspecified.`,
			Checks: []Check{
				Arg("n < 0 || (channels != 1 && channels != 3) || h <= 0 || w <= 0",
					"n = %d, channels = %d, h = %d, w = %d; want n >= 0, channels 1 or 3, h and w >= 1", "n", "channels", "h", "w"),
				Out("dst", "n", "channels", "h", "w"), In("src"), In("offsets", "n", "2"), Out("ws").As("workspace"),
				Arg("n > 0 && ws.Len%n != 0", "workspace of %d bytes for %d samples; want a multiple of n", "ws.Len", "n"),
			},
			Example: "u(12), u(12), i(0, 0), u(4), 1, 3, 2, 2"},
	}},
	{Ops: []Op{
		{Method: "ToBF16", Name: "to bf16", Sig: "dst U8, src F32",
			Doc: `ToBF16 rounds src to bfloat16 (to the nearest, ties to even; NaN stays NaN) into dst, 2
bytes per value, little-endian (dst.Len = 2*src.Len, dst.Off even): gradients that travel
as bf16 (a data-parallel step in bf16).`,
			Checks:  toHalfChecks,
			Example: "u(8), f(4)",
			CPU:     "to16(dsts, srcs, half.F32ToBF16)",
			CUDA:    `return o.launchN(s, "to_x16", src.Len, parg(dstp), parg(srcp), iarg(src.Len), x16BF16)`},
		{Method: "FromBF16", Name: "from bf16", Sig: "dst F32, src U8",
			Doc: `FromBF16 widens the bfloat16 values of src (2 bytes each, as ToBF16 writes them) into dst,
exactly.`,
			Checks:  fromHalfChecks,
			Example: "f(4), u(8)",
			CPU:     "from16(dsts, srcs, half.BF16ToF32)",
			CUDA:    `return o.launchN(s, "x16_to_f32", dst.Len, parg(dstp), parg(srcp), iarg(dst.Len), x16BF16)`},
		{Method: "ToFP16", Name: "to fp16", Sig: "dst U8, src F32",
			Doc: `ToFP16 rounds src to IEEE half precision (fp16: to the nearest, ties to even; a magnitude
of 65520 or more becomes ±Inf, subnormals are kept, NaN stays NaN) into dst, laid out as
ToBF16's: gradients that travel as fp16 (a data-parallel step in fp16).`,
			Checks:  toHalfChecks,
			Example: "u(8), f(4)",
			CPU:     "to16(dsts, srcs, half.F32ToFP16)",
			CUDA:    `return o.launchN(s, "to_x16", src.Len, parg(dstp), parg(srcp), iarg(src.Len), x16FP16)`},
		{Method: "FromFP16", Name: "from fp16", Sig: "dst F32, src U8",
			Doc: `FromFP16 widens the fp16 values of src (2 bytes each, as ToFP16 writes them) into dst,
exactly.`,
			Checks:  fromHalfChecks,
			Example: "f(4), u(8)",
			CPU:     "from16(dsts, srcs, half.FP16ToF32)",
			CUDA:    `return o.launchN(s, "x16_to_f32", dst.Len, parg(dstp), parg(srcp), iarg(dst.Len), x16FP16)`},
	}},
	{Ops: []Op{
		{Method: "Unary", Name: "unary", Sig: "f UnaryFunc, y, x F32",
			Doc:     `Unary computes y = f(x) elementwise; y may be x. An unknown f is ErrArgument.`,
			Checks:  []Check{Do("unary(f)"), In("x"), Out("y", "x.Len"), MayBe("y", "x")},
			Example: "kernels.GELU, f(4), f(4)",
			CPU:     "cpu.Unary(cpuUnary[f], ys, xs)",
			CUDA:    `return o.launchN(s, "unary_f32", x.Len, parg(yp), parg(xp), iarg(x.Len), iarg(int(f)))`},
		{Method: "UnaryGrad", Name: "unary grad", Sig: "f UnaryFunc, dx, dy, x F32",
			Doc: `UnaryGrad computes dx = dy·f'(x) from the forward input x; dx may be dy. At the kinks of
Hardswish, Hardsigmoid and ReLU6 the derivative is PyTorch's: Hardswish's is x/3+0.5 on
[-3,3], 0 below and 1 above; Hardsigmoid's 1/6 on (-3,3), else 0; ReLU6's 1 on (0,6), else 0.`,
			Checks:  []Check{Do("unary(f)"), Out("dx"), In("dy", "dx.Len"), In("x", "dx.Len"), MayBe("dx", "dy")},
			Example: "kernels.SiLU, f(4), f(4), f(4)",
			CPU:     "cpu.UnaryGrad(cpuUnary[f], dxs, dys, xs)",
			CUDA:    `return o.launchN(s, "unary_grad_f32", x.Len, parg(dxp), parg(dyp), parg(xp), iarg(x.Len), iarg(int(f)))`},
	}},
	{Doc: `Binary, SumTo and CopyStrided copy their shapes and strides when they enqueue.`, Ops: []Op{
		{Method: "Binary", Name: "binary", Sig: "f BinaryFunc, z, x, y F32, shape, xStrides, yStrides []int",
			Doc: `Binary computes z = f(x, y) over an index space of the given shape (rank 1..MaxRank, every
dim >= 1): z is packed row-major of that shape; x's element for index i is at
x.Off + Σ i_d·xStrides[d], y's likewise (strides >= 0; a 0 stride broadcasts). Every
element read must lie inside the view (x.Len, y.Len). z must not overlap x or y.`,
			Checks: []Check{
				Arg("!f.valid()", "unknown %v", "f"),
				Let("n", `shape(shape, []string{"x strides", "y strides"}, xStrides, yStrides)`),
				Out("z", "n"), In("x"), Do(`reach("x", vf(x), shape, xStrides)`), In("y"), Do(`reach("y", vf(y), shape, yStrides)`),
			},
			Example: "kernels.BinaryAdd, f(6), f(6), f(3), []int{2, 3}, []int{3, 1}, []int{0, 1}",
			CUDA:    `return o.launchDims(s, "binary_f32", z.Len, newDims(shape, xStrides, yStrides), parg(zp), parg(xp), parg(yp), iarg(z.Len), iarg(int(f)))`},
		{Method: "SumTo", Name: "sum to", Sig: "y, x F32, shape, keep []int",
			Doc: `SumTo overwrites y with x summed over the dimensions that keep does not have: x is packed
of shape, y packed of shape keep (same rank as shape, 1..MaxRank; keep[d] is shape[d] or 1).
The order of the sums is fixed (the same result on every call), so the broadcast's VJP is
deterministic. y must not overlap x.`,
			Checks:  []Check{Let("n", "shape(shape, nil)"), Let("kept", "kept(shape, keep)"), In("x", "n"), Out("y", "kept")},
			Example: "f(3), f(6), []int{2, 3}, []int{1, 3}"},
		{Method: "CopyStrided", Name: "copy strided", Sig: "dst F32, dstStrides []int, src F32, srcStrides []int, shape []int",
			Doc: `CopyStrided copies, for every index i of shape (rank 1..MaxRank), src[Σ i_d·srcStrides[d]]
to dst[Σ i_d·dstStrides[d]] (offsets from each view's Off): a permutation, a slice or one
part of a concatenation made packed, or written into its place. Strides >= 0; the dst
positions must be distinct (checked: no dst stride 0 on a dim > 1, and the dims sorted by
dst stride do not overlap); every position inside its view; dst must not overlap src.`,
			Checks: []Check{
				Do(`shape(shape, []string{"dst strides", "src strides"}, dstStrides, srcStrides)`),
				In("src"), Do(`reach("src", vf(src), shape, srcStrides)`), Out("dst"), Do(`reach("dst", vf(dst), shape, dstStrides)`),
				Do("distinct(shape, dstStrides)"),
			},
			Example: "f(6), []int{1, 2}, f(6), []int{3, 1}, []int{2, 3}",
			CUDA: `n := numel(shape)
return o.launchDims(s, "copy_strided_f32", n, newDims(shape, dstStrides, srcStrides), parg(dstp), parg(srcp), iarg(n))`},
	}},
	{Ops: []Op{
		{Method: "Softmax", Name: "softmax", Sig: "y, x F32, rows, cols int",
			Doc: `Softmax computes y = softmax of each row of x [rows][cols], stable for any finite x (the
row maximum subtracted); y may be x.`,
			Checks:  []Check{Let("n", "rowsCols(rows, cols)"), In("x", "n"), Out("y", "n"), MayBe("y", "x")},
			Example: "f(4), f(4), 2, 2",
			CPU:     "cpu.Softmax(ys, xs, rows, cols)",
			CUDA: `if x.Len == 0 {
	return nil
}
return o.launch(s, "softmax_f32", min(rows, maxBlocks), rowBlock(cols), parg(yp), parg(xp), iarg(rows), iarg(cols))`},
		{Method: "SoftmaxBackward", Name: "softmax backward", Sig: "dx, dy, y F32, rows, cols int",
			Doc:     `SoftmaxBackward computes dx = y·(dy − Σ_row dy·y) from the forward output y; dx may be dy.`,
			Checks:  []Check{Let("n", "rowsCols(rows, cols)"), Out("dx", "n"), In("dy", "n"), In("y", "n"), MayBe("dx", "dy")},
			Example: "f(4), f(4), f(4), 2, 2",
			CPU:     "cpu.SoftmaxBackward(dxs, dys, ys, rows, cols)",
			CUDA: `if y.Len == 0 {
	return nil
}
return o.launch(s, "softmax_grad_f32", min(rows, maxBlocks), rowBlock(cols), parg(dxp), parg(dyp), parg(yp), iarg(rows), iarg(cols))`},
	}},
	{Ops: []Op{
		{Method: "LayerNorm", Name: "layer norm", Sig: "y, mean, rstd, x, gamma, beta F32, rows, cols int, eps float32",
			Doc: `LayerNorm normalizes each row of x [rows][cols] with its mean and biased variance,
y = (x−mean)·rstd·gamma + beta, rstd = 1/√(var+eps) (PyTorch's layer_norm over the last
dim); gamma and beta are [cols] or the empty view (1 and 0). mean and rstd ([rows] each)
are saved for the backward pass. eps > 0 and finite.`,
			Checks: []Check{
				Arg("!(eps > 0) || math.IsInf(float64(eps), 0)", "eps %v; want finite and > 0", "eps"),
				Let("n", "rowsCols(rows, cols)"),
				Out("y", "n"), Out("mean", "rows"), Out("rstd", "rows"), In("x", "n"), InOpt("gamma", "cols"), InOpt("beta", "cols"),
			},
			Example: "f(4), f(2), f(2), f(4), f(2), f(2), 2, 2, 1e-5",
			CPU:     "cpu.LayerNorm(ys, means, rstds, xs, gammas, betas, rows, cols, eps)",
			CUDA: `if rows == 0 {
	return nil
}
return o.launch(s, "layer_norm_f32", min(rows, maxBlocks), rowBlock(cols), parg(yp), parg(meanp), parg(rstdp), parg(xp), parg(gammap), parg(betap),
	iarg(rows), iarg(cols), farg(eps))`},
		{Method: "LayerNormBackward", Name: "layer norm backward", Sig: "dx, dgamma, dbeta, dy, x, gamma, mean, rstd F32, rows, cols int",
			Doc: `LayerNormBackward overwrites dx, dgamma and dbeta (each may be the empty view: skipped)
from dy, the forward input x, gamma (empty: 1) and the saved mean and rstd.`,
			Checks: []Check{
				Let("n", "rowsCols(rows, cols)"),
				OutOpt("dx", "n"), OutOpt("dgamma", "cols"), OutOpt("dbeta", "cols"), In("dy", "n"), In("x", "n"), InOpt("gamma", "cols"),
				In("mean", "rows"), In("rstd", "rows"),
			},
			Example: "f(4), f(2), f(2), f(4), f(4), none, f(2), f(2), 2, 2",
			CPU:     "cpu.LayerNormBackward(dxs, dgammas, dbetas, dys, xs, gammas, means, rstds, rows, cols)"},
	}},
	{Ops: []Op{
		{Method: "GemmStrided", Name: "gemm strided",
			Sig: "transA, transB bool, batch, m, n, k int, alpha float32, a F32, strideA int, b F32, strideB int, beta float32, c F32, strideC int",
			Doc: `GemmStrided computes batch independent Gemms (same transA, transB, m, n, k, alpha, beta as
Gemm): the i-th on a[i·strideA:], b[i·strideB:], c[i·strideC:] (cublasSgemmStridedBatched).
strideA or strideB may be 0 (one operand for all); strideC >= m·n (outputs do not overlap).
Each view must hold its last matrix ((batch-1)·stride + the matrix's size elements, at
least). batch >= 0; batch 0 does nothing.`,
			Checks: []Check{
				Arg("batch < 0 || m < 0 || n < 0 || k < 0", "batch, m, n, k = %d, %d, %d, %d", "batch", "m", "n", "k"),
				Arg("strideA < 0 || strideB < 0", "strides %d, %d; want >= 0", "strideA", "strideB"),
				Let("mn", "mul(m, n)"),
				Arg("strideC < mn", "c stride %d below m*n = %d: the outputs overlap", "strideC", "mn"),
				In("a", "m", "k").Batched("batch", "strideA"), In("b", "k", "n").Batched("batch", "strideB"),
				Out("c", "mn").Batched("batch", "strideC"),
			},
			Example: "false, true, 2, 2, 2, 2, 1, f(8), 4, f(4), 0, 0, f(8), 4",
			CPU:     "cpu.GemmStrided(transA, transB, batch, m, n, k, alpha, o.operands(as), strideA, o.operands(bs), strideB, beta, cs, strideC)"},
	}},
	{Ops: []Op{
		{Method: "Attention", Name: "attention", Sig: "y, lse, q, k, v F32, g Attention",
			Doc: `Attention computes y = softmax(g.Scale·q·kᵀ)·v for each of g.Batch problems (torch's
scaled_dot_product_attention without a mask or dropout) and saves each query's log-sum-exp
of its scaled scores to lse for the backward pass. The score matrix is never held whole: keys
are taken a block at a time with an online softmax (FlashAttention's), so memory does not grow
with LQ·LK. It stays float32 under reduced precision.`,
			Checks: []Check{
				Valid("g"), Out("y", "g.QLen()"), Out("lse", "g.Rows()"), In("q", "g.QLen()"), In("k", "g.KLen()"), In("v", "g.KLen()"),
			},
			Example: "f(4), f(2), f(4), f(4), f(4), " + attention,
			CPU:     "cpu.Attention(ys, lses, qs, ks, vs, attnGeom(g))",
			CUDA: `if g.Rows() == 0 {
	return nil
}
// One block per problem and attRows queries.
blocks := g.Batch * ((g.LQ + attRows - 1) / attRows)
return o.launch(s, "attention_f32", min(blocks, maxBlocks), attRows, append([]uint64{parg(yp), parg(lsep), parg(qp), parg(kp), parg(vp)}, attArgs(g)...)...)`},
		{Method: "AttentionBackward", Name: "attention backward", Sig: "dq, dk, dv, dy, q, k, v, y, lse F32, g Attention",
			Doc: `AttentionBackward overwrites dq, dk and dv from dy, the forward operands q, k, v, the output y
and the lse Attention saved, recomputing the scores block by block (FlashAttention-2's
backward pass).`,
			Checks: []Check{
				Valid("g"), Out("dq", "g.QLen()"), Out("dk", "g.KLen()"), Out("dv", "g.KLen()"), In("dy", "g.QLen()"),
				In("q", "g.QLen()"), In("k", "g.KLen()"), In("v", "g.KLen()"), In("y", "g.QLen()"), In("lse", "g.Rows()"),
			},
			Example: "f(4), f(4), f(4), f(4), f(4), f(4), f(4), f(4), f(2), " + attention,
			CPU:     "cpu.AttentionBackward(dqs, dks, dvs, dys, qs, ks, vs, ys, lses, attnGeom(g))"},
	}},
	{Ops: []Op{
		{Method: "SGDStep", Name: "sgd", Sig: "w, g, v F32, p SGD",
			Doc: `SGDStep updates w in place from g and the velocity v (v unused, may be empty, with
Momentum 0).`,
			Checks:  []Check{Out("w"), In("g", "w.Len"), Out("v", "w.Len").When("p.Momentum != 0")},
			Example: "f(4), f(4), none, kernels.SGD{LR: 0.1}",
			CPU:     "cpu.SGD(ws, gs, vs, p.LR, p.Momentum, p.WeightDecay, p.Nesterov)",
			CUDA:    `return o.launchN(s, "sgd_f32", w.Len, parg(wp), parg(gp), parg(vp), iarg(w.Len), farg(p.LR), farg(p.Momentum), farg(p.WeightDecay), barg(p.Nesterov))`},
		{Method: "AdamWStep", Name: "adamw", Sig: "w, g, m, v, vmax F32, p AdamW",
			Doc: `AdamWStep updates w in place from g, the moment estimates m and v and the largest v so far
vmax (torch's max_exp_avg_sq; unused, may be empty, without AMSGrad).`,
			Checks: []Check{
				Arg("p.Step < 1", "step %d; want >= 1", "p.Step"),
				Out("w"), In("g", "w.Len"), Out("m", "w.Len"), Out("v", "w.Len"), Out("vmax", "w.Len").When("p.AMSGrad"),
			},
			Example: "f(4), f(4), f(4), f(4), none, kernels.AdamW{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, Step: 1}",
			CPU: `if !p.AMSGrad {
	vmaxs = nil // unused, whatever its length
}
cpu.AdamW(ws, gs, ms, vs, vmaxs, p.LR, p.Beta1, p.Beta2, p.Eps, p.WeightDecay, p.Step)`,
			CUDA: `return o.launchN(s, "adamw_f32", w.Len, append([]uint64{parg(wp), parg(gp), parg(mp), parg(vp), parg(vmaxp), iarg(w.Len)}, adamwArgs(p)...)...)`},
		{Method: "RMSpropStep", Name: "rmsprop", Sig: "w, g, sq, b, ga F32, p RMSprop",
			Doc: `RMSpropStep updates w in place from g, the mean square sq, the momentum buffer b (unused,
may be empty, with Momentum 0) and the mean gradient ga (unused, may be empty, unless
Centered).`,
			Checks: []Check{
				Out("w"), In("g", "w.Len"), Out("sq", "w.Len"), Out("b", "w.Len").When("p.Momentum != 0"),
				Out("ga", "w.Len").When("p.Centered"),
			},
			Example: "f(4), f(4), f(4), f(4), none, kernels.RMSprop{LR: 0.1, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9}",
			CPU:     "cpu.RMSprop(ws, gs, sqs, bs, gas, p.LR, p.Alpha, p.Eps, p.WeightDecay, p.Momentum, p.Centered)",
			CUDA: `return o.launchN(s, "rmsprop_f32", w.Len, parg(wp), parg(gp), parg(sqp), parg(bp), parg(gap), iarg(w.Len),
	farg(p.LR), math.Float64bits(p.Alpha), farg(p.Eps), farg(p.WeightDecay), farg(p.Momentum), barg(p.Centered))`},
	}},
}

// The geometries of the examples.
const (
	conv      = "kernels.Conv2D{N: 1, InC: 1, InH: 3, InW: 3, OutC: 1, KH: 2, KW: 2}" // y [1][1][2][2], workspace 29
	depthwise = "kernels.Depthwise2D{N: 1, C: 2, H: 3, W: 3, K: 2}"                   // x [1][2][3][3], y [1][2][2][2]
	pool      = "kernels.Pool2D{N: 1, C: 1, H: 4, W: 4, K: 2}"                        // y [1][1][2][2]
	batchNorm = "kernels.BatchNorm{N: 2, C: 2, HW: 1, Momentum: 0.1, Eps: 1e-5}"
	attention = "kernels.Attention{Batch: 1, LQ: 2, LK: 2, D: 2, Scale: 0.5}" // q, k, v, y [1][2][2], lse [1][2]
)

// Checks that several ops share.
var (
	crossEntropyChecks = []Check{
		Do("classes(n, classes)"), Out("loss", "1"), In("logits", "n", "classes"), Out("dlogits", "n", "classes"), In("labels", "n"),
	}
	batchNormTrainChecks = []Check{
		Valid("g"), Out("y", "g.Len()"), In("x", "g.Len()"), In("gamma", "g.C"), In("beta", "g.C"),
		Out("runMean", "g.C").As("running mean"), Out("runVar", "g.C").As("running var"),
		Out("saveMean", "g.C").As("saved mean"), Out("saveInvStd", "g.C").As("saved inverse std"),
	}
	// A conversion to or from 16 bits: 2 bytes per float32, 2-byte aligned.
	toHalfChecks = []Check{
		In("src"), Out("dst", "src.Len", "2"), Arg("dst.Off%2 != 0", "dst at byte %d; want an even offset", "dst.Off"),
	}
	fromHalfChecks = []Check{
		Out("dst"), In("src", "dst.Len", "2"), Arg("src.Off%2 != 0", "src at byte %d; want an even offset", "src.Off"),
	}
)
