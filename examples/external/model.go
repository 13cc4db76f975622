package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"example.com/stoke-external/layers"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// The model side's extension points: a model of one's own made of the layers of package layers
// (a LowRank layer, a module of package nn), a user optimizer (HeavyBall, an optim.Optimizer),
// training it through a Loader, and its checkpoint loaded into the same model built again, as a
// PyTorch state_dict is; and a registered model whose arguments are a Go struct
// (tiny-transformer), rebuilt from its checkpoint by name, whose misfit arguments are an error
// naming the op and the shapes.

// HeavyBall is Polyak momentum with decoupled weight decay, written over kernels.Ops:
// v = Momentum*v + g; w -= LR*(v + WeightDecay*w) (weight decay where the parameter takes it).
type HeavyBall struct{ LR, Momentum, WeightDecay float64 }

var _ optim.Optimizer = HeavyBall{}

func (o HeavyBall) String() string {
	return fmt.Sprintf("heavyball lr=%g momentum=%g weight_decay=%g", o.LR, o.Momentum, o.WeightDecay)
}
func (o HeavyBall) BaseLR() float64 { return o.LR }
func (o HeavyBall) Slots() int      { return 1 }

func (o HeavyBall) Update(ops kernels.Ops, s gpu.Stream, p optim.Param, state []kernels.F32, lr float64, _ int) error {
	v := state[0]
	if p.Decay && o.WeightDecay != 0 {
		if err := ops.Scale(s, p.W, float32(1-lr*o.WeightDecay)); err != nil {
			return err
		}
	}
	if err := ops.Scale(s, v, float32(o.Momentum)); err != nil {
		return err
	}
	if err := ops.Axpy(s, v, 1, p.G); err != nil {
		return err
	}
	return ops.Axpy(s, p.W, float32(-lr), v)
}

// quadrants is n 8x8 grey images of 4 classes: class c brightens quadrant c over noise.
func quadrants(n int, seed uint64) *loaders.Memory {
	r := rand.New(rand.NewPCG(seed, 1))
	samples := make([]loaders.Sample, n)
	for i := range samples {
		c := r.IntN(4)
		px := make([]byte, 64)
		for j := range px {
			px[j] = byte(r.IntN(100))
			if y, x := j/8, j%8; (y/4)*2+x/4 == c {
				px[j] += 120
			}
		}
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: 8, W: 8, C: 1}, Label: c}
	}
	return loaders.NewMemory(loaders.Info{Name: "quadrants", NumClasses: 4, Shape: transforms.Shape{C: 1, H: 8, W: 8},
		Mean: []float32{0.3}, Std: []float32{0.3}}, samples)
}

// lowRankNet is Flatten - LowRank - ReLU - Linear over 8x8 images, a model no builder is
// registered for.
func lowRankNet() (*train.Model, error) {
	return train.Net("lowrank-net", train.Shape{C: 1, H: 8, W: 8}, 4, nn.Dict{
		{Name: "flatten", Module: nn.Fn(nn.Flatten)},
		{Name: "lowrank", Module: layers.NewLowRank(64, 8, 32)},
		{Name: "relu", Module: nn.Fn(nn.ReLU)},
		{Name: "fc", Module: nn.NewLinear(32, 4, true)},
	})
}

