package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// The model side's extension points: a user layer (LowRank, a train.Module over kernels.Ops), a
// user optimizer (HeavyBall, a train.Optimizer), training a model that holds both through a
// Loader, and the checkpoint of that model rebuilt by train.CheckpointModel once the layer's kind
// is registered.

// LowRank is a factorized fully connected layer y = (x Vᵀ) Uᵀ, V [rank in], U [out rank]: fewer
// weights than a Linear of in x out when rank is small.
type LowRank struct {
	In, Rank, Out int
	u, v          *train.Param
	x, h, y       kernels.F32 // input (kept for Backward), hidden [n rank], output
	dh, dx        kernels.F32
}

var _ train.Module = (*LowRank)(nil)

func (l *LowRank) String() string { return fmt.Sprintf("lowrank %d->%d->%d", l.In, l.Rank, l.Out) }

func (l *LowRank) Setup(in []int) ([]int, error) {
	n := 1
	for _, d := range in {
		n *= d
	}
	if n != l.In || l.Rank < 1 || l.Out < 1 {
		return nil, fmt.Errorf("lowrank: input %v (%d values); want %d, rank and out positive", in, n, l.In)
	}
	return []int{l.Out}, nil
}

func (l *LowRank) Params() []*train.Param {
	l.v, l.u = train.NewWeight("v", []int{l.Rank, l.In}), train.NewWeight("u", []int{l.Out, l.Rank})
	return []*train.Param{l.v, l.u}
}

func (l *LowRank) Reserve(a train.Allocator, n int) (err error) {
	for _, p := range []struct {
		dst *kernels.F32
		len int
	}{{&l.h, n * l.Rank}, {&l.y, n * l.Out}, {&l.dh, n * l.Rank}, {&l.dx, n * l.In}} {
		if *p.dst, err = a.F32(p.len); err != nil {
			return err
		}
	}
	return nil
}

func (l *LowRank) Forward(p *train.Pass, x kernels.F32, n int) (kernels.F32, error) {
	l.x = x
	h, y := l.h.Slice(0, n*l.Rank), l.y.Slice(0, n*l.Out)
	if err := p.Ops.Gemm(p.Stream, false, true, n, l.Rank, l.In, 1, x, l.v.W, 0, h); err != nil {
		return y, err
	}
	return y, p.Ops.Gemm(p.Stream, false, true, n, l.Out, l.Rank, 1, h, l.u.W, 0, y)
}

func (l *LowRank) Backward(p *train.Pass, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	h, dh := l.h.Slice(0, n*l.Rank), l.dh.Slice(0, n*l.Rank)
	steps := []func() error{
		func() error { return p.Ops.Gemm(p.Stream, true, false, l.Out, l.Rank, n, 1, dy, h, 0, l.u.G) },   // dU = dyᵀ h
		func() error { return p.Ops.Gemm(p.Stream, false, false, n, l.Rank, l.Out, 1, dy, l.u.W, 0, dh) }, // dh = dy U
		func() error { return p.Ops.Gemm(p.Stream, true, false, l.Rank, l.In, n, 1, dh, l.x, 0, l.v.G) },  // dV = dhᵀ x
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return kernels.F32{}, err
		}
	}
	if !needDx {
		return kernels.F32{}, nil
	}
	dx := l.dx.Slice(0, n*l.In)
	return dx, p.Ops.Gemm(p.Stream, false, false, n, l.In, l.Rank, 1, dh, l.v.W, 0, dx) // dx = dh V
}

func parseLowRank(desc string) (train.Module, error) {
	l := &LowRank{}
	if _, err := fmt.Sscanf(desc, "lowrank %d->%d->%d", &l.In, &l.Rank, &l.Out); err != nil {
		return nil, err
	}
	return l, nil
}

// HeavyBall is Polyak momentum with decoupled weight decay, written over kernels.Ops:
// v = Momentum*v + g; w -= LR*(v + WeightDecay*w) (weight decay where the parameter takes it).
type HeavyBall struct{ LR, Momentum, WeightDecay float64 }

var _ train.Optimizer = HeavyBall{}

func (o HeavyBall) String() string {
	return fmt.Sprintf("heavyball lr=%g momentum=%g weight_decay=%g", o.LR, o.Momentum, o.WeightDecay)
}
func (o HeavyBall) BaseLR() float64 { return o.LR }
func (o HeavyBall) Slots() int      { return 1 }

func (o HeavyBall) Update(ops kernels.Ops, s gpu.Stream, p *train.Param, state []kernels.F32, lr float64, _ int) error {
	v := state[0]
	if p.Decayed() && o.WeightDecay != 0 {
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

// userModel trains Flatten - LowRank - ReLU - Linear with HeavyBall through Loaders to a test
// accuracy of at least 90%, checkpoints it and rebuilds it from the checkpoint.
func userModel(ctx context.Context) error {
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	in := train.Shape{C: 1, H: 8, W: 8}
	m, err := train.Sequential("lowrank-net", in, 4, train.Flatten(), train.Custom(&LowRank{In: 64, Rank: 8, Out: 32}), train.ReLU(), train.Linear(32, 4))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "stoke-external-model")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ck := filepath.Join(dir, "ck")
	tr, err := train.New(ctx, m, dev, HeavyBall{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4}, train.Config{Epochs: 3, Seed: 1, Checkpoint: ck})
	if err != nil {
		return err
	}
	defer tr.Close()
	trainL, err := loaders.New(quadrants(1200, 1), loaders.Config{Batch: 32, Workers: 2, Shuffle: true, Device: dev, Stream: tr.Stream()})
	if err != nil {
		return err
	}
	defer trainL.Close()
	testL, err := loaders.New(quadrants(400, 2), loaders.Config{Batch: 100, Workers: 2, Device: dev, Stream: tr.Stream()})
	if err != nil {
		return err
	}
	defer testL.Close()
	res, err := tr.Fit(ctx, train.FromLoader(trainL), train.FromLoader(testL))
	if err != nil {
		return err
	}
	if res.TestAcc < 0.9 {
		return fmt.Errorf("test accuracy %.3f after %d epochs; want >= 0.9", res.TestAcc, res.Epochs)
	}
	if _, err := train.CheckpointModel(ck); !errors.Is(err, train.ErrMismatch) {
		return fmt.Errorf("CheckpointModel before RegisterLayer: %v; want ErrMismatch naming lowrank", err)
	}
	if err := train.RegisterLayer("lowrank", parseLowRank); err != nil {
		return err
	}
	m2, err := train.CheckpointModel(ck)
	if err != nil {
		return err
	}
	if m2.String() != m.String() {
		return fmt.Errorf("rebuilt %q; want %q", m2, m)
	}
	fmt.Printf("lowrank-net with heavyball: test accuracy %.1f%%\n", 100*res.TestAcc)
	return nil
}
