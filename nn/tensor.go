package nn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// The sentinels every error of a graph wraps (besides a backend's own). ErrShape and ErrArgument
// are package kernels' own, so a kernel's refusal and an op's are one error to errors.Is.
var (
	// ErrShape: an op's operands do not fit together (shapes that do not broadcast, a matrix
	// product's inner sizes, an axis out of range, a size that is negative or too large).
	ErrShape = kernels.ErrShape
	// ErrArgument: a bad setting of an op (a zero kernel, a dropout p outside [0, 1)).
	ErrArgument = kernels.ErrArgument
	// ErrGraph: tensors used where they do not belong: operands of two graphs (or of two
	// devices), a parameter attached to another graph, Backward of a loss that reaches nothing
	// with a gradient.
	ErrGraph = errors.New("tensor used where it does not belong")
)

// Tensor is a float32 tensor: a shape and a packed row-major view of device memory. A tensor made
// by an op belongs to that op's Graph; a parameter or buffer (Param, Buffer) belongs to its
// module and is bound to memory by Bind or by a trainer.
type Tensor struct {
	shape []int
	data  kernels.F32
	g     *Graph
	id    int  // 1 + the tensor's index in g's record; 0 for a tensor outside the record
	grad  bool // Backward computes the tensor's gradient
	p     *param
	// gone: made in a Checkpoint's first pass, its memory given back once the pass ended.
	gone bool
}

// param is what a parameter or buffer carries beyond its values.
type param struct {
	init    Init
	dist    Dist // SetDist's; the zero Dist: init's rule
	trained bool
	g       kernels.F32 // where Backward writes the gradient; empty: not wanted (frozen)
}

// Param declares a trained tensor of a module.
func Param(shape []int, init Init) *Tensor {
	return &Tensor{shape: slices.Clone(shape), grad: true, p: &param{init: init, trained: true}}
}

// Buffer declares a tensor of a module that is saved and loaded with it but not trained
// (BatchNorm's running statistics).
func Buffer(shape []int, init Init) *Tensor {
	return &Tensor{shape: slices.Clone(shape), p: &param{init: init}}
}

// Shape returns a copy of the tensor's shape.
func (t *Tensor) Shape() []int { return slices.Clone(t.shape) }

// Dim returns the size of dimension d; a negative d counts from the end. A d out of range is an
// error of the tensor's graph (ErrShape), and Dim returns 0.
func (t *Tensor) Dim(d int) int {
	if d < 0 {
		d += len(t.shape)
	}
	if d < 0 || d >= len(t.shape) {
		// The result of a failed op has no shape; its graph holds the error already.
		if t.g != nil {
			t.g.fail(fmt.Errorf("nn: dimension %d of a tensor of shape %v: %w", d, t.shape, ErrShape))
		}
		return 0
	}
	return t.shape[d]
}

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Len is the number of elements.
func (t *Tensor) Len() int { return prod(t.shape) }

// Data is the tensor's memory (empty before a parameter is bound, or after a failed op).
func (t *Tensor) Data() kernels.F32 { return t.data }

// SetRequiresGrad says whether Backward computes the gradient of an input (Graph.Input): off, the
// ops that read it skip that part of their VJP (a first layer's dL/dx). It may be changed between
// the forward pass and Backward; it has no effect on a tensor an op made.
func (t *Tensor) SetRequiresGrad(on bool) {
	if t.id > 0 && t.g != nil && t.g.nodes[t.id-1].vjp == nil && t.p == nil {
		t.grad = on
	}
}

// Trained reports a parameter (made by Param), as opposed to a buffer or a graph's tensor.
func (t *Tensor) Trained() bool { return t.p != nil && t.p.trained }

// Graph is the graph the tensor belongs to; nil for a parameter or buffer.
func (t *Tensor) Graph() *Graph { return t.g }

