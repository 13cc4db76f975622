package nn_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// ckBlock is a residual block with every kind of state a recomputation must reproduce: a batch
// norm (running statistics), dropout and drop path (random masks), a layer norm, a shared
// parameter (Scale, also used outside the blocks) and a Narrow (a view whose gradient is
// gathered from pieces).
type ckBlock struct {
	Conv  *nn.Conv2dLayer
	BN    *nn.BatchNorm2dLayer
	LN    *nn.LayerNormLayer
	Scale *nn.Tensor `nn:"-"`
}

func (b *ckBlock) Forward(x *nn.Tensor) *nn.Tensor {
	y := nn.GELU(b.BN.Forward(b.Conv.Forward(x)))
	y = nn.Dropout(b.LN.Forward(y), 0.2)
	half := y.Dim(1) / 2
	y = nn.Concat(1, nn.Mul(nn.Narrow(y, 1, 0, half), b.Scale.Reshape(1, 1, 1, 4)), nn.Narrow(y, 1, half, y.Dim(1)-half))
	return nn.Add(x, nn.DropPath(y, 0.25))
}

type ckNet struct {
	Blocks []*ckBlock
	Scale  *nn.Tensor
	Head   *nn.LinearLayer
	ck     bool
}

func (m *ckNet) Forward(x *nn.Tensor) *nn.Tensor {
	for _, b := range m.Blocks {
		if m.ck {
			x = nn.Checkpoint(b, x)
		} else {
			x = b.Forward(x)
		}
	}
	x = nn.Mul(x, m.Scale)
	return m.Head.Forward(nn.Flatten(nn.GlobalAvgPool(x)))
}

func newCkNet(blocks, c int) *ckNet {
	m := &ckNet{Scale: nn.Param([]int{4}, nn.Ones), Head: nn.NewLinear(c, 3, true)}
	for range blocks {
		m.Blocks = append(m.Blocks, &ckBlock{Conv: nn.NewConv2d(c, c, 3, nn.ConvOptions{Stride: 1, Padding: 1}, false),
			BN: nn.NewBatchNorm2d(c), LN: nn.NewLayerNorm(4), Scale: m.Scale})
	}
	return m
}

// counting is an allocator that counts the floats it hands out: a graph's peak memory, since a
// graph keeps what it was given in its pool.
type counting struct {
	nn.Allocator
	floats int
}

func (c *counting) F32(n int) (kernels.F32, error) {
	c.floats += n
	return c.Allocator.F32(n)
}

// TestCheckpointGradients: a network whose blocks are checkpointed gives the same loss, the same
// gradients of every parameter and of the input, and the same running statistics, bit for bit,
// as the same network without, over two steps (the second from the first's running
// statistics); its graph is handed less memory, and the saving grows with the number of blocks.
func TestCheckpointGradients(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	type result struct {
		values [][]float32 // the loss, the input's gradient, each tensor's gradient and value
		floats int
	}
	run := func(ck bool, blocks int) result {
		m := newCkNet(blocks, 4)
		m.ck = ck
		if err := nn.Bind(m, e.a, e.s, 3); err != nil {
			t.Fatal(err)
		}
		named, err := nn.StateDict(m)
		if err != nil {
			t.Fatal(err)
		}
		alloc := &counting{Allocator: e.a}
		g := nn.NewGraph(e.ops, e.s, alloc, true, 7)
		for _, n := range named {
			g.Attach(n.Tensor)
		}
		var r result
		x := make([]float32, 2*4*4*4)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)))
		}
		for step := range 2 {
			g.Reset(true, uint64(11+step))
			in := g.Constant(x, 2, 4, 4, 4)
			in.SetRequiresGrad(true)
			loss := nn.CrossEntropy(m.Forward(in), e.labels([]int32{2, 0}), 0)
			if err := g.Backward(loss, nil); err != nil {
				t.Fatalf("checkpoint %v: %v", ck, err)
			}
			host := func(v *nn.Tensor) []float32 {
				h, err := v.Host(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			r.values = append(r.values, host(loss), host(g.Grad(in)))
			for _, n := range named {
				if n.Tensor.Trained() {
					r.values = append(r.values, host(g.Input(n.Tensor.GradData(), n.Tensor.Shape()...)))
				}
				r.values = append(r.values, host(n.Tensor))
			}
		}
		r.floats = alloc.floats
		return r
	}
	for _, blocks := range []int{1, 4} {
		plain, ck := run(false, blocks), run(true, blocks)
		if len(plain.values) != len(ck.values) {
			t.Fatalf("%d blocks: %d tensors with checkpoints, %d without", blocks, len(ck.values), len(plain.values))
		}
		for i := range plain.values {
			if !slices.Equal(plain.values[i], ck.values[i]) {
				t.Fatalf("%d blocks: tensor %d with checkpoints %v; without %v", blocks, i, ck.values[i], plain.values[i])
			}
		}
		t.Logf("%d blocks: %d floats handed out without checkpoints, %d with", blocks, plain.floats, ck.floats)
		if blocks == 4 && ck.floats >= plain.floats*3/4 {
			t.Errorf("%d blocks: %d floats with checkpoints, %d without: want under three quarters", blocks, ck.floats, plain.floats)
		}
	}
}

