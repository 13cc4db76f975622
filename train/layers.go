package train

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Param is one trainable tensor of a model: its weights W and gradient G (same length) on the
// device, and the optimizer's state next to them.
type Param struct {
	// Name identifies the tensor in checkpoints: "<layer index>.<layer>.weight" or ".bias".
	Name string
	// Shape is the tensor's shape (Linear weight [out in], Conv2D weight [outC inC kh kw]).
	Shape []int
	W, G  kernels.F32

	fanIn, fanOut int
	kind          paramKind
	he            bool          // a weight feeding a ReLU: He rather than Glorot initialization
	slots         []kernels.F32 // optimizer state (momentum, moments), allocated by the trainer
	frozen        bool          // not trained: no gradient, no optimizer state (see freeze)
	lrScale       float64       // the learning rate's factor for this tensor; 0 means 1
	acc           kernels.F32   // the step's earlier batches' gradients, weighted by their samples (Config.Accumulate)
	ema           kernels.F32   // the exponential moving average of W (Config.EMA)
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

// State is the optimizer's state tensors for the parameter (Optimizer.Slots of them), valid
// while a Trainer with an optimizer holds the model.
func (p *Param) State() []kernels.F32 { return p.slots }

// Len is the number of elements of the tensor.
func (p *Param) Len() int { return p.W.Len }

// init fills host with the initial values: zeros for a bias, ones for a scale, He (Kaiming)
// uniform for a weight feeding a ReLU, Glorot (Xavier) uniform otherwise.
func (p *Param) init(host []float32, r *rand.Rand) {
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

// ---- Linear ----

type linear struct {
	in, out int
	w, b    *Param
	x       kernels.F32 // the last forward's input, for the weight gradient
	y, dx   kernels.F32
}

// Linear is a fully connected layer y = x Wᵀ + b with W of shape [out in] (PyTorch's layout). Its
// input must have in elements per sample (any shape; it is read flat).
func Linear(in, out int) Layer { return &linear{in: in, out: out} }

func (l *linear) String() string { return fmt.Sprintf("linear %d->%d", l.in, l.out) }

func (l *linear) setup(in []int) ([]int, error) {
	if l.in <= 0 || l.out <= 0 {
		return nil, fmt.Errorf("train: %v: sizes must be positive", l)
	}
	if prod(in) != l.in {
		return nil, fmt.Errorf("train: %v: input shape %v has %d elements; want %d", l, in, prod(in), l.in)
	}
	return []int{l.out}, nil
}

func (l *linear) newParams(prefix string) []*Param {
	l.w = &Param{Name: prefix + ".weight", Shape: []int{l.out, l.in}, fanIn: l.in, fanOut: l.out}
	l.b = &Param{Name: prefix + ".bias", Shape: []int{l.out}, kind: kindBias}
	return []*Param{l.w, l.b}
}

func (l *linear) reserve(a *arena, n int) (err error) {
	if l.y, err = a.f32(n * l.out); err != nil {
		return err
	}
	l.dx, err = a.f32(n * l.in)
	return err
}

func (l *linear) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	l.x = x
	y := l.y.Slice(0, n*l.out)
	if err := r.ops.Gemm(r.s, false, true, n, l.out, l.in, 1, x, l.w.W, 0, y); err != nil {
		return y, err
	}
	return y, r.ops.BiasAdd(r.s, y, l.b.W, n, 1)
}

func (l *linear) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if err := r.ops.Gemm(r.s, true, false, l.out, l.in, n, 1, dy, l.x, 0, l.w.G); err != nil {
		return dy, err
	}
	if err := r.ops.BiasGrad(r.s, l.b.G, dy, n, 1); err != nil {
		return dy, err
	}
	if !needDx {
		return kernels.F32{}, nil
	}
	dx := l.dx.Slice(0, n*l.in)
	return dx, r.ops.Gemm(r.s, false, false, n, l.in, l.out, 1, dy, l.w.W, 0, dx)
}

// ---- Conv2D ----

type conv2d struct {
	inC, outC, k, pad, stride int
	noBias                    bool
	g                         kernels.Conv2D // per-sample geometry (N is set per pass)
	w, b                      *Param
	y, dx, ws                 kernels.F32
}

// ConvOption changes a Conv2D from its defaults (stride 1, with a bias).
type ConvOption func(*conv2d)

// Stride makes the convolution step s pixels (output (H+2*pad-k)/s + 1, as PyTorch's).
func Stride(s int) ConvOption { return func(l *conv2d) { l.stride = s } }

// NoBias leaves out the bias (a convolution followed by BatchNorm2D needs none).
func NoBias() ConvOption { return func(l *conv2d) { l.noBias = true } }