// Host waits for the tensor's graph's stream (or, for a parameter, the given graph's) and
// returns a copy of its values.
func (t *Tensor) Host(ctx context.Context, g *Graph) ([]float32, error) {
	if g == nil {
		g = t.g
	}
	if g == nil {
		return nil, errors.New("nn: Host of a parameter needs a graph")
	}
	if err := g.Err(); err != nil {
		return nil, err
	}
	host := make([]float32, t.data.Len)
	if len(host) == 0 {
		return host, nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host))
	if err := g.s.CopyD2H(b, t.data.Buf, 4*t.data.Off); err != nil {
		return nil, fmt.Errorf("nn: read tensor: %w", err)
	}
	if err := g.s.Synchronize(ctx); err != nil {
		return nil, fmt.Errorf("nn: read tensor: %w", err)
	}
	return host, nil
}

// Allocator hands out device memory: a Graph takes its tensors' memory from one, Bind its
// parameters'. What it hands out stays valid until its owner frees it all at once.
type Allocator interface {
	// F32 allocates n float32 values (contents undefined).
	F32(n int) (kernels.F32, error)
}

// Arena is an Allocator over a device whose memory Free releases together.
type Arena struct {
	dev  gpu.Device
	bufs []gpu.Buffer
}

// NewArena returns an empty arena on dev.
func NewArena(dev gpu.Device) *Arena { return &Arena{dev: dev} }

// F32 allocates n float32 values on the arena's device.
func (a *Arena) F32(n int) (kernels.F32, error) {
	b, err := a.dev.Alloc(4 * max(n, 1))
	if err != nil {
		return kernels.F32{}, fmt.Errorf("nn: allocate %d floats: %w", n, err)
	}
	a.bufs = append(a.bufs, b)
	return kernels.F32{Buf: b, Len: n}, nil
}

// Free releases everything the arena allocated; no queued work may still use it.
func (a *Arena) Free() error {
	var errs []error
	for _, b := range a.bufs {
		errs = append(errs, b.Free())
	}
	a.bufs = nil
	return errors.Join(errs...)
}

// Graph records a forward pass: the ops that made each tensor, in order, for Backward. It also
// owns the memory of those tensors (see the package doc's Ownership).
type Graph struct {
	ops   kernels.Ops
	s     gpu.Stream
	alloc Allocator
	train bool
	seed  uint64
	meta  bool // shapes only: no memory, no kernels (Infer)

	err      error
	nodes    []node
	grads    []*Tensor // Backward's gradient of each recorded tensor, by id-1
	pieces   [][]piece // the gradients of its slices (Narrow) that Backward has for each, by id-1
	backward bool      // Backward is running, or Checkpoint's first pass: ops are not recorded
	draws    uint64    // random ops of this pass so far (their seeds)
	pool     map[int][]kernels.F32
	used     []kernels.F32
	// Checkpoint's first pass gathers its module's parameters in seg; recomputing is set while
	// Backward runs a checkpointed module again; segs are the record's ranges made by the
	// outermost Checkpoints of Activations' pass.
	seg         *segment
	recomputing bool
	segs        [][2]int
	// The pass's tensor headers, shapes, operand lists and VJP results, kept from pass to pass
	// (Reset) so that a pass whose ops repeat the last one's allocates no Go memory for them.
	tensors slab[Tensor]
	dims    slab[int]
	lists   slab[*Tensor]
	params  []*Tensor       // attached parameters (Attach)
	reach   []bool          // Backward: whether each recorded tensor depends on a parameter
	written map[*param]bool // parameters whose gradient Backward has written
	sync    *bnSync         // set by SyncBatchNorm
	// Freeze's promise, and the convolutions and products it let evaluation passes prepare, by
	// their weights.
	frozen      bool
	prepared    map[kernels.F32]prepared
	foldedConvs map[kernels.F32]*foldedConv // by the convolution's weights (ConvBatchNorm)
	foldedPass  bool                        // this pass ran a folded convolution: no Backward
	// OnGradient's hook, and Backward's schedule of it: each attached parameter's first use in
	// the record (-1: none), and the parameters' indices in the order their gradients complete.
	onGrad   func(p *Tensor) error
	index    map[*param]int // each attached trained parameter's place in params
	firstUse []int
	gradDone []int
}

// bnSync is how a data-parallel pass synchronizes its batch norms (SyncBatchNorm).
type bnSync struct {
	rank, world int
	sum         func(v kernels.F32) error
}

