package nn

import (
	"fmt"

	"github.com/stoke-ml/stoke/kernels"
)

// The losses, as torch.nn.functional's with reduction "mean": each returns a tensor of shape [1]
// whose backward pass is the kernel's own gradient of the predictions (one kernel computes both).
// The targets are device memory, as a batch's labels are; they get no gradient.

// CrossEntropy returns the mean softmax cross-entropy of logits [N classes] against labels [N]
// (class ids on the device), with label smoothing s in [0, 1): a tensor of shape [1].
func CrossEntropy(logits *Tensor, labels kernels.I32, smoothing float32) *Tensor {
	g := graphOf("cross-entropy", logits)
	if g == nil {
		return orphan("cross-entropy")
	}
	if len(logits.shape) != 2 {
		g.fail(fmt.Errorf("nn: cross-entropy of logits of shape %v: %w", logits.shape, ErrShape))
		return &Tensor{g: g}
	}
	n, classes := logits.shape[0], logits.shape[1]
	loss := g.newTensor(g.shape(nil, 1))
	dl := g.newTensor(logits.shape)
	g.run(func() error {
		return g.ops.SoftmaxCrossEntropySmooth(g.s, loss.data, dl.data, logits.data, labels, n, classes, smoothing)
	})
	attr := func() Attr { return Attr{"smoothing": smoothing} }
	g.record(loss, OpCrossEntropy, attr, g.operands(logits), func(dy *Tensor, dx []*Tensor) { dx[0] = Mul(dl, dy) })
	return loss
}

// SoftCrossEntropy returns the mean softmax cross-entropy of logits [N classes] against target
// distributions [N classes] (cross_entropy with probabilities: soft labels, MixUp's targets).
func SoftCrossEntropy(logits *Tensor, targets kernels.F32) *Tensor {
	return floatLoss(OpSoftCrossEntropy, logits, targets, kernels.F32{}, kernels.Loss{Kind: kernels.SoftCrossEntropy})
}

// BCEWithLogits returns the mean binary cross-entropy of logits [N classes] against multi-hot
// targets [N classes] (binary_cross_entropy_with_logits), the positive term of class j weighed
// by posWeight[j] (the empty view: 1 for every class).
func BCEWithLogits(logits *Tensor, targets, posWeight kernels.F32) *Tensor {
	return floatLoss(OpBCEWithLogits, logits, targets, posWeight, kernels.Loss{Kind: kernels.BCEWithLogits})
}

// MSE returns the mean squared error of pred [N dim] against targets [N dim] (mse_loss).
func MSE(pred *Tensor, targets kernels.F32) *Tensor {
	return floatLoss(OpMSE, pred, targets, kernels.F32{}, kernels.Loss{Kind: kernels.MSE})
}

// SmoothL1 returns the mean smooth L1 loss of pred [N dim] against targets [N dim] with threshold
// beta (smooth_l1_loss; beta 0 is the L1 loss).
func SmoothL1(pred *Tensor, targets kernels.F32, beta float32) *Tensor {
	return floatLoss(OpSmoothL1, pred, targets, kernels.F32{}, kernels.Loss{Kind: kernels.SmoothL1, Beta: beta})
}

// floatLoss is the loss l of pred [N dim] against targets through the FloatLoss kernel.
func floatLoss(op Op, pred *Tensor, targets, posWeight kernels.F32, l kernels.Loss) *Tensor {
	g := graphOf(string(op), pred)
	if g == nil {
		return orphan(string(op))
	}
	if len(pred.shape) != 2 {
		g.fail(fmt.Errorf("nn: %s of predictions of shape %v: %w", op, pred.shape, ErrShape))
		return &Tensor{g: g}
	}
	n, dim := pred.shape[0], pred.shape[1]
	loss := g.newTensor(g.shape(nil, 1))
	dl := g.newTensor(pred.shape)
	g.run(func() error {
		return g.ops.FloatLoss(g.s, loss.data, dl.data, pred.data, targets, posWeight, n, dim, l)
	})
	var attr func() Attr
	if l.Kind == kernels.SmoothL1 {
		attr = func() Attr { return Attr{"beta": l.Beta} }
	}
	g.record(loss, op, attr, g.operands(pred), func(dy *Tensor, dx []*Tensor) { dx[0] = Mul(dl, dy) })
	return loss
}
