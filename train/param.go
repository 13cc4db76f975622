package train

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// Param is one tensor of a model (a tensor of its module's nn.StateDict, under the same name):
// its weights W and gradient G (same length) on the device, and how it is initialized and
// decayed. What training keeps beside it is the Trainer's, as torch keeps it in the optimizer and
// not in the tensor: the optimizer's state (Trainer.OptimizerState), the accumulated gradient and
// the EMA.
type Param struct {
	// Name identifies the tensor in checkpoints and weights files: its state_dict name
	// ("layer1.0.bn2.running_var", "1.linear.weight").
	Name string
	// Shape is the tensor's shape (a Linear weight [out in], a Conv2d weight [outC inC kh kw]).
	Shape []int
	W, G  kernels.F32

	fanIn, fanOut int
	kind          paramKind
	dist          nn.Dist // the distribution the module gave the tensor (nn.Tensor.SetDist); none: kind's rule
	frozen        bool    // not trained: no gradient, no optimizer state (torch's requires_grad=False; see freeze)
}

// paramKind says how a tensor is initialized and whether weight decay applies to it.
type paramKind uint8

const (
	kindWeight    paramKind = iota // Glorot uniform, weight decay
	kindBias                       // zeros, no weight decay
	kindScale                      // ones (a norm's scale), no weight decay
	kindBuffer0                    // zeros, not trained (a BatchNorm running mean)
	kindBuffer1                    // ones, not trained (a BatchNorm running variance)
	kindEmbedding                  // normal with std 0.02, no weight decay (nn.Embedding)
)

// newParam is the Param of a module's tensor: its kind from the tensor's nn.Init, its
// distribution the module's.
func newParam(name string, t *nn.Tensor) *Param {
	shape := t.Shape()
	if shape == nil {
		shape = []int{} // a scalar
	}
	p := &Param{Name: name, Shape: shape, fanIn: 1, fanOut: 1, dist: t.Dist()}
	switch init := t.InitKind(); {
	case !t.Trained() && init == nn.Ones:
		p.kind = kindBuffer1
	case !t.Trained():
		p.kind = kindBuffer0
	case init == nn.Weight:
		if len(shape) > 0 {
			rest := prod(shape[1:])
			if len(shape) > 1 {
				rest = prod(shape[2:])
				p.fanIn = shape[1] * rest
			}
			p.fanOut = shape[0] * rest
		}
	case init == nn.Ones:
		p.kind = kindScale
	case init == nn.Embedding:
		p.kind = kindEmbedding
	default:
		p.kind = kindBias
	}
	return p
}

// buffer reports a tensor the optimizer does not update (running statistics).
func (p *Param) buffer() bool { return p.kind == kindBuffer0 || p.kind == kindBuffer1 }

// Decayed reports whether weight decay applies to the tensor: weights of linear and convolution
// layers, not biases, norms' scales and shifts, or embeddings (nn.Embedding: position
// embeddings, class tokens).
func (p *Param) Decayed() bool { return p.kind == kindWeight }

// Len is the number of elements of the tensor.
func (p *Param) Len() int { return p.W.Len }

// init fills host with the initial values: drawn from the tensor's distribution where it has
// one, or else zeros for a bias, ones for a scale, Glorot (Xavier) uniform for a weight.
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
	for i := range host {
		host[i] = float32((2*r.Float64() - 1) * bound)
	}
}

// run is the context of one forward/backward pass.
type run struct {
	ops   kernels.Ops
	s     gpu.Stream
	train bool
	// gradDone, if set, is called with each trained tensor once the backward pass has enqueued
	// the whole of its gradient (nn.Graph.OnGradient).
	gradDone func(p *Param) error
	// sync, if set, synchronizes the batch norms (Config.SyncBatchNorm).
	sync *syncRun
}

// syncRun is what a synchronized BatchNorm needs of a data-parallel pass: its rank, and sum,
// which sums v (a small tensor on the device) over the ranks so that the work enqueued after it
// on the stream reads the sum.
type syncRun struct {
	rank int
	sum  func(v kernels.F32) error
}

// arena allocates device tensors and frees them together; it is the nn.Allocator of a model's
// graph.
type arena struct {
	dev  gpu.Device
	bufs []gpu.Buffer
}

var _ nn.Allocator = (*arena)(nil)

func (a *arena) f32(n int) (kernels.F32, error) {
	b, err := a.dev.Alloc(4 * max(n, 1))
	if err != nil {
		return kernels.F32{}, fmt.Errorf("train: allocate %d floats: %w", n, err)
	}
	a.bufs = append(a.bufs, b)
	return kernels.F32{Buf: b, Len: n}, nil
}

// F32 allocates n float32 values on the arena's device.
func (a *arena) F32(n int) (kernels.F32, error) { return a.f32(n) }

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

// splitLast splits a tensor's name at its last dot: "layer1.0.bn2" and "running_var".
func splitLast(name string) (prefix, last string) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:]
		}
	}
	return "", name
}
