package train

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// Param is one tensor of a model: its weights W and gradient G (same length) on the device, and
// how it is initialized and decayed. What training keeps beside it is the Trainer's, as torch
// keeps it in the optimizer and not in the tensor: the optimizer's state
// (Trainer.OptimizerState), the accumulated gradient and the EMA.
type Param struct {
	// Name identifies the tensor in checkpoints: "<layer index>.<layer>.weight" or ".bias".
	Name string
	// Shape is the tensor's shape (Linear weight [out in], Conv2D weight [outC inC kh kw]).
	Shape []int
	W, G  kernels.F32

	fanIn, fanOut int
	kind          paramKind
	dist          nn.Dist // the distribution a module of package nn gave the tensor (nn.Tensor.SetDist); none: kind's rule
	he            bool    // a weight feeding a ReLU: He rather than Glorot initialization
	frozen        bool    // not trained: no gradient, no optimizer state (torch's requires_grad=False; see freeze)
}

// paramKind says how a tensor is initialized and whether weight decay applies to it.
type paramKind uint8

const (
	kindWeight    paramKind = iota // random init, weight decay
	kindBias                       // zeros, no weight decay
	kindScale                      // ones (a BatchNorm scale), no weight decay
	kindBuffer0                    // zeros, not trained (a BatchNorm running mean)
	kindBuffer1                    // ones, not trained (a BatchNorm running variance)
	kindEmbedding                  // normal with std 0.02, no weight decay (nn.Embedding)
)

// buffer reports a tensor the optimizer does not update (running statistics).
func (p *Param) buffer() bool { return p.kind == kindBuffer0 || p.kind == kindBuffer1 }

// Decayed reports whether weight decay applies to the tensor: weights of linear and convolution
// layers, not biases, norms' scales and shifts, or embeddings (nn.Embedding: position
// embeddings, class tokens).
func (p *Param) Decayed() bool { return p.kind == kindWeight }

// Len is the number of elements of the tensor.
func (p *Param) Len() int { return p.W.Len }

// init fills host with the initial values: drawn from the tensor's distribution where it has
// one, or else zeros for a bias, ones for a scale, He (Kaiming) uniform for a weight feeding a
// ReLU, Glorot (Xavier) uniform otherwise.
func (p *Param) init(host []float32, r *rand.Rand) {
	if p.dist.Fill(host, r) {
		return
	}
	switch p.kind {
	case kindBias, kindBuffer0:
		clear(host)
		return
	case kindScale, kindBuffer1:
		for i := range host {
			host[i] = 1
		}
		return
	case kindEmbedding:
		for i := range host {
			host[i] = float32(0.02 * r.NormFloat64())
		}
		return
	}
	bound := math.Sqrt(6 / float64(p.fanIn+p.fanOut))
	if p.he {
		bound = math.Sqrt(6 / float64(p.fanIn))
	}
	for i := range host {
		host[i] = float32((2*r.Float64() - 1) * bound)
	}
}

// Layer is one stage of a Sequential model. Layers are made by Linear, Conv2D, ReLU, MaxPool2D,
// BatchNorm2D, GlobalAvgPool, Flatten, Dropout and Residual (a block of layers plus a shortcut);
// a layer of one's own is a Module that Custom makes a Layer. A Layer value belongs to one model.
type Layer interface {
	// String describes the layer ("linear 784->512").
	String() string

	// setup fixes the layer's per-sample input shape and returns its output shape.
	setup(in []int) ([]int, error)
	// newParams creates the layer's parameters (named with prefix), unallocated.
	newParams(prefix string) []*Param
	// reserve allocates the activations, gradients and workspaces a batch of n samples needs.
	reserve(a *arena, n int) error
	// forward enqueues y = layer(x) for n samples and returns y.
	forward(r *run, x kernels.F32, n int) (kernels.F32, error)
	// backward enqueues the parameter gradients and, when needDx, returns dL/dx.
	backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error)
}

// run is the context of one forward/backward pass.
type run struct {
	ops   kernels.Ops
	s     gpu.Stream
	train bool
	seed  uint64 // dropout seed of this step and layer
	// layerDone, if set, is called with a layer's index once its backward has been enqueued.
	layerDone func(layer int) error
	// sync, if set, synchronizes the BatchNorms that have their bnSync (Config.SyncBatchNorm).
	sync *syncRun
}

// syncRun is what a synchronized BatchNorm needs of a data-parallel pass: its rank, and sum,
// which sums v (a small tensor on the device) over the ranks so that the work enqueued after it
// on the stream reads the sum.
type syncRun struct {
	rank int
	sum  func(v kernels.F32) error
}

// arena allocates device tensors and frees them together.
type arena struct {
	dev  gpu.Device
	bufs []gpu.Buffer
}

func (a *arena) f32(n int) (kernels.F32, error) {
	b, err := a.dev.Alloc(4 * max(n, 1))
	if err != nil {
		return kernels.F32{}, fmt.Errorf("train: allocate %d floats: %w", n, err)
	}
	a.bufs = append(a.bufs, b)
	return kernels.F32{Buf: b, Len: n}, nil
}

func (a *arena) i32(n int) (kernels.I32, error) {
	v, err := a.f32(n)
	return kernels.I32(v), err
}

func (a *arena) free() error {
	var first error
	for _, b := range a.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
	}
	a.bufs = nil
	return first
}

func prod(s []int) int {
	p := 1
	for _, v := range s {
		p *= v
	}
	return p
}