// piece is the gradient dy of a slice of a tensor: its elements [start, start+len) along dim.
type piece struct {
	dy         *Tensor
	dim, start int
}

// node is one recorded op: the output, the inputs, and the VJP, which writes each input's
// gradient from the output's into dx (of the inputs' length, all nil on entry; left nil where an
// input has none).
type node struct {
	out  *Tensor
	ins  []*Tensor
	vjp  func(dy *Tensor, dx []*Tensor)
	op   Op
	attr Attr // only in a graph that infers shapes (Trace reads it)
}

// NewGraph returns a graph that runs its ops with ops on stream s, taking the memory of its
// tensors from alloc. train selects training behaviour (batch statistics, dropout); seed is the
// pass's random seed.
func NewGraph(ops kernels.Ops, s gpu.Stream, alloc Allocator, train bool, seed uint64) *Graph {
	return &Graph{ops: ops, s: s, alloc: alloc, train: train, seed: seed, pool: map[int][]kernels.F32{}, written: map[*param]bool{}}
}

// SyncBatchNorm makes the graph's batch norms in training normalize with the statistics of the
// whole data-parallel batch, as PyTorch's SyncBatchNorm: this graph is rank's of world, and sum
// sums v (a few values on the device) over the ranks so that the work enqueued after it on the
// graph's stream reads the sum. Every rank then computes the same statistics, bit for bit (the
// kernels combine the ranks' records in rank order), and the input gradient from the sums of
// every rank's weight and bias gradients. A nil sum (or world 1) returns to each rank's own
// batch. The setting outlives Reset.
func (g *Graph) SyncBatchNorm(rank, world int, sum func(v kernels.F32) error) {
	g.sync = nil
	if sum != nil && world > 1 {
		g.sync = &bnSync{rank: rank, world: world, sum: sum}
	}
}

// Infer runs m's forward pass on a placeholder input of the given shape without memory or kernels
// and returns the shape of its result: a model's output shape, found by the same code that
// computes it. m's parameters and buffers take part as they would in a graph of their own (a
// reshaped weight), and are given back as they were.
func Infer(m Module, train bool, shape ...int) ([]int, error) {
	g := &Graph{train: train, meta: true}
	restore, err := g.lend(m)
	if err != nil {
		return nil, err
	}
	defer restore()
	y := m.Forward(g.Input(kernels.F32{}, shape...))
	if g.err != nil {
		return nil, g.err
	}
	if y == nil {
		return nil, errors.New("nn: the forward pass returned no tensor")
	}
	return slices.Clone(y.shape), nil
}

// lend attaches m's parameters and buffers to the meta graph g for one pass and returns what
// gives them back to the graph they had.
func (g *Graph) lend(m Module) (restore func(), err error) {
	named, err := StateDict(m)
	if err != nil {
		return nil, err
	}
	had := make([]*Graph, len(named))
	for i, n := range named {
		had[i], n.Tensor.g = n.Tensor.g, g
	}
	return func() {
		for i, n := range named {
			n.Tensor.g = had[i]
		}
	}, nil
}

// Training reports whether the pass trains (batch statistics, dropout on).
func (g *Graph) Training() bool { return g.train }

// Err is the first error of the graph's ops, or nil.
func (g *Graph) Err() error { return g.err }

// Ops is the op set the graph runs with, and Stream its stream: for fused ops of one's own.
func (g *Graph) Ops() kernels.Ops { return g.ops }

// Stream is the stream the graph's kernels are enqueued on.
func (g *Graph) Stream() gpu.Stream { return g.s }

// Reset forgets the record and makes the memory of the graph's tensors reusable: every tensor of
// the graph is invalid afterwards. Work already enqueued that reads them is safe: the graph's
// next kernels run after it on the same stream. train and seed are the next pass's.
func (g *Graph) Reset(train bool, seed uint64) {
	for _, v := range g.used {
		g.pool[v.Len] = append(g.pool[v.Len], v)
	}
	g.used = g.used[:0]
	clear(g.nodes)
	g.nodes = g.nodes[:0]
	clear(g.grads)
	g.grads = g.grads[:0]
	g.tensors.reset()
	g.dims.reset()
	g.lists.reset()
	g.err, g.train, g.seed, g.draws, g.backward, g.foldedPass = nil, train, seed, 0, false, false
	if train {
		g.Thaw()
	}
}

