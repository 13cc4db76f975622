package train

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// LossKind names a training loss.
type LossKind int

// The losses. Class ids train with CrossEntropy (Config.LabelSmoothing applies); float targets
// (Batch.Targets) with one of the others, each as PyTorch's with reduction "mean".
const (
	// Auto picks the loss from the data's targets: CrossEntropy for class ids, BCEWithLogits
	// for multi-hot targets, MSE for vectors (see TargetKind).
	Auto LossKind = iota
	// CrossEntropy is softmax cross-entropy on class ids (CrossEntropyLoss).
	CrossEntropy
	// SoftCrossEntropy is softmax cross-entropy against target distributions (soft labels).
	SoftCrossEntropy
	// BCEWithLogits is binary cross-entropy on logits, per label (multi-label), with
	// Loss.PosWeight (BCEWithLogitsLoss).
	BCEWithLogits
	// MSE is the mean squared error (MSELoss).
	MSE
	// SmoothL1 is the smooth L1 loss with Loss.Beta (SmoothL1Loss).
	SmoothL1
)

func (k LossKind) String() string {
	switch k {
	case Auto:
		return "auto"
	case CrossEntropy:
		return "cross-entropy"
	case SoftCrossEntropy:
		return "soft cross-entropy"
	case BCEWithLogits:
		return "bce-with-logits"
	case MSE:
		return "mse"
	case SmoothL1:
		return "smooth-l1"
	}
	return fmt.Sprintf("loss(%d)", int(k))
}

// Loss is Config.Loss: the training objective. The zero value picks it from the data.
type Loss struct {
	Kind LossKind
	// PosWeight, for BCEWithLogits, weighs each label's positive term (one value per class, as
	// pos_weight); nil weighs them all 1.
	PosWeight []float32
	// Beta is SmoothL1's threshold; 0 means PyTorch's default 1.
	Beta float64
}

// TargetKind says what a Data source's batches carry as targets.
type TargetKind int

const (
	// ClassIDs: Batch.Labels, int32 class ids.
	ClassIDs TargetKind = iota
	// MultiHot: Batch.Targets, [N][classes] of 0 and 1 (loaders.MultiHot).
	MultiHot
	// Vector: Batch.Targets, [N][classes] float values (loaders.Vector).
	Vector
)

// Targeted is implemented by a Data source whose batches carry float targets (Batch.Targets);
// one that does not carries class ids.
type Targeted interface {
	TargetKind() TargetKind
}

func targetKind(d Data) TargetKind {
	if t, ok := d.(Targeted); ok {
		return t.TargetKind()
	}
	return ClassIDs
}

// resolve fixes the loss for data with targets of kind k.
func (l Loss) resolve(k TargetKind, classes int) (Loss, error) {
	if l.Kind == Auto {
		l.Kind = map[TargetKind]LossKind{ClassIDs: CrossEntropy, MultiHot: BCEWithLogits, Vector: MSE}[k]
	}
	if (l.Kind == CrossEntropy) != (k == ClassIDs) {
		return l, fmt.Errorf("train: %w: loss %v for data whose targets are %v", ErrConfig, l.Kind, k)
	}
	if l.PosWeight != nil && (l.Kind != BCEWithLogits || len(l.PosWeight) != classes) {
		return l, fmt.Errorf("train: %w: pos_weight of %d values for loss %v over %d classes", ErrConfig, len(l.PosWeight), l.Kind, classes)
	}
	if l.Beta == 0 {
		l.Beta = 1
	}
	if !(l.Beta > 0) || math.IsInf(l.Beta, 0) {
		return l, fmt.Errorf("train: %w: smooth L1 beta %v", ErrConfig, l.Beta)
	}
	return l, nil
}

func (k TargetKind) String() string {
	switch k {
	case ClassIDs:
		return "class ids"
	case MultiHot:
		return "multi-hot"
	case Vector:
		return "vectors"
	}
	return fmt.Sprintf("targets(%d)", int(k))
}

// lossStep enqueues the loss of logits against b's targets and its gradient into dl.
func (t *Trainer) lossStep(b Batch, logits, dl kernels.F32) error {
	m, n := t.m, b.N
	if b.Mix.Mixed && b.Targets.Len > 0 {
		return fmt.Errorf("train: %w: a batch of float targets mixed by MixUp or CutMix; only class ids mix", ErrConfig)
	}
	if b.Mix.Mixed {
		return t.mixedLoss(b, logits, dl)
	}
	if b.Targets.Len == 0 {
		if t.cfg.LabelSmoothing > 0 {
			return t.ops.SoftmaxCrossEntropySmooth(t.s, m.loss, dl, logits, b.Labels, n, m.classes, float32(t.cfg.LabelSmoothing))
		}
		return t.ops.SoftmaxCrossEntropy(t.s, m.loss, dl, logits, b.Labels, n, m.classes)
	}
	l := t.loss
	var kind kernels.LossKind
	switch l.Kind {
	case SoftCrossEntropy:
		kind = kernels.SoftCrossEntropy
	case BCEWithLogits:
		kind = kernels.BCEWithLogits
	case MSE:
		kind = kernels.MSE
	case SmoothL1:
		kind = kernels.SmoothL1
	default:
		return fmt.Errorf("train: %w: loss %v for a batch of float targets", ErrConfig, l.Kind)
	}
	return t.ops.FloatLoss(t.s, m.loss, dl, logits, b.Targets, t.posWeight, n, m.classes, kernels.Loss{Kind: kind, Beta: float32(l.Beta)})
}