// TestCheckpointOutsideTraining: in evaluation and in a graph that infers shapes, Checkpoint is
// a plain call (Trace sees the block's own ops); with synchronized batch norms it fails the
// graph with ErrGraph.
func TestCheckpointOutsideTraining(t *testing.T) {
	m := newCkNet(2, 4)
	m.ck = true
	steps, _, _, err := nn.Trace(m, 1, 4, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(steps, func(s nn.Step) bool { return s.Op == "conv2d" }) ||
		slices.ContainsFunc(steps, func(s nn.Step) bool { return s.Op == "checkpoint" }) {
		t.Errorf("the trace of a checkpointed network does not show its blocks' ops: %v", steps)
	}
	e := newEnv(t)
	if err := nn.Bind(m, e.a, e.s, 3); err != nil {
		t.Fatal(err)
	}
	g := e.graph(true)
	g.SyncBatchNorm(0, 2, func(kernels.F32) error { return nil })
	m.Forward(g.Full(1, 1, 4, 4, 4))
	if err := g.Err(); !errors.Is(err, nn.ErrGraph) {
		t.Errorf("checkpoint with synchronized batch norms: %v; want ErrGraph", err)
	}
}

// stash is a block that keeps a tensor it made (T) beside its result, or returns its parameter
// as it is (param).
type stash struct {
	W     *nn.Tensor
	T     *nn.Tensor `nn:"-"`
	param bool
}

func (s *stash) Forward(x *nn.Tensor) *nn.Tensor {
	if s.param {
		return s.W
	}
	s.T = nn.GELU(nn.Mul(x, s.W))
	return nn.Add(x, s.T)
}

// TestCheckpointEscapes: a tensor made inside a checkpointed module and used after it (its memory
// given back) fails the graph with ErrGraph, naming it, where it would hold another tensor's
// values; a module that returns its parameter as it is gives it the gradient it has without
// Checkpoint.
func TestCheckpointEscapes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := &stash{W: nn.Param([]int{4}, nn.Ones)}
	if err := nn.Bind(s, e.a, e.s, 3); err != nil {
		t.Fatal(err)
	}
	g := e.graph(true)
	g.Attach(s.W)
	x := g.Full(0.5, 2, 4)
	y := nn.Checkpoint(s, x)
	nn.Add(y, s.T)
	if err := g.Err(); !errors.Is(err, nn.ErrGraph) || !strings.Contains(err.Error(), "made inside a Checkpoint's module") {
		t.Errorf("a tensor made inside a checkpointed module, used after it: %v; want ErrGraph naming it", err)
	}
	s.param = true
	var grads [][]float32
	for _, ck := range []bool{false, true} {
		g.Reset(true, 1)
		x := g.Full(0.5, 2, 4)
		var w *nn.Tensor
		if ck {
			w = nn.Checkpoint(s, x)
		} else {
			w = s.Forward(x)
		}
		if err := g.Backward(nn.Sum(nn.Mul(w, x), nil, false), nil); err != nil {
			t.Fatalf("checkpoint %v: %v", ck, err)
		}
		v, err := g.Input(s.W.GradData(), 4).Host(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, v)
	}
	if !slices.Equal(grads[0], grads[1]) || grads[0][0] != 1 {
		t.Errorf("a returned parameter's gradient: %v with Checkpoint, %v without; want 1s", grads[1], grads[0])
	}
}