// Freeze declares that the values of the parameters and buffers the graph's passes read do not
// change from now on, as torch.jit.freeze does of a module for inference: its evaluation passes
// then prepare the weights of each convolution and linear layer once for the op set
// (kernels.PrepareConv2D, PrepareGemm: the CPU op set transforms and packs them, which it
// otherwise does at every call), fold batch norms into the convolutions before them
// (ConvBatchNorm), and keep what they made across Reset. The promise holds until Thaw, or until
// a training pass (Reset with train), which updates the parameters after it: call Thaw when they
// change otherwise (weights loaded, an average swapped in). The results are those of a graph
// that was not frozen, bit for bit, but where batch norms were folded: within float32 rounding.
func (g *Graph) Freeze() { g.frozen = true }

// Thaw ends Freeze's promise and drops what it let the graph prepare.
func (g *Graph) Thaw() {
	for _, f := range g.foldedConvs {
		g.releaseFolded(f)
	}
	g.frozen, g.prepared, g.foldedConvs = false, nil, nil
}

// prepared is what a frozen graph prepared of a parameter: its convolution, or its product as
// a linear layer's weights.
type prepared struct {
	conv kernels.PreparedConv2D
	gemm kernels.PreparedGemm
}

// preparing reports whether the graph prepares w: frozen, in an evaluation pass, and w a
// parameter's own tensor.
func (g *Graph) preparing(w *Tensor) bool {
	return g.frozen && !g.train && !g.meta && g.err == nil && w.p != nil
}

// preparedConv returns the convolution over w's values prepared for geo, or nil where the graph
// does not prepare them (see preparing).
func (g *Graph) preparedConv(w *Tensor, geo kernels.Conv2D) kernels.PreparedConv2D {
	if !g.preparing(w) {
		return nil
	}
	p := g.prepared[w.data]
	if p.conv == nil {
		var err error
		if p.conv, err = kernels.PrepareConv2D(g.ops, w.data, geo); err != nil {
			g.fail(fmt.Errorf("nn: conv2d of weight %v: %w", w.shape, err))
			return nil
		}
		g.keepPrepared(w, p)
	}
	return p.conv
}

// preparedLinear returns the products x·wᵀ by w [out in] prepared, or nil where the graph does
// not prepare them (see preparing).
func (g *Graph) preparedLinear(w *Tensor) kernels.PreparedGemm {
	if !g.preparing(w) {
		return nil
	}
	p := g.prepared[w.data]
	if p.gemm == nil {
		var err error
		if p.gemm, err = kernels.PrepareGemm(g.ops, true, w.shape[0], w.shape[1], w.data); err != nil {
			g.fail(fmt.Errorf("nn: linear of weight %v: %w", w.shape, err))
			return nil
		}
		g.keepPrepared(w, p)
	}
	return p.gemm
}

// keepPrepared records what the graph prepared of w.
func (g *Graph) keepPrepared(w *Tensor, p prepared) {
	if g.prepared == nil {
		g.prepared = map[kernels.F32]prepared{}
	}
	g.prepared[w.data] = p
}

// Input makes a tensor of the graph from memory the caller owns (a batch), of the given shape.
// Backward computes its gradient (see Grad).
func (g *Graph) Input(data kernels.F32, shape ...int) *Tensor {
	t := g.tensor(g.shape(shape), data)
	t.grad = true
	if !fits(shape) {
		g.fail(fmt.Errorf("nn: input of shape %v: a size is negative or the whole too large: %w", shape, ErrShape))
	} else if !g.meta && g.err == nil && data.Len != prod(shape) {
		g.fail(fmt.Errorf("nn: input of shape %v over %d values: %w", shape, data.Len, ErrShape))
	}
	g.record(t, OpInput, nil, nil, nil)
	return t
}

