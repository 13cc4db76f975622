package train

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/stoke-ml/stoke/kernels"
)

// Predictions are a model's outputs for a run of samples, in the order the data gave them.
type Predictions struct {
	// Classes is the number of logits per sample.
	Classes int
	// Logits are [Len][Classes], row-major.
	Logits []float32
	// Labels are the samples' labels as the data gave them; none for a batch of images alone.
	Labels []int32
	// Targets are the samples' float targets [Len][Classes] for data with float targets
	// (Targeted); nil otherwise, when Labels holds the class ids.
	Targets []float32
	// Indices are the samples' dataset indices when the data gave them (loaders do), else nil.
	Indices []int
}

// Len is the number of samples.
func (p *Predictions) Len() int { return len(p.Logits) / max(p.Classes, 1) }

// Class is sample i's predicted class: the index of its largest logit (the lowest on ties).
func (p *Predictions) Class(i int) int {
	row := p.Logits[i*p.Classes : (i+1)*p.Classes]
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// InTopK reports whether class label is among sample i's k largest logits: fewer than k classes
// rank above it, a class ranking above when its logit is larger, or equal and its index lower (as
// Class breaks ties: InTopK(i, Class(i), 1) holds).
func (p *Predictions) InTopK(i, label, k int) bool {
	row := p.Logits[i*p.Classes : (i+1)*p.Classes]
	v, above := row[label], 0
	for j, x := range row {
		if x > v || x == v && j < label {
			if above++; above >= k {
				return false
			}
		}
	}
	return true
}

// Accuracy is the fraction of samples whose predicted class is their label (0 with no samples).
func (p *Predictions) Accuracy() float64 {
	if p.Len() == 0 {
		return 0
	}
	ok := 0
	for i, l := range p.Labels {
		if p.Class(i) == int(l) {
			ok++
		}
	}
	return float64(ok) / float64(p.Len())
}

// Predict runs the model in evaluation mode (BatchNorm on its running statistics, no dropout)
// over one pass of data (epoch 0 of it) and returns every sample's logits.
func (t *Trainer) Predict(ctx context.Context, data Data) (*Predictions, error) {
	mean, std := data.Normalization()
	p := &Predictions{Classes: t.m.classes}
	for b, err := range data.Batches(ctx, 0) {
		if err != nil {
			return nil, fmt.Errorf("train: predict: %w", err)
		}
		err := t.predictInto(ctx, p, b, mean, std)
		if b.Release != nil {
			b.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("train: predict: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// PredictBatch returns the logits of one batch, its pixels normalized with mean and std (as
// Data.Normalization gives them), in evaluation mode. The caller keeps ownership of b. The batch
// needs only its images: Labels and Targets may be empty (the Predictions then have no labels).
// Package predict does this from image files or decoded images.
func (t *Trainer) PredictBatch(ctx context.Context, b Batch, mean, std []float32) (*Predictions, error) {
	p := &Predictions{Classes: t.m.classes}
	if err := t.predictInto(ctx, p, b, mean, std); err != nil {
		return nil, fmt.Errorf("train: predict: %w", err)
	}
	return p, nil
}

// predictInto appends b's logits and labels to p; it waits for the stream.
func (t *Trainer) predictInto(ctx context.Context, p *Predictions, b Batch, mean, std []float32) error {
	if err := t.validInputs(b, true); err != nil {
		return err
	}
	base := len(p.Logits)
	p.Logits = append(p.Logits, make([]float32, b.N*p.Classes)...)
	var err error
	switch {
	case b.Labels.Len == 0 && b.Targets.Len == 0: // images only: nothing to copy
	case b.Targets.Len > 0:
		p.Targets = append(p.Targets, make([]float32, b.Targets.Len)...)
		dst := p.Targets[len(p.Targets)-b.Targets.Len:]
		err = t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), b.Targets.Buf, 4*b.Targets.Off)
	default:
		p.Labels = append(p.Labels, make([]int32, b.N)...)
		labels := p.Labels[len(p.Labels)-b.N:]
		err = t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&labels[0])), 4*len(labels)), b.Labels.Buf, 4*b.Labels.Off)
	}
	if err != nil {
		return err
	}
	r := &run{ops: t.ops, s: t.s}
	err = t.forwardChunks(ctx, r, b, mean, std, func(logits kernels.F32, _ Batch, lo int) error {
		dst := p.Logits[base+lo*p.Classes : base+(lo+logits.Len/p.Classes)*p.Classes]
		return t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), logits.Buf, 4*logits.Off)
	})
	if err != nil {
		return err
	}
	if err := t.wait(ctx); err != nil {
		return err
	}
	if b.Indices != nil {
		p.Indices = append(p.Indices, b.Indices...)
	}
	return nil
}
