package train

import (
	"context"
	"errors"
	"iter"
	"math"
	"testing"

	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/transforms"
)

// mixedData marks every batch of d as mixed with p. Its pixels stay as they are: the loss depends
// on the labels and p only.
type mixedData struct {
	*memData
	p transforms.MixParams
}

func (d mixedData) Batches(ctx context.Context, epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		for b, err := range d.memData.Batches(ctx, epoch) {
			b.Mix = d.p
			if !yield(b, err) {
				return
			}
		}
	}
}

// TestMixedLossIsSoftTargets: a batch that MixUp or CutMix mixed with weight Lambda, under label
// smoothing, trains as the same images with timm's soft targets (Lambda x the smoothed one-hot
// target of each sample's label + (1 - Lambda) x that of the label before it in the batch) under
// SoftCrossEntropy: the same loss and the same weights after every step, within float32 rounding.
// Evaluating mixed batches is refused.
func TestMixedLossIsSoftTargets(t *testing.T) {
	const n, batch, smoothing = 64, 8, 0.1
	dev := openCPU(t)
	imgs, labels := synthetic(n, 4)
	// floatData visits its samples in this order (one epoch): give memData the same order, unshuffled.
	order := rng.Epoch(7, 0).Perm(n)
	ordImgs, ordLabels := make([]uint8, 0, len(imgs)), make([]int32, 0, n)
	for _, i := range order {
		ordImgs, ordLabels = append(ordImgs, imgs[64*i:64*(i+1)]...), append(ordLabels, labels[i])
	}
	p := transforms.MixParams{Mixed: true, CutMix: true, Lambda: 0.7}
	soft := make([]float32, 10*n)
	row := make([]float32, 10*batch)
	for lo := 0; lo < n; lo += batch {
		if err := p.SoftTargets(row, ordLabels[lo:lo+batch], 10); err != nil {
			t.Fatal(err)
		}
		for k := range batch {
			for c := range 10 {
				soft[10*order[lo+k]+c] = (1-smoothing)*row[10*k+c] + smoothing/10
			}
		}
	}
	mem := newMemData(dev, ordImgs, ordLabels, img8, batch, false, 0)
	defer mem.close()
	target := newFloatData(t, dev, imgs, soft, 10, Vector)
	target.batch = batch
	run := func(data Data, cfg Config) (Result, [][]float32, *Trainer) {
		cfg.Seed, cfg.Epochs = 3, 1
		tr, err := New(context.Background(), plainMLP(t), dev, optim.SGD{LR: 0.1, Momentum: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		res, err := tr.Fit(t.Context(), data, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res, modelWeights(t, tr), tr
	}
	mres, mw, mtr := run(mixedData{mem, p}, Config{LabelSmoothing: smoothing})
	sres, sw, _ := run(target, Config{Loss: Loss{Kind: SoftCrossEntropy}})
	pres, pw, _ := run(mem, Config{LabelSmoothing: smoothing})
	t.Logf("loss mixed %.6f, soft targets %.6f, unmixed %.6f; weights %.2g apart (unmixed %.2g)",
		mres.FinalLoss, sres.FinalLoss, pres.FinalLoss, relDiff(mw, sw), relDiff(mw, pw))
	if d := relDiff(mw, sw); math.Abs(mres.FinalLoss-sres.FinalLoss) > 1e-5*sres.FinalLoss || d > 1e-5 {
		t.Errorf("mixed batches: loss %v, weights %.2g from the soft-target run's (loss %v); want the same within float32 rounding",
			mres.FinalLoss, d, sres.FinalLoss)
	}
	if relDiff(mw, pw) < 1e-3 {
		t.Errorf("the mixed run's weights are within %.2g of the unmixed run's: the mix was not applied", relDiff(mw, pw))
	}
	if _, err := mtr.Evaluate(t.Context(), mixedData{mem, p}); !errors.Is(err, ErrConfig) {
		t.Errorf("evaluating mixed batches: %v; want ErrConfig", err)
	}
}

// TestMixUpCutMixLearn: a CNN trained through a loader that mixes every batch (MixUp 0.2 and
// CutMix 1.0, switching per batch) still learns the synthetic classes, evaluated on unmixed
// batches, and trains on other numbers than without the mix.
func TestMixUpCutMixLearn(t *testing.T) {
	dev := openCPU(t)
	trainDS, testDS := memDataset(600, 1), memDataset(200, 2)
	mixed := fitLoader(t, dev, smallCNN(t), trainDS, testDS, 2, 3, 32, transforms.Mix{MixUpAlpha: 0.2, CutMixAlpha: 1})
	plain := fitLoader(t, dev, smallCNN(t), trainDS, testDS, 2, 3, 32, transforms.Mix{})
	t.Logf("mixed: accuracy %.3f, loss %.4f; unmixed: %.3f, %.4f", mixed.TestAcc, mixed.FinalLoss, plain.TestAcc, plain.FinalLoss)
	if mixed.TestAcc < 0.8 || mixed.FinalLoss <= plain.FinalLoss {
		t.Errorf("mixed: accuracy %.3f, loss %.4f (unmixed %.4f); want >= 0.8, and a higher loss against soft targets",
			mixed.TestAcc, mixed.FinalLoss, plain.FinalLoss)
	}
}