// Constant makes a tensor of the graph holding the given values (copied to the device now), with
// no gradient.
func (g *Graph) Constant(values []float32, shape ...int) *Tensor {
	t := g.newTensor(g.shape(shape))
	t.grad = false
	g.record(t, OpConstant, func() Attr { return Attr{"values": slices.Clone(values)} }, nil, nil)
	if g.meta || g.err != nil {
		return t
	}
	if len(values) != t.data.Len {
		g.fail(fmt.Errorf("nn: constant of shape %v from %d values: %w", shape, len(values), ErrShape))
		return t
	}
	if len(values) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&values[0])), 4*len(values))
		// The copy must not read values after they change: the graph keeps its own copy.
		g.check(g.s.CopyH2D(t.data.Buf, 4*t.data.Off, slices.Clone(b)))
	}
	return t
}

// Full makes a tensor of the graph filled with v, with no gradient.
func (g *Graph) Full(v float32, shape ...int) *Tensor {
	t := g.newTensor(g.shape(shape))
	t.grad = false
	g.record(t, OpFull, func() Attr { return Attr{"value": v} }, nil, nil)
	g.run(func() error { return g.ops.Fill(g.s, t.data, v) })
	return t
}

// fail keeps the first error.
func (g *Graph) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

func (g *Graph) check(err error) {
	if err != nil {
		g.fail(err)
	}
}

// run enqueues a kernel unless the graph has failed or only infers shapes.
func (g *Graph) run(k func() error) {
	if g.meta || g.err != nil {
		return
	}
	g.check(k())
}

// buf hands out n floats of memory for this pass.
func (g *Graph) buf(n int) kernels.F32 {
	if g.meta || g.err != nil {
		return kernels.F32{}
	}
	var v kernels.F32
	if free := g.pool[n]; len(free) > 0 {
		v, g.pool[n] = free[len(free)-1], free[:len(free)-1]
	} else {
		var err error
		if v, err = g.alloc.F32(n); err != nil {
			g.fail(err)
			return kernels.F32{}
		}
		v = v.Slice(0, n)
	}
	g.used = append(g.used, v)
	return v
}

// gradFor makes the tensor a VJP writes x's gradient into (x's shape, contents undefined): the
// parameter's bound gradient memory itself when x is a parameter whose gradient this Backward has
// not written yet, so that accumulate has nothing to copy (a copy of every weight gradient, a
// pass over the model's size, per step); fresh memory otherwise.
func (g *Graph) gradFor(x *Tensor) *Tensor {
	if x.p != nil && x.grad && x.p.g.Len == x.Len() && !g.written[x.p] {
		g.written[x.p] = true
		return g.tensor(x.shape, x.p.g)
	}
	return g.newTensor(x.shape)
}

// newTensor makes an output tensor of the graph with fresh memory. shape becomes the tensor's:
// another tensor's (shapes never change), or one made by Graph.shape.
func (g *Graph) newTensor(shape []int) *Tensor {
	if !fits(shape) {
		g.fail(fmt.Errorf("nn: a tensor of shape %v: a size is negative or the whole too large: %w", shape, ErrShape))
		return g.tensor(shape, kernels.F32{})
	}
	return g.tensor(shape, g.buf(prod(shape)))
}

// tensor makes a tensor of the graph over data; its header is the graph's until Reset.
func (g *Graph) tensor(shape []int, data kernels.F32) *Tensor {
	t := &g.tensors.take(1)[0]
	*t = Tensor{shape: shape, data: data, g: g}
	return t
}

// shape returns prefix followed by dims in memory of the graph's, valid until Reset: the shape
// of a new tensor.
func (g *Graph) shape(prefix []int, dims ...int) []int {
	s := g.dims.take(len(prefix) + len(dims))
	copy(s[copy(s, prefix):], dims)
	return s
}

