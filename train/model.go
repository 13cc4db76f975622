package train

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/transforms"
)

// ErrModel: an unknown model name or a module that does not fit its input or classes.
var ErrModel = errors.New("bad model")

// Shape is the shape of one input image: channels, height, width. It is transforms.Shape, the
// shape a Loader's batches carry, under the name the trainer's signatures use.
type Shape = transforms.Shape

// maxInput bounds the values of one input image a model is built for (3x2364x2364), so that a
// name read from a checkpoint or a flag cannot ask for sizes whose products overflow.
const maxInput = 1 << 24

// Model is a classifier: one module of package nn, uint8 images in, logits over Classes out, its
// tensors those of the module's nn.StateDict under the same names. A Model is used by one
// Trainer; its device tensors exist from the Trainer's New to its Close.
type Model struct {
	name    string
	in      Shape
	classes int
	built   bool // NewModel built it: its identity is its name, input and classes (see builder)
	module  nn.Module
	state   []nn.Named // the module's state_dict
	all     []*Param   // tensors[i]'s
	params  []*Param   // trained (not frozen)
	buffers []*Param   // running statistics: checkpointed and exported, not trained
	frozen  []*Param   // frozen parameters (Config.FreezeBackbone, FreezeUpTo): not trained either
	byNN    map[*nn.Tensor]*Param
	// order is the trained tensors in the order the backward pass completes their gradients:
	// latest first use in the forward pass first.
	order []*Param

	// Bound state (see bind).
	ops     kernels.Ops
	weights arena // parameters, gradients, and the trainer's optimizer state, accumulators and EMA
	acts    arena // activations for up to capN samples, taken by the graph
	capN    int
	input   kernels.F32 // normalized images
	dlogits kernels.F32
	loss    kernels.F32 // one element
	// A mixed batch's second loss (one element), its gradient and the labels it is against
	// (Trainer.mixedLoss).
	mixLoss   kernels.F32
	mixDL     kernels.F32
	mixLabels kernels.I32
	// The pass: the graph that records it, its input and output.
	g              *nn.Graph
	x, y           *nn.Tensor
	xShape, yShape []int
	world          int // the ranks a synchronized batch norm spans (Config.SyncBatchNorm); 0: none
	// The activations of one sample (the values every op of the pass outputs) and the largest
	// op's, found from the trace at the first batch (Trainer.checkActivations).
	acts1   int64
	largest struct {
		op     string
		values int64
	}
}

// NewModel builds a model by name, "name" or "name(key=value,...)", for images of shape in and
// the given number of classes: models.New's (the model zoo and Stoke's own mlp, cnn and ResNets;
// models.Names lists them) made a Model by Net under the name it was built from. An unknown name,
// or arguments its builder refuses, give an error wrapping ErrModel. Spaces around the name are
// not part of it (" vit(...) " is "vit(...)").
func NewModel(name string, in Shape, classes int) (*Model, error) {
	b, err := models.New(name, in, classes)
	if err != nil {
		return nil, fmt.Errorf("train: %w: %w", ErrModel, err)
	}
	m, err := Net(b.Name, in, classes, b.Module)
	if err != nil {
		return nil, err
	}
	m.built = true
	return m, nil
}

// Net makes a model of a module of package nn for images of shape in and the given number of
// classes: the module takes a batch [N C H W] of normalized images and returns [N classes]
// logits. Its tensors are the module's nn.StateDict exactly ("encoder.layers.encoder_layer_0.ln_1.weight"),
// so weights of the same architecture in PyTorch load (LoadWeights, Config.Init) and export by
// name. The trainer allocates, initializes (from the tensor's nn.Dist where it has one; or else
// a Weight Glorot uniform, Zeros and Ones as they say, Embedding normal with std 0.02), trains,
// checkpoints and exports them, with weight decay on a Weight only; a batch norm follows
// Config.SyncBatchNorm.
func Net(name string, in Shape, classes int, module nn.Module) (*Model, error) {
	if in.C <= 0 || in.H <= 0 || in.W <= 0 || in.Len() > maxInput || classes <= 0 || module == nil {
		return nil, fmt.Errorf("train: %w: %s: input %v, %d classes", ErrModel, name, in, classes)
	}
	out, err := nn.Infer(module, true, 1, in.C, in.H, in.W)
	if err != nil {
		return nil, fmt.Errorf("train: %w: %s: %w", ErrModel, name, err)
	}
	if len(out) == 0 || out[0] != 1 || prod(out[1:]) != classes {
		return nil, fmt.Errorf("train: %w: %s: output shape %v for one image; want %d classes", ErrModel, name, out, classes)
	}
	m := &Model{name: name, in: in, classes: classes, module: module, byNN: map[*nn.Tensor]*Param{}}
	if m.state, err = nn.StateDict(module); err != nil {
		return nil, fmt.Errorf("train: %w: %s: %w", ErrModel, name, err)
	}
	for _, t := range m.state {
		p := newParam(t.Name, t.Tensor)
		m.all = append(m.all, p)
		m.byNN[t.Tensor] = p
		if p.buffer() {
			m.buffers = append(m.buffers, p)
		} else {
			m.params = append(m.params, p)
		}
	}
	if m.order, err = gradOrder(m); err != nil {
		return nil, fmt.Errorf("train: %w: %s: %w", ErrModel, name, err)
	}
	return m, nil
}