// fitQuadrants trains m with opt for 3 epochs on quadrants through Loaders, checkpointing to ck,
// and checks a test accuracy of at least 90%. done releases the trainer and the test Loader.
func fitQuadrants(ctx context.Context, dev gpu.Device, m *train.Model, opt optim.Optimizer, ck string) (tr *train.Trainer, testL *loaders.Loader, res train.Result, done func(), err error) {
	tr, err = train.New(ctx, m, dev, opt, train.Config{Epochs: 3, Seed: 1, Checkpoint: ck})
	if err != nil {
		return nil, nil, res, nil, err
	}
	trainL, err := loaders.New(quadrants(1200, 1), loaders.Config{Batch: 32, Workers: 2, Shuffle: true, Device: dev, Stream: tr.Stream()})
	if err != nil {
		tr.Close()
		return nil, nil, res, nil, err
	}
	defer trainL.Close()
	testL, err = loaders.New(quadrants(400, 2), loaders.Config{Batch: 100, Workers: 2, Device: dev, Stream: tr.Stream()})
	if err != nil {
		tr.Close()
		return nil, nil, res, nil, err
	}
	done = func() { testL.Close(); tr.Close() }
	if res, err = tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL)); err == nil && res.TestAcc < 0.9 {
		err = fmt.Errorf("test accuracy %.3f after %d epochs; want >= 0.9", res.TestAcc, res.Epochs)
	}
	if err != nil {
		done()
		return nil, nil, res, nil, err
	}
	return tr, testL, res, done, nil
}

// userModel trains lowrank-net with HeavyBall through Loaders to a test accuracy of at least 90%,
// checkpoints it, and loads the checkpoint into the same model built again: it predicts the same
// logits. train.CheckpointModel refuses it, since no builder is registered for it.
func userModel(ctx context.Context) error {
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	m, err := lowRankNet()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stoke-external-model")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ck := filepath.Join(dir, "ck")
	tr, testL, res, done, err := fitQuadrants(ctx, dev, m, HeavyBall{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4}, ck)
	if err != nil {
		return err
	}
	defer done()
	want, err := tr.Predict(ctx, train.FromLoader(testL))
	if err != nil {
		return err
	}
	if _, err := train.CheckpointModel(ck); !errors.Is(err, train.ErrMismatch) {
		return fmt.Errorf("CheckpointModel of a model no builder made: %v; want ErrMismatch", err)
	}
	again, err := lowRankNet()
	if err != nil {
		return err
	}
	served, err := train.New(ctx, again, dev, nil, train.Config{Resume: ck})
	if err != nil {
		return err
	}
	defer served.Close()
	got, err := served.Predict(ctx, train.FromLoader(testL))
	if err != nil {
		return err
	}
	if !slices.Equal(got.Logits, want.Logits) {
		return fmt.Errorf("lowrank-net built again and loaded from its checkpoint predicts other logits")
	}
	fmt.Printf("lowrank-net with heavyball: test accuracy %.1f%%\n", 100*res.TestAcc)
	return nil
}

// transformerModel: tiny-transformer with 5 heads over a width of 24 is refused with an error
// naming the reshape and its shapes (not a panic); with 4 heads it trains to at least 90%, and
// its checkpoint rebuilds it by name, its arguments decoded again from the name.
func transformerModel(ctx context.Context) error {
	in := train.Shape{C: 1, H: 8, W: 8}
	_, err := train.NewModel("tiny-transformer(heads=5)", in, 4)
	if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), "reshape [1 4 24] to [1 4 5 4]") {
		return fmt.Errorf("5 heads over a width of 24: %v; want ErrModel naming the reshape and its shapes", err)
	}
	if _, err := train.NewModel("tiny-transformer(heads=four)", in, 4); err == nil || !strings.Contains(err.Error(), "heads") {
		return fmt.Errorf("heads=four: %v; want an error naming heads", err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	m, err := train.NewModel("tiny-transformer(heads=4)", in, 4)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stoke-external-transformer")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ck := filepath.Join(dir, "ck")
	_, _, res, done, err := fitQuadrants(ctx, dev, m, optim.AdamW{LR: 3e-3}, ck)
	if err != nil {
		return err
	}
	done()
	m2, err := train.CheckpointModel(ck)
	if err != nil {
		return err
	}
	if m2.Name() != "tiny-transformer(heads=4,width=24)" {
		return fmt.Errorf("rebuilt %q from the checkpoint", m2.Name())
	}
	fmt.Printf("%s: test accuracy %.1f%%\n", m2.Name(), 100*res.TestAcc)
	return nil
}
