package train

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/collective"
)

// Evaluation is what EvaluateClasses measures on data with class ids.
type Evaluation struct {
	// Samples is the number of samples evaluated (each once, over all ranks under Collective).
	Samples int
	// Acc is the top-1 accuracy; Top5 the fraction of samples whose label is among the 5 largest
	// logits (top-min(5, classes), as timm's validation; ties rank the lower class first, as
	// Predictions.Class does).
	Acc, Top5 float64
	// ClassAcc[c] is the accuracy on the samples labelled c (their recall, torchmetrics'
	// MulticlassAccuracy with average=None), 0 for a class without samples; ClassSamples[c]
	// counts them.
	ClassAcc     []float64
	ClassSamples []int
	// Loss is the mean cross-entropy of the samples' logits against their labels, without label
	// smoothing or mixing (the validation loss of PyTorch's nn.CrossEntropyLoss and timm's
	// validate).
	Loss float64
}

// Evaluate returns the model's accuracy over one pass of data (epoch 0 of it), with dropout off.
// For data with float targets (Targeted) it returns the score of Metrics: the macro F1 for
// multi-hot targets; for vectors the accuracy when the trainer's loss is SoftCrossEntropy (soft
// labels), else the mean squared error (lower is better). In a data-parallel run every rank calls
// it with its own part of the data and gets the accuracy over all the parts, each sample counted
// once (class ids only: float targets are scored on this rank's part).
func (t *Trainer) Evaluate(ctx context.Context, data Data) (float64, error) {
	if k := targetKind(data); k != ClassIDs {
		m, err := t.Metrics(ctx, data)
		if k == Vector && t.loss.Kind == SoftCrossEntropy {
			return m.Accuracy, err
		}
		if k == Vector {
			return m.MSE, err
		}
		return m.F1, err
	}
	ev, err := t.EvaluateClasses(ctx, data)
	if err != nil {
		return 0, err
	}
	return ev.Acc, nil
}

// EvaluateClasses scores the model over one pass of data with class ids (epoch 0 of it), with
// dropout off: top-1 and top-5 accuracy and the accuracy per class. In a data-parallel run every
// rank calls it with its own part of the data and gets the scores over all the parts, each sample
// counted once (a rank-split loader pads the ranks to equal counts by repeating samples, as
// PyTorch's DistributedSampler does; a sample seen twice counts its mean once).
func (t *Trainer) EvaluateClasses(ctx context.Context, data Data) (*Evaluation, error) {
	if targetKind(data) != ClassIDs {
		return nil, fmt.Errorf("train: %w: EvaluateClasses takes data with class ids; use Metrics for float targets", ErrConfig)
	}
	classes := t.m.classes
	k := min(5, classes)
	mean, std := data.Normalization()
	p := &Predictions{Classes: classes}
	var tally evalTally
	pos := 0
	for b, err := range data.Batches(ctx, 0) {
		if err != nil {
			return nil, fmt.Errorf("train: evaluate: %w", err)
		}
		p.Logits, p.Labels, p.Indices = p.Logits[:0], p.Labels[:0], p.Indices[:0]
		err := t.predictInto(ctx, p, b, mean, std)
		if b.Release != nil {
			b.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("train: evaluate: %w", err)
		}
		byIndex := t.dist != nil && dataWorld(data) > 1
		if byIndex && p.Indices == nil {
			return nil, fmt.Errorf("train: %w: evaluate: the data is split between ranks but gives no sample indices to count each sample once by", ErrConfig)
		}
		for i, l := range p.Labels {
			at := pos + i
			if byIndex {
				at = p.Indices[i]
			}
			if l < 0 || int(l) >= classes {
				return nil, fmt.Errorf("train: evaluate: sample %d has label %d; the model has %d classes", at, l, classes)
			}
			tally.add(at, int(l), p.Class(i) == int(l), p.InTopK(i, int(l), k), crossEntropy(p.Logits[i*classes:(i+1)*classes], int(l)))
		}
		pos += p.Len()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if t.dist != nil {
		if err := tally.reduce(ctx, t.dist.g); err != nil {
			return nil, fmt.Errorf("train: evaluate: %w", err)
		}
	}
	ev, err := tally.evaluation(classes)
	if err != nil {
		return nil, fmt.Errorf("train: evaluate: %w", err)
	}
	return ev, nil
}

// crossEntropy is -log softmax(row)[label], computed in float64 from the largest logit.
func crossEntropy(row []float32, label int) float64 {
	top := float64(row[0])
	for _, v := range row {
		top = max(top, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - top)
	}
	return top + math.Log(sum) - float64(row[label])
}

// evalTally counts an evaluation per sample (by dataset index under Collective, where the ranks' tallies
// are summed: how often each sample was seen, right, in the top 5, its label times the times seen
// and its loss summed over the times seen).
type evalTally struct {
	seen, right, top, label, loss []float32
}

func (e *evalTally) add(i, label int, right, top bool, loss float64) {
	if i >= len(e.seen) {
		n := max(i+1, 2*len(e.seen))
		for _, v := range e.all() {
			*v = append(*v, make([]float32, n-len(*v))...)
		}
	}
	e.seen[i]++
	e.label[i] += float32(label)
	e.loss[i] += float32(loss)
	if right {
		e.right[i]++
	}
	if top {
		e.top[i]++
	}
}

// reduce sums the tallies over the ranks (exactly: counts far below 2^24).
func (e *evalTally) reduce(ctx context.Context, g Collective) error {
	// The tallies' length is the largest over the ranks: gathered through a sum in which each rank
	// fills only its own slot.
	lens := make([]float32, g.Size())
	lens[g.Rank()] = float32(len(e.seen))
	if err := g.AllReduce(ctx, lens, collective.Sum); err != nil {
		return err
	}
	n := 0
	for _, l := range lens {
		n = max(n, int(l))
	}
	vs := e.all()
	buf := make([]float32, len(vs)*n)
	for j, v := range vs {
		copy(buf[j*n:], *v)
	}
	if err := g.AllReduce(ctx, buf, collective.Sum); err != nil {
		return err
	}
	for j, v := range vs {
		*v = buf[j*n : (j+1)*n]
	}
	return nil
}

func (e *evalTally) all() []*[]float32 {
	return []*[]float32{&e.seen, &e.right, &e.top, &e.label, &e.loss}
}

// evaluation turns the tally into scores, each sample counting once.
func (e *evalTally) evaluation(classes int) (*Evaluation, error) {
	ev := &Evaluation{ClassAcc: make([]float64, classes), ClassSamples: make([]int, classes)}
	var right, top, loss float64
	for i, seen := range e.seen {
		if seen == 0 {
			continue
		}
		c := int(e.label[i] / seen)
		if c < 0 || c >= classes {
			return nil, errors.New("the ranks disagree on a sample's label")
		}
		r := float64(e.right[i]) / float64(seen)
		ev.Samples++
		right += r
		top += float64(e.top[i]) / float64(seen)
		loss += float64(e.loss[i]) / float64(seen)
		ev.ClassAcc[c] += r
		ev.ClassSamples[c]++
	}
	if ev.Samples == 0 {
		return nil, fmt.Errorf("no sample: %w", ErrNoData)
	}
	if math.IsNaN(right) || math.IsNaN(top) {
		return nil, errors.New("evaluation tally is not a number")
	}
	ev.Acc, ev.Top5, ev.Loss = right/float64(ev.Samples), top/float64(ev.Samples), loss/float64(ev.Samples)
	for c, n := range ev.ClassSamples {
		if n > 0 {
			ev.ClassAcc[c] /= float64(n)
		}
	}
	return ev, nil
}