// operands returns the non-nil tensors of ts in a list of the graph's, valid until Reset: an
// op's inputs.
func (g *Graph) operands(ts ...*Tensor) []*Tensor {
	n := 0
	for _, t := range ts {
		if t != nil {
			n++
		}
	}
	list := g.lists.take(n)[:0]
	for _, t := range ts {
		if t != nil {
			list = append(list, t)
		}
	}
	if g.seg != nil {
		g.seg.note(list)
	} else if i := slices.IndexFunc(list, func(t *Tensor) bool { return t.gone }); i >= 0 {
		g.fail(fmt.Errorf("nn: a tensor of shape %v made inside a Checkpoint's module is used after it, where its memory is "+
			"another tensor's: return it from the module, or compute it outside: %w", list[i].shape, ErrGraph))
	}
	return list
}

// record adds t to the record as made by op from ins, with its VJP. attr gives the op's settings;
// it is called only in a graph that infers shapes, where Trace reads them (a training pass makes
// no maps).
func (g *Graph) record(t *Tensor, op Op, attr func() Attr, ins []*Tensor, vjp func(dy *Tensor, dx []*Tensor)) {
	if g.backward {
		t.grad, t.gone = false, g.seg != nil
		return
	}
	n := node{out: t, ins: ins, vjp: vjp, op: op}
	if g.meta && attr != nil {
		n.attr = attr()
	}
	g.nodes = append(g.nodes, n)
	t.id = len(g.nodes)
}

// graphOf finds the graph of op's operands (parameters and buffers attached to none have none
// of their own) and fails it when an operand belongs to another graph: a tensor of another pass
// or device, or a parameter attached to another graph, whose values or gradient would be wrong.
func graphOf(op string, ts ...*Tensor) *Graph {
	var g *Graph
	for _, t := range ts {
		if t == nil || t.g == nil {
			continue
		}
		if g == nil {
			g = t.g
		} else if t.g != g {
			g.fail(fmt.Errorf("nn: %s: operands of two graphs (of shapes %v and %v): %w", op, shapeOf(ts[0]), t.shape, ErrGraph))
		}
	}
	return g
}

// Backward computes the gradients of every tensor of the record that needs one, from dy, the
// gradient of y (same shape as y; nil means ones: y is a loss). Parameters' gradients are written
// to their bound gradient memory (overwriting it; zeros for a parameter the pass did not use);
// Grad returns the others'. Backward may be called once per pass.
func (g *Graph) Backward(y, dy *Tensor) error {
	if g.err != nil {
		return g.err
	}
	if g.foldedPass {
		return fmt.Errorf("nn: backward of a frozen graph's evaluation pass that folded batch norms into convolutions "+
			"(ConvBatchNorm: the weights it ran over are not the parameters): Thaw the graph, or run the pass in training: %w", ErrGraph)
	}
	if y == nil || y.g != g || y.id == 0 {
		if y != nil && y.g != nil && y.g != g && y.g.err != nil {
			return y.g.err // the loss's own graph failed (an op of no graph's operands)
		}
		return fmt.Errorf("nn: Backward of a tensor not recorded by this graph: %w", ErrGraph)
	}
	if dy == nil {
		dy = g.Full(1, y.shape...)
	} else if !slices.Equal(dy.shape, y.shape) {
		return fmt.Errorf("nn: Backward: gradient of shape %v for a tensor of shape %v: %w", dy.shape, y.shape, ErrShape)
	}
	// Which tensors need a gradient, from the inputs' and parameters' flags as they are now
	// (SetRequiresGrad may have changed an input's since the forward pass).
	g.reach = slices.Grow(g.reach[:0], len(g.nodes))[:len(g.nodes)]
	// reach says whether a tensor depends on a parameter that takes a gradient, for the check
	// below: one pass over the record, no closure per node.
	for i, n := range g.nodes {
		g.reach[i] = false
		if n.vjp == nil {
			continue
		}
		grad, reach := false, false
		for _, x := range n.ins {
			grad = grad || x.grad
			reach = reach || (x.p != nil && x.grad) || (x.id > 0 && x.g == g && g.reach[x.id-1])
		}
		n.out.grad, g.reach[i] = grad, reach
	}
	// As PyTorch raises for a loss that needs no gradient: a loss that reaches none of the
	// parameters whose gradients are wanted (or, with none, no input) is a mistake (a model's
	// output not used, a detached path), not a step of zero gradients.
	wanted := slices.ContainsFunc(g.params, func(p *Tensor) bool { return p.grad })
	if (wanted && !g.reach[y.id-1]) || (!wanted && !y.grad) {
		return fmt.Errorf("nn: Backward: the %v tensor reaches no parameter or input that takes a gradient: %w", y.shape, ErrGraph)
	}
	g.backward = true
	defer func() { g.backward = false }()
	g.grads = slices.Grow(g.grads[:0], len(g.nodes))[:len(g.nodes)]
	clear(g.grads) // reused from pass to pass: no allocation once the record stops growing
	g.grads[y.id-1] = dy
	g.pieces = slices.Grow(g.pieces[:0], len(g.nodes))[:len(g.nodes)]
	for i := range g.pieces {
		g.pieces[i] = g.pieces[i][:0]
	}
	clear(g.written)
	done := g.scheduleGradients()
	for i := len(g.nodes) - 1; i >= 0 && g.err == nil; i-- {
		g.step(i)
		for ; done < len(g.gradDone) && g.firstUse[g.gradDone[done]] == i && g.err == nil; done++ {
			g.gradReady(g.params[g.gradDone[done]])
		}
	}
	for _, p := range g.params {
		if p.p.g.Len > 0 && !g.written[p.p] {
			g.written[p.p] = true
			g.run(func() error { return g.ops.Fill(g.s, p.p.g, 0) })
		}
	}
	for ; done < len(g.gradDone) && g.err == nil; done++ {
		g.gradReady(g.params[g.gradDone[done]])
	}
	return g.err
}

