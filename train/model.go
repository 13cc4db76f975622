package train

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/transforms"
)

// ErrModel: an unknown model name or a model whose layers do not fit together.
var ErrModel = errors.New("bad model")

// Shape is the shape of one input image: channels, height, width. It is transforms.Shape, the
// shape a Loader's batches carry, under the name the trainer's signatures use.
type Shape = transforms.Shape

// Model is a sequential classifier: uint8 images in, logits over Classes out. A Model is used by
// one Trainer; its device tensors exist from the Trainer's New to its Close.
type Model struct {
	name    string
	in      Shape
	classes int
	built   bool // NewModel built it: its identity is its name, input and classes (see builder)
	layers  []Layer
	// order is the order in which the layers run, as indices into layers (see execOrder).
	order   []int
	params  []*Param
	buffers []*Param // running statistics: checkpointed and exported, not trained
	frozen  []*Param // frozen parameters (Config.FreezeBackbone, FreezeUpTo): not trained either
	// layerParams[i] are layer i's tensors, buffers included.
	layerParams     [][]*Param
	firstParamLayer int

	// Bound state (see bind).
	ops     kernels.Ops
	weights arena // parameters, gradients, and the trainer's optimizer state, accumulators and EMA
	acts    arena // activations for up to capN samples
	capN    int
	input   kernels.F32 // normalized images
	dlogits kernels.F32
	loss    kernels.F32 // one element
	// A mixed batch's second loss (one element), its gradient and the labels it is against
	// (Trainer.mixedLoss).
	mixLoss   kernels.F32
	mixDL     kernels.F32
	mixLabels kernels.I32
}

// builtinModels are the models of this package's own layers.
var builtinModels = []string{"cnn", "mlp", "resnet18", "resnet20", "resnet50", "resnet8"}

// Models lists the names NewModel knows: its own, then those registered (RegisterModel), sorted.
func Models() []string {
	buildersMu.RLock()
	defer buildersMu.RUnlock()
	names := slices.Clone(builtinModels)
	for n := range builders {
		names = append(names, n)
	}
	slices.Sort(names[len(builtinModels):])
	return names
}

// NewModel builds a named model for images of shape in and the given number of classes:
//
//   - "mlp": flatten - linear 512 - relu - linear 256 - relu - linear classes
//   - "cnn": conv 32 5x5 pad 2 - relu - maxpool 2 - conv 64 5x5 pad 2 - relu - maxpool 2 -
//     flatten - linear 128 - relu - linear classes (the PyTorch peer's network; each relu runs
//     after the maxpool that follows it, on a quarter of the values: see Sequential)
//   - "resnet8", "resnet20": the CIFAR ResNets of He et al. (2016) for 28-32 px images: a 3x3
//     stem of 16 channels, then 1 (resnet8) or 3 (resnet20) basic blocks in each of three stages of
//     16, 32 and 64 channels (stride 2 at the start of the last two), global average pooling and a
//     linear layer. Shortcuts that change shape are 1x1 convolutions with BatchNorm (He et al.'s
//     option B).
//   - "resnet18", "resnet50": torchvision's resnet18 and resnet50 (basic and bottleneck blocks,
//     stride on the 3x3 convolution), with one change for small images: when both sides of the
//     input are at most 32 px, the stem is a 3x3 stride-1 convolution without the max pooling
//     (a 7x7 stride-2 stem and a stride-2 pooling would leave a 32 px image 1x1 before the last
//     stage). From 33 px up the layers are exactly torchvision's, and their parameters carry
//     torchvision's state_dict names (conv1.weight, layer1.0.bn1.running_mean, fc.bias, ...),
//     so an exported model loads into torchvision.models.resnet18(num_classes=classes).
//
// An unknown name gives an error wrapping ErrModel. Spaces around the name are not part of it
// (" vit(...) " is "vit(...)").
func NewModel(name string, in Shape, classes int) (*Model, error) {
	m, err := newModel(strings.TrimSpace(name), in, classes)
	if err != nil {
		return nil, err
	}
	m.built = true
	return m, nil
}

func newModel(name string, in Shape, classes int) (*Model, error) {
	switch name {
	case "mlp":
		return Sequential(name, in, classes,
			Flatten(), Linear(in.Len(), 512), ReLU(), Linear(512, 256), ReLU(), Linear(256, classes))
	case "cnn":
		h, w := in.H/4, in.W/4
		return Sequential(name, in, classes,
			Conv2D(in.C, 32, 5, 2), ReLU(), MaxPool2D(2),
			Conv2D(32, 64, 5, 2), ReLU(), MaxPool2D(2),
			Flatten(), Linear(64*h*w, 128), ReLU(), Linear(128, classes))
	case "resnet8":
		return cifarResNet(name, in, classes, 1)
	case "resnet20":
		return cifarResNet(name, in, classes, 3)
	case "resnet18":
		return torchResNet(name, in, classes, false, []int{2, 2, 2, 2})
	case "resnet50":
		return torchResNet(name, in, classes, true, []int{3, 4, 6, 3})
	}
	if m, ok, err := registeredModel(name, in, classes); ok {
		return m, err
	}
	return nil, fmt.Errorf("train: %w: unknown model %q (have %s)", ErrModel, name, strings.Join(Models(), ", "))
}