// gradOrder lists m's trained tensors in the order a backward pass completes their gradients
// (nn.Graph.OnGradient): by their first use in the forward pass (nn.Trace), latest first, those
// of one op in state_dict order, then those the pass does not use.
func gradOrder(m *Model) ([]*Param, error) {
	steps, _, _, err := nn.Trace(m.module, 1, m.in.C, m.in.H, m.in.W)
	if err != nil {
		return nil, err
	}
	first := map[*Param]int{}
	for i, s := range steps {
		for _, t := range s.In {
			if p := m.byNN[t]; p != nil && !p.buffer() {
				if _, seen := first[p]; !seen {
					first[p] = i
				}
			}
		}
	}
	order := slices.Clone(m.params)
	use := func(p *Param) int {
		if i, ok := first[p]; ok {
			return i
		}
		return -1
	}
	slices.SortStableFunc(order, func(a, b *Param) int { return use(b) - use(a) })
	return order, nil
}

// Name is the model's name.
func (m *Model) Name() string { return m.name }

// Input is the image shape the model takes.
func (m *Model) Input() Shape { return m.in }

// Classes is the number of outputs per sample.
func (m *Model) Classes() int { return m.classes }

// Module is the model's module.
func (m *Model) Module() nn.Module { return m.module }

// Params returns the model's trainable tensors in a fixed order. Their W and G views are valid
// while a Trainer holds the model. A Trainer that freezes layers (Config.FreezeBackbone,
// FreezeUpTo) leaves their parameters out until it is closed.
func (m *Model) Params() []*Param { return m.params }

// tensors is the parameters (frozen ones included, in state_dict order), then the buffers: what a
// checkpoint holds, in the same order whatever is frozen.
func (m *Model) tensors() []*Param {
	var out []*Param
	for _, p := range m.all {
		if !p.buffer() {
			out = append(out, p)
		}
	}
	return append(out, m.buffers...)
}

// NumParams is the total number of trainable values.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range m.all {
		if !p.buffer() {
			n += prod(p.Shape)
		}
	}
	return n
}

// String is the model's name, input and classes, "resnet8 1x28x28->10".
func (m *Model) String() string { return fmt.Sprintf("%s %v->%d", m.name, m.in, m.classes) }

// bind allocates the tensors on dev and initializes them from seed (see Net), through stream s.
func (m *Model) bind(dev gpu.Device, ops kernels.Ops, s gpu.Stream, seed uint64) error {
	if m.ops != nil {
		return fmt.Errorf("train: %w: %s is already used by a trainer", ErrModel, m.name)
	}
	m.ops = ops
	m.weights.dev, m.acts.dev = dev, dev
	for i, p := range m.all {
		n := prod(p.Shape)
		var err error
		if p.W, err = m.weights.f32(n); err != nil {
			return err
		}
		host := make([]float32, n)
		r := rand.New(rand.NewPCG(rng.Mix(seed, uint64(i+1), 5), rng.Mix(seed, uint64(i+1), 6)))
		p.init(host, r)
		if err := upload(s, p.W, host); err != nil {
			return err
		}
	}
	// The gradients lie end to end in one buffer, in the order backward completes them, so that a
	// data-parallel bucket is one range of it (DDP's gradient_as_bucket_view).
	total := 0
	for _, p := range m.order {
		if !p.frozen {
			total += p.Len()
		}
	}
	grads, err := m.weights.f32(total)
	if err != nil {
		return err
	}
	off := 0
	for _, p := range m.order {
		if !p.frozen {
			p.G = grads.Slice(off, off+p.Len())
			off += p.Len()
		}
	}
	if m.loss, err = m.weights.f32(1); err != nil {
		return err
	}
	m.mixLoss, err = m.weights.f32(1)
	return err
}

// upload enqueues a copy of host into v; host must not be modified afterwards (the stream reads it
// later).
func upload(s gpu.Stream, v kernels.F32, host []float32) error {
	if len(host) == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host))
	if err := s.CopyH2D(v.Buf, 4*v.Off, b); err != nil {
		return fmt.Errorf("train: upload: %w", err)
	}
	return nil
}

