package train

import "context"

// trainStep runs one optimizer step on the one batch b, as Fit does without accumulation, and
// returns its mean loss (total and perEpoch are the schedule's).
func (t *Trainer) trainStep(ctx context.Context, b Batch, mean, std []float32, total, perEpoch int) (float64, error) {
	g := stepGroup{}
	err := t.enqueueBatch(ctx, b, mean, std, &g, true)
	if b.Release != nil {
		b.Release()
	}
	if err != nil {
		return 0, err
	}
	return t.finishStep(g, perEpoch, total)
}