// Sequential builds a model from layers applied in order to images of shape in; the last layer
// must output classes values per sample. It checks that each layer's input shape fits.
//
// A ReLU immediately followed by a MaxPool2D (the "cnn" model's conv - relu - maxpool, a ResNet's
// stem) runs as the pooling then the ReLU, in training and in evaluation: ReLU is monotone, so
// maxpool(relu(x)) = relu(maxpool(x)) and the gradients agree bit for bit, while the ReLU and its
// gradient touch a quarter of the values behind a 2x2 pooling. Only the execution changes: the
// layers, their indices, the parameter names, checkpoints, exports and String stay as written.
// The one difference is for NaN inputs to the pair (a run that has already gone wrong): the ReLU
// maps NaN to 0, and the pooling keeps a NaN that is the first pixel of its window, so such a
// window gives 0 where the written order gives the largest ReLU of its other pixels. A layer in
// between (a Dropout) keeps the written order; so do the layers inside a Residual block.
func Sequential(name string, in Shape, classes int, layers ...Layer) (*Model, error) {
	if in.C <= 0 || in.H <= 0 || in.W <= 0 || classes <= 0 {
		return nil, fmt.Errorf("train: %w: %s: input %v, %d classes", ErrModel, name, in, classes)
	}
	m := &Model{name: name, in: in, classes: classes, layers: layers, order: execOrder(layers),
		firstParamLayer: -1, layerParams: make([][]*Param, len(layers))}
	for i, l := range layers {
		if j := slices.Index(layers[:i], l); j >= 0 {
			return nil, fmt.Errorf("train: %w: %s: layer %d is layer %d again; a Layer value is one layer of one model", ErrModel, name, i, j)
		}
	}
	shape := []int{in.C, in.H, in.W}
	for _, i := range m.order {
		out, err := layers[i].setup(shape)
		if err != nil {
			return nil, fmt.Errorf("train: %w: %s layer %d: %w", ErrModel, name, i, err)
		}
		shape = out
	}
	if prod(shape) != classes {
		return nil, fmt.Errorf("train: %w: %s: output shape %v; want %d classes", ErrModel, name, shape, classes)
	}
	for i, l := range layers {
		ps := l.newParams(fmt.Sprintf("%d.%s", i, layerKind(l)))
		if len(ps) > 0 && m.firstParamLayer < 0 {
			m.firstParamLayer = i
		}
		m.layerParams[i] = ps
		for _, p := range ps {
			if p.buffer() {
				m.buffers = append(m.buffers, p)
			} else {
				m.params = append(m.params, p)
			}
		}
	}
	// A weight whose output reaches a ReLU before any other parameterized layer (BatchNorm aside)
	// gets He initialization, as do the weights inside a residual block (see Residual).
	for i := range layers {
		if layerKind(layers[i]) == "residual" {
			for _, p := range m.layerParams[i] {
				p.he = p.he || p.kind == kindWeight
			}
		}
		for j := i + 1; j < len(layers); j++ {
			if kindOf(layers[j]) == "relu" {
				for _, p := range m.layerParams[i] {
					p.he = p.he || p.kind == kindWeight
				}
				break
			}
			if kindOf(layers[j]) != "batchnorm" && len(m.layerParams[j]) > 0 {
				break
			}
		}
	}
	return m, nil
}

// execOrder is the order in which layers run, as indices into layers: the written order, except
// that a ReLU immediately followed by a MaxPool2D moves after it (past a run of poolings, one
// adjacent swap at a time). Only layers without parameters move, so a layer with parameters
// keeps its index as its position in the order.
func execOrder(layers []Layer) []int {
	order := make([]int, len(layers))
	for i := range order {
		order[i] = i
	}
	for k := 0; k+1 < len(order); k++ {
		if kindOf(layers[order[k]]) == "relu" && kindOf(layers[order[k+1]]) == "maxpool" {
			order[k], order[k+1] = order[k+1], order[k]
		}
	}
	return order
}

// Name is the model's name.
func (m *Model) Name() string { return m.name }

// Input is the image shape the model takes.
func (m *Model) Input() Shape { return m.in }

// Classes is the number of outputs per sample.
func (m *Model) Classes() int { return m.classes }

// Params returns the model's trainable tensors in a fixed order. Their W and G views are valid
// while a Trainer holds the model. A Trainer that freezes layers (Config.FreezeBackbone,
// FreezeUpTo) leaves their parameters out until it is closed.
func (m *Model) Params() []*Param { return m.params }

// tensors is the parameters (frozen ones included, in layer order), then the buffers: what a
// checkpoint holds, in the same order whatever is frozen.
func (m *Model) tensors() []*Param {
	if len(m.frozen) == 0 {
		return append(append([]*Param(nil), m.params...), m.buffers...)
	}
	var all []*Param
	for _, ps := range m.layerParams {
		for _, p := range ps {
			if !p.buffer() {
				all = append(all, p)
			}
		}
	}
	return append(all, m.buffers...)
}