// reserve makes room for batches of n samples, reallocating the activations if they were smaller.
// The caller must have synchronized the stream (old activations may be in use otherwise).
func (m *Model) reserve(n int) error {
	if n <= m.capN {
		return nil
	}
	if err := m.acts.free(); err != nil {
		return err
	}
	m.capN, m.g = 0, nil // a new graph: the old one's pool held memory of the freed arena
	var err error
	if m.input, err = m.acts.f32(n * m.in.Len()); err != nil {
		return err
	}
	if m.dlogits, err = m.acts.f32(n * m.classes); err != nil {
		return err
	}
	if m.mixDL, err = m.acts.f32(n * m.classes); err != nil {
		return err
	}
	if m.mixLabels, err = m.acts.i32(n); err != nil {
		return err
	}
	m.capN = n
	return nil
}

// forward enqueues the pass over the normalized input of n samples and returns the logits.
func (m *Model) forward(r *run, n int, seed uint64) (kernels.F32, error) {
	seed = rng.Mix(seed, 0)
	if m.g == nil || m.g.Ops() != r.ops || m.g.Stream() != r.s {
		m.g = nn.NewGraph(r.ops, r.s, &m.acts, r.train, seed)
		for _, t := range m.state {
			m.g.Attach(t.Tensor)
		}
	} else {
		m.g.Reset(r.train, seed)
	}
	if !r.train {
		m.g.Freeze() // until the weights change: a training pass, or thaw
	}
	if r.sync != nil && m.world > 1 {
		m.g.SyncBatchNorm(r.sync.rank, m.world, r.sync.sum)
	} else {
		m.g.SyncBatchNorm(0, 0, nil)
	}
	for i, t := range m.state {
		// The trainer's memory, bound every pass: freezing empties G.
		if err := t.Tensor.Bind(m.all[i].W, m.all[i].G); err != nil {
			return kernels.F32{}, fmt.Errorf("train: %s: %s: %w", m.name, t.Name, err)
		}
	}
	m.xShape = append(m.xShape[:0], n, m.in.C, m.in.H, m.in.W)
	m.x = m.g.Input(m.input.Slice(0, n*m.in.Len()), m.xShape...)
	m.y = m.module.Forward(m.x)
	if err := m.g.Err(); err != nil {
		return kernels.F32{}, fmt.Errorf("train: %s forward: %w", m.name, err)
	}
	if m.y == nil || m.y.Rank() == 0 || m.y.Dim(0) != n || m.y.Len() != n*m.classes {
		return kernels.F32{}, fmt.Errorf("train: %s forward: output of shape %v for %d images; want [%d %d]", m.name, shapeOf(m.y), n, n, m.classes)
	}
	m.yShape = append(m.yShape[:0], m.y.Shape()...)
	return m.y.Data(), nil
}

// thaw tells the evaluation graph that the weights or buffers changed outside a training pass
// (loaded, broadcast, swapped): it drops what it prepared of the old ones (nn.Graph.Freeze).
func (m *Model) thaw() {
	if m.g != nil {
		m.g.Thaw()
	}
}

func shapeOf(t *nn.Tensor) []int {
	if t == nil {
		return nil
	}
	return t.Shape()
}

// backward enqueues the gradient pass from dlogits into the trained tensors' G, calling
// r.gradDone for each as soon as its gradient is enqueued.
func (m *Model) backward(r *run, n int) error {
	m.x.SetRequiresGrad(false)
	if r.gradDone != nil {
		m.g.OnGradient(func(t *nn.Tensor) error { return r.gradDone(m.byNN[t]) })
	} else {
		m.g.OnGradient(nil)
	}
	if err := m.g.Backward(m.y, m.g.Input(m.dlogits.Slice(0, n*m.classes), m.yShape...)); err != nil {
		return fmt.Errorf("train: %s backward: %w", m.name, err)
	}
	return nil
}

// syncBatchNorms makes the model's batch norms synchronize their statistics over world ranks
// (Config.SyncBatchNorm).
func (m *Model) syncBatchNorms(world int) { m.world = world }

// free releases the device memory and unbinds the model, so that another trainer may take it
// (with freshly initialized weights).
func (m *Model) free() error {
	err := errors.Join(m.acts.free(), m.weights.free())
	m.ops, m.capN, m.g, m.x, m.y, m.world = nil, 0, nil, nil, nil, 0
	for _, p := range m.all {
		p.W, p.G = kernels.F32{}, kernels.F32{}
	}
	m.unfreeze()
	return err
}