// mixedLoss enqueues the loss of a batch that MixUp or CutMix mixed (Batch.Mix) and its gradient
// into dl: the soft-target cross-entropy against Lambda x each sample's one-hot target + (1 -
// Lambda) x the target of the sample before it (labels[i-1], labels[n-1] for sample 0), each
// target smoothed by Config.LabelSmoothing first, as timm's mixup_target and
// SoftTargetCrossEntropy. The cross-entropy is linear in its target, so this is Lambda x the
// smoothed cross-entropy against the labels + (1 - Lambda) x the one against the labels rolled by
// one, and so is its gradient (softmax - target)/n: two passes of the class-id loss, blended.
func (t *Trainer) mixedLoss(b Batch, logits, dl kernels.F32) error {
	m, n, o, s := t.m, b.N, t.ops, t.s
	lam, sm := float32(b.Mix.Lambda), float32(t.cfg.LabelSmoothing)
	rolled, dl2 := m.mixLabels.Slice(0, n), m.mixDL.Slice(0, n*m.classes)
	for _, step := range []func() error{
		func() error { return o.Copy(s, kernels.F32(rolled.Slice(1, n)), kernels.F32(b.Labels.Slice(0, n-1))) }, // int32 bits, copied
		func() error { return o.Copy(s, kernels.F32(rolled.Slice(0, 1)), kernels.F32(b.Labels.Slice(n-1, n))) },
		func() error { return o.SoftmaxCrossEntropySmooth(s, m.loss, dl, logits, b.Labels, n, m.classes, sm) },
		func() error { return o.SoftmaxCrossEntropySmooth(s, m.mixLoss, dl2, logits, rolled, n, m.classes, sm) },
		func() error { return o.Scale(s, m.loss, lam) },
		func() error { return o.Axpy(s, m.loss, 1-lam, m.mixLoss) },
		func() error { return o.Scale(s, dl, lam) },
		func() error { return o.Axpy(s, dl, 1-lam, dl2) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("train: mixed loss: %w", err)
		}
	}
	return nil
}

// prepareLoss resolves Config.Loss for data and uploads its pos_weight.
func (t *Trainer) prepareLoss(data Data) error {
	l, err := t.cfg.Loss.resolve(targetKind(data), t.m.classes)
	if err != nil {
		return err
	}
	t.loss, t.targets = l, targetKind(data)
	if l.PosWeight != nil && t.posWeight.Len == 0 {
		if t.posWeight, err = t.m.weights.f32(len(l.PosWeight)); err != nil {
			return err
		}
		return upload(t.s, t.posWeight, append([]float32(nil), l.PosWeight...))
	}
	return nil
}

// Metrics are a model's scores on data with float targets (Trainer.Metrics).
type Metrics struct {
	// MSE is the mean squared error of the outputs (Vector targets).
	MSE float64 `json:"mse,omitempty"`
	// Accuracy is the fraction of samples whose largest output is their target's largest value
	// (Vector targets that are distributions: soft labels).
	Accuracy float64 `json:"accuracy,omitempty"`
	// F1 is the per-label F1 score at logit 0 (probability 1/2), averaged over the labels (macro);
	// MAP the mean over labels of the average precision of the logits' ranking (MultiHot targets).
	// A label no sample has counts in neither mean.
	F1  float64 `json:"f1,omitempty"`
	MAP float64 `json:"map,omitempty"`
}

// floatMetrics scores predictions against float targets of kind k.
func floatMetrics(p *Predictions, k TargetKind) Metrics {
	var m Metrics
	n, c := p.Len(), p.Classes
	if n == 0 {
		return m
	}
	if k == Vector {
		var s float64
		for i, v := range p.Logits {
			e := float64(v) - float64(p.Targets[i])
			s += e * e
		}
		m.MSE = s / float64(n*c)
		ok := 0
		for i := range n {
			if p.Class(i) == argmax(p.Targets[i*c:(i+1)*c]) {
				ok++
			}
		}
		m.Accuracy = float64(ok) / float64(n)
		return m
	}
	labels := 0
	for j := range c {
		var tp, fp, fn int
		type scored struct {
			s   float32
			pos bool
		}
		rows := make([]scored, n)
		for i := range n {
			pos, pred := p.Targets[i*c+j] > 0.5, p.Logits[i*c+j] > 0
			rows[i] = scored{p.Logits[i*c+j], pos}
			switch {
			case pos && pred:
				tp++
			case pred:
				fp++
			case pos:
				fn++
			}
		}
		if tp+fn == 0 {
			continue
		}
		labels++
		m.F1 += 2 * float64(tp) / float64(2*tp+fp+fn)
		// Average precision: the mean, over the positives, of the precision at their rank.
		slices.SortStableFunc(rows, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
		hits := 0
		var ap float64
		for r, s := range rows {
			if s.pos {
				hits++
				ap += float64(hits) / float64(r+1)
			}
		}
		m.MAP += ap / float64(tp+fn)
	}
	if labels > 0 {
		m.F1 /= float64(labels)
		m.MAP /= float64(labels)
	}
	return m
}

func argmax(v []float32) int {
	best := 0
	for j, x := range v {
		if x > v[best] {
			best = j
		}
	}
	return best
}

// Metrics scores the model over one pass of data with float targets (Targeted), in evaluation
// mode: the macro F1 and the mean average precision for multi-hot targets; the mean squared error
// and the accuracy against each target's largest value for vectors.
func (t *Trainer) Metrics(ctx context.Context, data Data) (Metrics, error) {
	k := targetKind(data)
	if k == ClassIDs {
		return Metrics{}, fmt.Errorf("train: %w: Metrics takes data with float targets; use Evaluate for class ids", ErrConfig)
	}
	p, err := t.Predict(ctx, data)
	if err != nil {
		return Metrics{}, err
	}
	if p.Len() == 0 {
		return Metrics{}, fmt.Errorf("train: evaluate: no sample: %w", ErrNoData)
	}
	return floatMetrics(p, k), nil
}