// Conv2D is a 2-D convolution with outC filters of k×k over inC input channels, zero padding pad
// on each side, stride 1 and a bias per filter unless opts say otherwise. Input and output are
// [C H W] per sample.
func Conv2D(inC, outC, k, pad int, opts ...ConvOption) Layer {
	l := &conv2d{inC: inC, outC: outC, k: k, pad: pad, stride: 1}
	for _, o := range opts {
		o(l)
	}
	return l
}

func (l *conv2d) String() string {
	s := fmt.Sprintf("conv2d %d->%d %dx%d pad %d", l.inC, l.outC, l.k, l.k, l.pad)
	if l.stride != 1 {
		s += fmt.Sprintf(" stride %d", l.stride)
	}
	if l.noBias {
		s += " no bias"
	}
	return s
}

func (l *conv2d) setup(in []int) ([]int, error) {
	if len(in) != 3 || in[0] != l.inC {
		return nil, fmt.Errorf("train: %v: input shape %v; want [%d H W]", l, in, l.inC)
	}
	if l.stride < 1 {
		return nil, fmt.Errorf("train: %v: stride must be positive", l)
	}
	l.g = kernels.Conv2D{N: 1, InC: l.inC, InH: in[1], InW: in[2], OutC: l.outC, KH: l.k, KW: l.k, Stride: l.stride, Pad: l.pad}
	if err := l.g.Validate(); err != nil {
		return nil, fmt.Errorf("train: %v: %w", l, err)
	}
	return []int{l.outC, l.g.OutH(), l.g.OutW()}, nil
}

func (l *conv2d) newParams(prefix string) []*Param {
	fan := l.inC * l.k * l.k
	l.w = &Param{Name: prefix + ".weight", Shape: []int{l.outC, l.inC, l.k, l.k}, fanIn: fan, fanOut: l.outC * l.k * l.k}
	if l.noBias {
		return []*Param{l.w}
	}
	l.b = &Param{Name: prefix + ".bias", Shape: []int{l.outC}, kind: kindBias}
	return []*Param{l.w, l.b}
}

func (l *conv2d) geom(n int) kernels.Conv2D { g := l.g; g.N = n; return g }

func (l *conv2d) reserve(a *arena, n int) (err error) {
	g := l.geom(n)
	if l.y, err = a.f32(g.OutLen()); err != nil {
		return err
	}
	if l.dx, err = a.f32(g.InLen()); err != nil {
		return err
	}
	l.ws, err = a.f32(g.WorkspaceLen())
	return err
}

// biasW and biasG are the bias views, empty without a bias.
func (l *conv2d) biasW() kernels.F32 {
	if l.b == nil {
		return kernels.F32{}
	}
	return l.b.W
}

func (l *conv2d) biasG() kernels.F32 {
	if l.b == nil {
		return kernels.F32{}
	}
	return l.b.G
}

func (l *conv2d) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	g := l.geom(n)
	y := l.y.Slice(0, g.OutLen())
	return y, r.ops.Conv2D(r.s, y, x, l.w.W, l.biasW(), l.ws.Slice(0, g.WorkspaceLen()), g)
}

func (l *conv2d) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	g := l.geom(n)
	var dx kernels.F32
	if needDx {
		dx = l.dx.Slice(0, g.InLen())
	}
	return dx, r.ops.Conv2DBackward(r.s, dx, l.w.G, l.biasG(), dy, l.w.W, l.ws.Slice(0, g.WorkspaceLen()), g)
}

// ---- ReLU ----

type relu struct {
	per   int
	y, dx kernels.F32
	last  kernels.F32
}

// ReLU is max(x, 0), elementwise (NaN gives 0). Followed by a MaxPool2D in a Sequential model, it
// runs after the pooling, to the same values (see Sequential).
func ReLU() Layer { return &relu{} }

func (l *relu) String() string                { return "relu" }
func (l *relu) setup(in []int) ([]int, error) { l.per = prod(in); return in, nil }
func (l *relu) newParams(string) []*Param     { return nil }
func (l *relu) reserve(a *arena, n int) (err error) {
	if l.y, err = a.f32(n * l.per); err != nil {
		return err
	}
	l.dx, err = a.f32(n * l.per)
	return err
}

func (l *relu) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	l.last = l.y.Slice(0, n*l.per)
	return l.last, r.ops.ReLU(r.s, l.last, x)
}

func (l *relu) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if !needDx {
		return kernels.F32{}, nil
	}
	dx := l.dx.Slice(0, n*l.per)
	return dx, r.ops.ReLUGrad(r.s, dx, dy, l.last)
}