// NumParams is the total number of trainable values.
func (m *Model) NumParams() int {
	n := 0
	for _, p := range append(m.params, m.frozen...) {
		n += prod(p.Shape)
	}
	return n
}

// String lists the layers, e.g. "mlp: flatten - linear 784->512 - relu - ...". It is also the
// model's identity in checkpoints.
func (m *Model) String() string {
	parts := make([]string, len(m.layers))
	for i, l := range m.layers {
		parts[i] = l.String()
	}
	return fmt.Sprintf("%s %v->%d: %s", m.name, m.in, m.classes, strings.Join(parts, " - "))
}

// bind allocates the parameters on dev and initializes them from seed (He uniform for weights
// that feed a ReLU, Glorot uniform otherwise, zero biases), through stream s.
func (m *Model) bind(dev gpu.Device, ops kernels.Ops, s gpu.Stream, seed uint64) error {
	if m.ops != nil {
		return fmt.Errorf("train: %w: %s is already used by a trainer", ErrModel, m.name)
	}
	m.ops = ops
	m.weights.dev, m.acts.dev = dev, dev
	pi := 0
	for _, ps := range m.layerParams {
		for _, p := range ps {
			pi++
			n := prod(p.Shape)
			var err error
			if p.W, err = m.weights.f32(n); err != nil {
				return err
			}
			host := make([]float32, n)
			r := rand.New(rand.NewPCG(rng.Mix(seed, uint64(pi), 5), rng.Mix(seed, uint64(pi), 6)))
			p.init(host, r)
			if err := upload(s, p.W, host); err != nil {
				return err
			}
		}
	}
	// The gradients lie end to end in one buffer, in the order backward produces them, so that a
	// data-parallel bucket is one range of it (DDP's gradient_as_bucket_view).
	order := m.gradOrder()
	total := 0
	for _, p := range order {
		total += p.Len()
	}
	grads, err := m.weights.f32(total)
	if err != nil {
		return err
	}
	off := 0
	for _, p := range order {
		p.G = grads.Slice(off, off+p.Len())
		off += p.Len()
	}
	if m.loss, err = m.weights.f32(1); err != nil {
		return err
	}
	m.mixLoss, err = m.weights.f32(1)
	return err
}

// gradOrder lists the tensors that get a gradient (not buffers, not frozen) in the order the
// backward pass produces them: the layers from last to first, each layer's in its own order.
func (m *Model) gradOrder() []*Param {
	var out []*Param
	for k := len(m.order) - 1; k >= 0; k-- {
		for _, p := range m.layerParams[m.order[k]] {
			if !p.buffer() && !p.frozen {
				out = append(out, p)
			}
		}
	}
	return out
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
	m.capN = 0
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
	for _, l := range m.layers {
		if err := l.reserve(&m.acts, n); err != nil {
			return err
		}
	}
	m.capN = n
	return nil
}

// forward enqueues the pass over the normalized input of n samples and returns the logits.
func (m *Model) forward(r *run, n int, seed uint64) (kernels.F32, error) {
	h := m.input.Slice(0, n*m.in.Len())
	for _, i := range m.order {
		l := m.layers[i]
		r.seed = rng.Mix(seed, uint64(i))
		var err error
		if h, err = l.forward(r, h, n); err != nil {
			return h, fmt.Errorf("train: %s layer %d (%v) forward: %w", m.name, i, l, err)
		}
	}
	return h, nil
}

// backward enqueues the gradient pass from dlogits, in the reverse of the forward order (the
// first parameterized layer's position in it is its index), calling r.layerDone after each layer.
func (m *Model) backward(r *run, n int) error {
	d := m.dlogits.Slice(0, n*m.classes)
	for k := len(m.order) - 1; k >= 0 && k >= m.firstParamLayer; k-- {
		i := m.order[k]
		var err error
		if d, err = m.layers[i].backward(r, d, n, k > m.firstParamLayer); err != nil {
			return fmt.Errorf("train: %s layer %d (%v) backward: %w", m.name, i, m.layers[i], err)
		}
		if r.layerDone != nil {
			if err := r.layerDone(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncBatchNorms makes the batch norms of every layer that trains (not frozen) synchronize their
// statistics over world ranks (Config.SyncBatchNorm).
func (m *Model) syncBatchNorms(world int) {
	for _, l := range m.layers {
		if n := nnLayer(l); n != nil && !n.frozen {
			n.world = world
		}
	}
}

// free releases the device memory and unbinds the model, so that another trainer may take it
// (with freshly initialized weights).
func (m *Model) free() error {
	err := errors.Join(m.acts.free(), m.weights.free())
	m.ops, m.capN = nil, 0
	for _, p := range m.tensors() {
		p.W, p.G = kernels.F32{}, kernels.F32{}
	}
	for _, l := range m.layers {
		if n := nnLayer(l); n != nil {
			n.world = 0
		}
	}
	m.unfreeze()
	return err
}