// step runs the VJP of the record's node i, once every gradient of its output is in, and adds
// what it gives to its inputs' gradients.
func (g *Graph) step(i int) {
	g.gather(i)
	n := g.nodes[i]
	if gy := g.grads[i]; gy != nil && n.vjp != nil {
		gx := g.lists.take(len(n.ins))
		n.vjp(gy, gx)
		for j, x := range n.ins {
			if gx[j] == nil || !x.grad {
				continue
			}
			g.accumulate(x, gx[j])
		}
	}
}

// gradReady hands p to OnGradient's hook, its gradient complete: zeros when no op gave it one
// (a use whose result the loss does not depend on, a frozen batch norm's bias).
func (g *Graph) gradReady(p *Tensor) {
	if !g.written[p.p] {
		g.written[p.p] = true
		g.run(func() error { return g.ops.Fill(g.s, p.p.g, 0) })
	}
	g.fail(g.onGrad(p))
}

// OnGradient makes Backward call fn once for each attached parameter it writes a gradient for
// (trained, with gradient memory), as soon as that gradient is complete: once the work of the
// parameter's first use in the record, the last op Backward reaches, is enqueued; for a
// parameter the pass did not use, after its zeros. A data-parallel trainer starts the
// all-reduce of a bucket of gradients there, while the rest of the backward pass runs (as
// PyTorch DDP's autograd hooks do). An error from fn ends Backward with it. The setting
// outlives Reset; nil removes it.
func (g *Graph) OnGradient(fn func(p *Tensor) error) { g.onGrad = fn }

// scheduleGradients fills g.firstUse and g.gradDone for OnGradient's hook (nothing without
// one) and returns the index in gradDone to start from.
func (g *Graph) scheduleGradients() int {
	g.gradDone = g.gradDone[:0]
	if g.onGrad == nil {
		return 0
	}
	g.firstUse = slices.Grow(g.firstUse[:0], len(g.params))[:len(g.params)]
	for k := range g.firstUse {
		g.firstUse[k] = -1
	}
	for i, n := range g.nodes {
		for _, x := range n.ins {
			if x.p == nil || !x.p.trained {
				continue
			}
			if k, ok := g.index[x.p]; ok && g.firstUse[k] < 0 {
				g.firstUse[k] = i
			}
		}
	}
	for k, p := range g.params {
		if p.p.g.Len > 0 {
			g.gradDone = append(g.gradDone, k)
		}
	}
	// Backward walks the record from its end: latest first use first, unused ones last.
	slices.SortStableFunc(g.gradDone, func(a, b int) int { return g.firstUse[b] - g.firstUse[a] })
	return 0
}

