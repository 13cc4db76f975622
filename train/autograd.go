package train

import (
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// NNModule is a module of package nn that describes itself: its String is its identity in
// checkpoints, as a Module's (kind first; RegisterLayer rebuilds it from the description).
type NNModule interface {
	nn.Module
	String() string
}

// NN makes a module of package nn a Module whose backward pass nn derives: Custom(NN(m)) is a
// layer written as a forward pass only. Its tensors are nn.StateDict's, named after the layer's
// place ("3.se.fc1.weight"); the trainer allocates, initializes (from the tensor's nn.Dist where
// it has one; or else a Weight as NewWeight, Zeros as NewBias or a zero buffer, Ones as NewScale
// or a buffer of ones, Embedding normal with std 0.02), trains, checkpoints and exports them like
// any layer's, with weight decay on a Weight only. A batch norm inside m follows
// Config.SyncBatchNorm; a frozen layer (Config.FreezeBackbone, FreezeUpTo) runs in evaluation
// mode (batch norms on their running statistics, no dropout).
func NN(m NNModule) Module { return &nnModule{m: m} }

type nnModule struct {
	m       NNModule
	in, out []int // per sample
	tensors []nn.Named
	params  []*Param // tensors[i]'s
	alloc   Allocator
	g       *nn.Graph
	x, y    *nn.Tensor // the last forward's input and output
	xShape  []int      // x's shape, and then y's: the batch size and the shapes Setup found
	yShape  []int
	frozen  bool // evaluation mode in training too (see freeze)
	world   int  // the ranks a synchronized batch norm spans (Config.SyncBatchNorm); 0: none
}

// inputChecker is a module that refuses some per-sample input shapes before nn sees them (one of
// the package's layers, with its own words).
type inputChecker interface{ checkInput(in []int) error }

func (l *nnModule) String() string { return l.m.String() }

func (l *nnModule) Setup(in []int) ([]int, error) {
	if c, ok := l.m.(inputChecker); ok {
		if err := c.checkInput(in); err != nil {
			return nil, err
		}
	}
	out, err := nn.Infer(l.m, true, append([]int{1}, in...)...)
	if err != nil {
		return nil, fmt.Errorf("train: %v: %w", l.m, err)
	}
	if len(out) == 0 || out[0] != 1 {
		return nil, fmt.Errorf("train: %v: output shape %v does not keep the batch dimension", l.m, out)
	}
	if l.tensors, err = nn.StateDict(l.m); err != nil {
		return nil, fmt.Errorf("train: %v: %w", l.m, err)
	}
	l.in, l.out = slices.Clone(in), out[1:]
	return l.out, nil
}

func (l *nnModule) Params() []*Param {
	l.params = make([]*Param, len(l.tensors))
	for i, n := range l.tensors {
		shape := n.Tensor.Shape()
		switch init := n.Tensor.InitKind(); {
		case !n.Tensor.Trained():
			l.params[i] = NewBuffer(n.Name, shape, init == nn.Ones)
		case init == nn.Weight:
			l.params[i] = NewWeight(n.Name, shape)
		case init == nn.Ones:
			l.params[i] = NewScale(n.Name, shape)
		case init == nn.Embedding:
			l.params[i] = &Param{Name: n.Name, Shape: shape, kind: kindEmbedding}
		default:
			l.params[i] = NewBias(n.Name, shape)
		}
		l.params[i].dist = n.Tensor.Dist()
	}
	return l.params
}

func (l *nnModule) Reserve(a Allocator, n int) error {
	// A new arena: the graph's pool held memory of the old one.
	l.alloc, l.g = a, nil
	return nil
}

func (l *nnModule) Forward(p *Pass, x kernels.F32, n int) (kernels.F32, error) {
	train := p.Train && !l.frozen
	if l.g == nil || l.g.Ops() != p.Ops || l.g.Stream() != p.Stream {
		l.g = nn.NewGraph(p.Ops, p.Stream, l.alloc, train, p.Seed)
		for _, t := range l.tensors {
			l.g.Attach(t.Tensor)
		}
	} else {
		l.g.Reset(train, p.Seed)
	}
	if p.sync != nil && l.world > 1 {
		l.g.SyncBatchNorm(p.sync.rank, l.world, p.sync.sum)
	} else {
		l.g.SyncBatchNorm(0, 0, nil)
	}
	for i, t := range l.tensors {
		// The trainer's memory, bound every pass: freezing empties G.
		if err := t.Tensor.Bind(l.params[i].W, l.params[i].G); err != nil {
			return kernels.F32{}, fmt.Errorf("train: %v: %s: %w", l.m, t.Name, err)
		}
	}
	l.xShape = append(append(l.xShape[:0], n), l.in...)
	l.yShape = append(append(l.yShape[:0], n), l.out...)
	l.x = l.g.Input(x, l.xShape...)
	l.y = l.m.Forward(l.x)
	if err := l.g.Err(); err != nil {
		return kernels.F32{}, fmt.Errorf("train: %v: %w", l.m, err)
	}
	if !sameShape(l.y, l.yShape) {
		return kernels.F32{}, fmt.Errorf("train: %v: output shape %v; Setup found %v per sample", l.m, l.y.Shape(), l.out)
	}
	return l.y.Data(), nil
}

func (l *nnModule) Backward(p *Pass, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	l.x.SetRequiresGrad(needDx)
	if err := l.g.Backward(l.y, l.g.Input(dy, l.yShape...)); err != nil {
		return kernels.F32{}, fmt.Errorf("train: %v: backward: %w", l.m, err)
	}
	if !needDx {
		return kernels.F32{}, nil
	}
	dx := l.g.Grad(l.x)
	if dx == nil {
		// The output does not depend on the input.
		dx = l.g.Full(0, l.xShape...)
	}
	return dx.Data(), l.g.Err()
}

// sameShape reports whether t has the given shape (without Shape's copy).
func sameShape(t *nn.Tensor, shape []int) bool {
	if t.Rank() != len(shape) {
		return false
	}
	for d, n := range shape {
		if t.Dim(d) != n {
			return false
		}
	}
	return true
}