// ---- MaxPool2D ----

type maxPool struct {
	k, stride, pad int
	g              kernels.Pool2D
	y, dx          kernels.F32
	arg            kernels.I32
}

// MaxPool2D takes the maximum of each k×k window, stride k (a partial window at the edge is
// dropped, as in PyTorch). Input and output are [C H W] per sample.
func MaxPool2D(k int) Layer { return &maxPool{k: k, stride: k} }

func (l *maxPool) String() string {
	s := fmt.Sprintf("maxpool %dx%d", l.k, l.k)
	if l.stride != l.k || l.pad != 0 {
		s += fmt.Sprintf(" stride %d pad %d", l.stride, l.pad)
	}
	return s
}

func (l *maxPool) setup(in []int) ([]int, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("train: %v: input shape %v; want [C H W]", l, in)
	}
	l.g = kernels.Pool2D{N: 1, C: in[0], H: in[1], W: in[2], K: l.k, Stride: l.stride, Pad: l.pad}
	if err := l.g.Validate(); err != nil {
		return nil, fmt.Errorf("train: %v: %w", l, err)
	}
	return []int{in[0], l.g.OutH(), l.g.OutW()}, nil
}

func (l *maxPool) newParams(string) []*Param { return nil }

func (l *maxPool) geom(n int) kernels.Pool2D { g := l.g; g.N = n; return g }

func (l *maxPool) reserve(a *arena, n int) (err error) {
	g := l.geom(n)
	if l.y, err = a.f32(g.OutLen()); err != nil {
		return err
	}
	if l.arg, err = a.i32(g.OutLen()); err != nil {
		return err
	}
	l.dx, err = a.f32(g.InLen())
	return err
}

func (l *maxPool) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	g := l.geom(n)
	y := l.y.Slice(0, g.OutLen())
	return y, r.ops.MaxPool2D(r.s, y, l.arg.Slice(0, g.OutLen()), x, g)
}

func (l *maxPool) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if !needDx {
		return kernels.F32{}, nil
	}
	g := l.geom(n)
	dx := l.dx.Slice(0, g.InLen())
	return dx, r.ops.MaxPool2DBackward(r.s, dx, dy, l.arg.Slice(0, g.OutLen()), g)
}

// ---- Flatten ----

type flatten struct{}

// Flatten reshapes each sample to one dimension; it moves no data.
func Flatten() Layer { return flatten{} }

func (flatten) String() string                                            { return "flatten" }
func (flatten) setup(in []int) ([]int, error)                             { return []int{prod(in)}, nil }
func (flatten) newParams(string) []*Param                                 { return nil }
func (flatten) reserve(*arena, int) error                                 { return nil }
func (flatten) forward(_ *run, x kernels.F32, _ int) (kernels.F32, error) { return x, nil }
func (flatten) backward(_ *run, dy kernels.F32, _ int, _ bool) (kernels.F32, error) {
	return dy, nil
}

// ---- Dropout ----

type dropout struct {
	p           float32
	per         int
	y, mask, dx kernels.F32
	active      bool
}

// Dropout zeroes each element with probability p while training and scales the others by
// 1/(1-p); in evaluation it passes its input through. The mask is a function of the trainer's
// seed, the step and the layer, so runs (and resumed runs) repeat exactly.
func Dropout(p float32) Layer { return &dropout{p: p} }

func (l *dropout) String() string { return fmt.Sprintf("dropout %g", l.p) }

func (l *dropout) setup(in []int) ([]int, error) {
	if !(l.p >= 0 && l.p < 1) {
		return nil, fmt.Errorf("train: %v: p must be in [0,1)", l)
	}
	l.per = prod(in)
	return in, nil
}

func (l *dropout) newParams(string) []*Param { return nil }

func (l *dropout) reserve(a *arena, n int) (err error) {
	if l.y, err = a.f32(n * l.per); err != nil {
		return err
	}
	if l.mask, err = a.f32(n * l.per); err != nil {
		return err
	}
	l.dx, err = a.f32(n * l.per)
	return err
}

func (l *dropout) forward(r *run, x kernels.F32, n int) (kernels.F32, error) {
	l.active = r.train && l.p > 0
	if !l.active {
		return x, nil
	}
	y := l.y.Slice(0, n*l.per)
	return y, r.ops.Dropout(r.s, y, l.mask.Slice(0, n*l.per), x, l.p, r.seed)
}

func (l *dropout) backward(r *run, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if !needDx || !l.active {
		return dy, nil
	}
	dx := l.dx.Slice(0, n*l.per)
	return dx, r.ops.Mul(r.s, dx, dy, l.mask.Slice(0, n*l.per))
}
