package train

import (
	"fmt"
	"strings"
	"sync"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Module is a layer of one's own, over kernels.Ops; Custom makes it a Layer that Sequential and
// Residual take like the package's own. A Module value belongs to one model.
//
// The trainer calls, in this order: Setup once when the model is built; Params once, right after;
// Reserve before the first batch and whenever a batch is larger than any before (the stream is
// then idle); then Forward and, when training, Backward for each batch. Every kernel is enqueued
// on Pass.Stream, through Pass.Ops; nothing is waited for.
type Module interface {
	// String describes the module ("dense 64->32"). Its first word is its kind, the name
	// RegisterLayer knows it by and the middle of its tensors' names ("3.dense.weight"); the
	// whole string is its identity in checkpoints: a module rebuilt from it must equal it. It
	// must not hold " - ", " | " or parentheses, which separate the layers of a description.
	String() string
	// Setup receives the per-sample input shape and returns the output shape.
	Setup(in []int) (out []int, err error)
	// Params declares the module's tensors, made by NewWeight, NewBias, NewScale and
	// NewBuffer, each named by its last component ("weight"); the model puts the layer's place
	// in front. The trainer allocates them, initializes them from its seed and owns them: their
	// W view (and G, for trained tensors) is valid from New until Close.
	Params() []*Param
	// Reserve allocates from a the activations and workspaces that batches of up to n samples
	// need. The trainer frees them together, with the model.
	Reserve(a Allocator, n int) error
	// Forward enqueues y = f(x) for n samples ([n][in...] flat, x valid until Backward) and
	// returns y: memory the module reserved, or x itself.
	Forward(p *Pass, x kernels.F32, n int) (kernels.F32, error)
	// Backward receives dL/dy of the last Forward, enqueues the gradients of the module's trained
	// tensors into their G (overwriting what is there), and, when needDx, returns dL/dx (which may
	// be dy itself); without needDx the returned view is not used.
	Backward(p *Pass, dy kernels.F32, n int, needDx bool) (kernels.F32, error)
}

// Pass is what a Module's Forward and Backward run with.
type Pass struct {
	// Ops is the model's op set; Stream the trainer's compute stream.
	Ops    kernels.Ops
	Stream gpu.Stream
	// Train is set while training (dropout on, batch statistics), clear in evaluation.
	Train bool
	// Seed is this step's and layer's seed, for randomness that must repeat (dropout masks).
	Seed uint64
	// sync, in a data-parallel step with Config.SyncBatchNorm, sums a synchronized batch
	// norm's values over the ranks (NN's batch norms).
	sync *syncRun
}

// Allocator hands out device memory that the trainer frees with the model.
type Allocator interface {
	// F32 allocates n float32 values (contents undefined).
	F32(n int) (kernels.F32, error)
}

var _ Allocator = (*arena)(nil)

// F32 allocates n float32 values on the arena's device.
func (a *arena) F32(n int) (kernels.F32, error) { return a.f32(n) }

// NewWeight declares a trained weight of shape [out in ...] (PyTorch's layout): Glorot uniform
// from its fans, He uniform when it feeds a ReLU in a Sequential model, with weight decay.
func NewWeight(name string, shape []int) *Param {
	p := &Param{Name: name, Shape: shape, fanIn: 1, fanOut: 1}
	if len(shape) > 0 {
		rest := prod(shape[1:])
		if len(shape) > 1 {
			rest = prod(shape[2:])
			p.fanIn = shape[1] * rest
		}
		p.fanOut = shape[0] * rest
	}
	return p
}

// NewBias declares a trained tensor initialized to zeros, without weight decay.
func NewBias(name string, shape []int) *Param {
	return &Param{Name: name, Shape: shape, kind: kindBias}
}

// NewScale declares a trained tensor initialized to ones, without weight decay.
func NewScale(name string, shape []int) *Param {
	return &Param{Name: name, Shape: shape, kind: kindScale}
}

// NewBuffer declares a tensor that is checkpointed and exported but not trained (running
// statistics), initialized to ones or zeros. It has no gradient: G is empty.
func NewBuffer(name string, shape []int, ones bool) *Param {
	if ones {
		return &Param{Name: name, Shape: shape, kind: kindBuffer1}
	}
	return &Param{Name: name, Shape: shape, kind: kindBuffer0}
}

// Custom makes m a Layer.
func Custom(m Module) Layer { return &custom{m: m} }

type custom struct {
	m Module
	p Pass // reused by every pass: a step allocates nothing for it
}

func (l *custom) String() string                { return l.m.String() }
func (l *custom) setup(in []int) ([]int, error) { return l.m.Setup(in) }
func (l *custom) reserve(a *arena, n int) error { return l.m.Reserve(a, n) }
func (l *custom) pass(r *run) *Pass {
	l.p = Pass{Ops: r.ops, Stream: r.s, Train: r.train, Seed: r.seed, sync: r.sync}
	return &l.p
}

func (l *custom) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	return l.m.Forward(l.pass(r), x, n)
}

func (l *custom) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	return l.m.Backward(l.pass(r), dy, n, needDx)
}

func (l *custom) newParams(prefix string) []*Param {
	ps := l.m.Params()
	for _, p := range ps {
		p.Name = prefix + "." + p.Name
	}
	return ps
}

// The registry of modules CheckpointModel can rebuild.
var (
	registryMu sync.RWMutex
	registry   = map[string]func(desc string) (Module, error){}
)

// RegisterLayer lets CheckpointModel (and so stoke predict and export) rebuild models that hold
// modules of kind (the first word of their String): parse receives a module's description and
// returns the module, which must describe itself the same way. Register in an init function or
// before opening checkpoints; it is safe for concurrent use.
func RegisterLayer(kind string, parse func(desc string) (Module, error)) error {
	switch kind {
	case "", "linear", "conv2d", "relu", "maxpool", "flatten", "dropout", "batchnorm", "avgpool", "residual":
		return fmt.Errorf("train: %w: %q", ErrRegistered, kind)
	}
	if strings.ContainsAny(kind, " ()|") || parse == nil {
		return fmt.Errorf("train: RegisterLayer %q: a kind is one word and parse is not nil", kind)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[kind]; dup {
		return fmt.Errorf("train: %w: %q", ErrRegistered, kind)
	}
	registry[kind] = parse
	return nil
}

// registered rebuilds a registered module from its description; ok is false for an unknown kind.
func registered(desc string) (Layer, bool, error) {
	kind, _, _ := strings.Cut(desc, " ")
	registryMu.RLock()
	parse := registry[kind]
	registryMu.RUnlock()
	if parse == nil {
		return nil, false, nil
	}
	m, err := parse(desc)
	if err != nil {
		return nil, true, fmt.Errorf("layer %q: %w", desc, err)
	}
	if m == nil || m.String() != desc {
		return nil, true, fmt.Errorf("layer %q: the registered parser rebuilt it as %v", desc, m)
	}
	return Custom(m), true, nil
}