// Attach makes parameters and buffers usable by the graph's ops and names those whose gradients
// Backward writes: each trained one with gradient memory gets its gradient, or zeros when the
// pass did not use it.
func (g *Graph) Attach(params ...*Tensor) {
	for _, p := range params {
		p.g = g
		if p.Trained() {
			if g.index == nil {
				g.index = map[*param]int{}
			}
			g.index[p.p] = len(g.params)
			g.params = append(g.params, p)
		}
	}
}

// accumulate adds gx, the gradient of x from one use (of the use's broadcast shape), to x's.
func (g *Graph) accumulate(x, gx *Tensor) {
	seen := g.written
	gx = sumTo(gx, x.shape)
	if x.p != nil {
		// A parameter: its uses are leaves of the record, each a view of the same memory.
		if x.p.g.Len == 0 || gx.data == x.p.g {
			return // frozen, or written in place by the VJP (gradFor)
		}
		if !seen[x.p] {
			seen[x.p] = true
			g.run(func() error { return g.ops.Copy(g.s, x.p.g, gx.data) })
		} else {
			g.run(func() error { return g.ops.Axpy(g.s, x.p.g, 1, gx.data) })
		}
		return
	}
	if x.id == 0 {
		return
	}
	if prev := g.grads[x.id-1]; prev != nil {
		gx = Add(prev, gx)
	}
	g.grads[x.id-1] = gx
}

// gather adds the gradients of the slices of tensor i (its pieces) to its gradient, once every
// op that used it has given its own: pieces that do not overlap are placed side by side in one
// tensor, zeros only where none lies (a Split's parts: no zeros at all), where each slice's
// gradient as a whole zero tensor of its own, all of them added up, cost a fill and an addition
// of the whole tensor per slice. Overlapping pieces are added up that way.
func (g *Graph) gather(i int) {
	ps := g.pieces[i]
	if len(ps) == 0 {
		return
	}
	x := g.nodes[i].out
	slices.SortFunc(ps, func(a, b piece) int { return a.start - b.start })
	disjoint, covered := true, 0
	for _, p := range ps {
		if p.dim != ps[0].dim || p.start < covered {
			disjoint = false
			break
		}
		covered = p.start + p.dy.shape[p.dim]
	}
	var t *Tensor
	if disjoint {
		if ps[0].start == 0 && covered == x.shape[ps[0].dim] && gapless(ps) {
			t = g.newTensor(g.shape(x.shape))
		} else {
			t = g.Full(0, x.shape...)
		}
		for _, p := range ps {
			place(t, p.dy, p.dim, p.start)
		}
	} else {
		for _, p := range ps {
			one := g.Full(0, x.shape...)
			place(one, p.dy, p.dim, p.start)
			if t == nil {
				t = one
			} else {
				t = Add(t, one)
			}
		}
	}
	if prev := g.grads[i]; prev != nil {
		t = Add(prev, t)
	}
	g.grads[i] = t
}

// gapless reports whether the sorted, disjoint pieces ps follow one another with no gap.
func gapless(ps []piece) bool {
	for k := 1; k < len(ps); k++ {
		if p := ps[k-1]; p.start+p.dy.shape[p.dim] != ps[k].start {
			return false
		}
	}
	return true
}

// Grad is the gradient Backward computed for a tensor of the record (an Input, say), or nil.
func (g *Graph) Grad(t *Tensor) *Tensor {
	if t.g != g || t.id == 0 || t.id > len(g.grads) {
		return nil
	}
	return g.grads[t.id-1]
}

func prod(s []int) int {
	p := 1
	for _, v := range s {
		p *= v
	}
	return p
}

// fits reports whether a shape's sizes are not negative and its bytes as float32 fit an int.
func fits(shape []int) bool {
	p := 4
	for _, d := range shape {
		if d < 0 || (d > 0 && p > math.MaxInt/d) {
			return false
		}
		p *= d
	}
	return true
}
