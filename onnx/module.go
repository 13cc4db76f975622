package onnx

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/nn"
)

// Opset is the version of ONNX's default operator set that FromModule writes: 17 (ONNX 1.12,
// 2022), which onnxruntime from 1.12 on, TensorRT 8.6 and OpenVINO 2022.3 read.
const Opset = 17

// ErrNoForm: a forward pass FromModule cannot write down (an op without an ONNX form, a step
// that mixes the samples of a batch or whose shape does not follow the batch's).
var ErrNoForm = errors.New("no ONNX form")

// FromModule writes down the forward pass of module m, which takes a batch [N C H W] of inputs of
// per-sample shape in ([C H W]) and gives [N classes] logits, as a graph of name whose input
// "input" is float32 [batch C H W] (batch dynamic) and whose output "logits" is [batch classes]
// (the module's output flattened when it has more dimensions). The pass is traced by nn.Trace in
// evaluation mode: BatchNorm on its running statistics (BatchNormalization nodes), dropout and
// drop path left out; its fused ops are ONNX's (Conv with its groups, Gemm or MatMul,
// BatchNormalization, LayerNormalization, Softmax, MaxPool, GlobalAveragePool), GELU its erf
// composition (opset 17 has no Gelu), and reshapes take -1 where the batch goes, so that any
// batch size runs. The module's tensors (nn.StateDict) are initializers under their state_dict
// names, of the values weights gives by name; a fused op's node is named after its module.
// The Model has the opset Opset and producer "stoke"; its metadata and doc are the caller's.
func FromModule(name string, m nn.Module, in []int, classes int, weights map[string][]float32) (*Model, error) {
	src := &source{name: name, module: m, in: slices.Clone(in), weights: weights}
	var err error
	if src.state, err = nn.StateDict(m); err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	e := &emitter{}
	e.g.Name = name
	batch := Dim{Param: "batch"}
	dims := []Dim{batch}
	for _, d := range in {
		dims = append(dims, Dim{Size: int64(d)})
	}
	e.g.Inputs = []Value{{Name: "input", Shape: dims}}
	x, shape, err := e.module(src, "input")
	if err != nil {
		return nil, err
	}
	if len(shape) != 1 {
		x = e.node("flatten", "Flatten", []string{x}, Int("axis", 1))
	}
	// The last node's output is the graph's "logits" (an Identity when no node gives it: a model
	// that only flattens).
	if n := len(e.g.Nodes); n > 0 && e.g.Nodes[n-1].Outputs[0] == x {
		e.g.Nodes[n-1].Outputs[0] = "logits"
	} else {
		e.node("logits", "Identity", []string{x})
	}
	e.g.Outputs = []Value{{Name: "logits", Shape: []Dim{batch, {Size: int64(classes)}}}}
	return &Model{Opset: Opset, Producer: "stoke", Graph: e.g}, nil
}

// source is what FromModule writes down.
type source struct {
	name    string
	module  nn.Module
	in      []int // per sample
	state   []nn.Named
	weights map[string][]float32
}

// emitter appends a model's nodes and initializers to an ONNX graph.
type emitter struct{ g Graph }

// node appends a node named name (its output tensor has the same name) and returns its output.
func (e *emitter) node(name, op string, inputs []string, attrs ...Attr) string {
	e.g.Nodes = append(e.g.Nodes, Node{Name: name, Op: op, Inputs: inputs, Outputs: []string{name}, Attrs: attrs})
	return name
}

// init adds values as the initializer name of shape shape.
func (e *emitter) init(name string, shape []int, values []float32) error {
	n := 1
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
		n *= d
	}
	if len(values) != n {
		return fmt.Errorf("tensor %s: %d values for shape %v", name, len(values), shape)
	}
	e.g.Initializers = append(e.g.Initializers, Tensor{Name: name, Dims: dims, Data: values})
	return nil
}

// splitLast splits a tensor's name at its last dot: "layer1.0.bn2" and "running_var".
func splitLast(name string) (prefix, last string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// ONNX export of a model's module: nn.Trace writes the module's forward pass in evaluation mode down as steps (dropout and drop
// path are gone), and each step becomes ONNX operators.
//
// The batch stays dynamic: the module is traced at two batch sizes, and a dimension that differs
// between the traces is the batch's, or a multiple of it (N·heads); a shape that holds one such
// dimension is written with -1 there, one that holds several is computed from the input's batch
// at run time.

// nnTraceBatches are the two batch sizes a module is traced at.
var nnTraceBatches = [2]int{2, 3}

// nnTrace is one trace of a module: its steps, input and output, and each step's operands as
// references (nnRef).
type nnTrace struct {
	steps   []nn.Step
	in, out *nn.Tensor
	refs    [][]int
	outRef  int
}

// The references of nnTrace.refs: a step's index (0 and up), the input, or the parameter
// paramRef(i) of the module's tensors.
const nnInputRef = -1

func paramRef(i int) int { return -2 - i }

func newNNTrace(src *source, batch int) (*nnTrace, error) {
	steps, x, y, err := nn.Trace(src.module, append([]int{batch}, src.in...)...)
	if err != nil {
		return nil, err
	}
	t := &nnTrace{steps: steps, in: x, out: y, refs: make([][]int, len(steps))}
	ref := map[*nn.Tensor]int{x: nnInputRef}
	for i, n := range src.state {
		ref[n.Tensor] = paramRef(i)
	}
	for i, s := range steps {
		for _, op := range s.In {
			r, ok := ref[op]
			if !ok {
				return nil, fmt.Errorf("step %d (%s) reads a tensor that is neither the input, one of the module's tensors nor an earlier step's result", i, s.Op)
			}
			t.refs[i] = append(t.refs[i], r)
		}
		ref[s.Out] = i
	}
	var ok bool
	if t.outRef, ok = ref[y]; !ok || t.outRef < nnInputRef {
		return nil, fmt.Errorf("the output is a parameter or a tensor the pass did not make")
	}
	return t, nil
}

// batchFactors compares a shape of two traces: 0 for a dimension that does not change, k for one
// that is k times the batch size in both.
func batchFactors(a, b []int) ([]int, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("shapes %v and %v at batch sizes %d and %d", a, b, nnTraceBatches[0], nnTraceBatches[1])
	}
	k := make([]int, len(a))
	for d := range a {
		if a[d] == b[d] {
			continue
		}
		if a[d]%nnTraceBatches[0] != 0 || a[d]/nnTraceBatches[0]*nnTraceBatches[1] != b[d] {
			return nil, fmt.Errorf("dimension %d is %d at batch size %d and %d at batch size %d: not a multiple of the batch size",
				d, a[d], nnTraceBatches[0], b[d], nnTraceBatches[1])
		}
		k[d] = a[d] / nnTraceBatches[0]
	}
	return k, nil
}

// nnExport writes one traced module into an onnxEmitter's graph.
type nnExport struct {
	e      *emitter
	src    *source
	tr     *nnTrace
	k      [][]int  // batch factors of each step's output
	names  []string // ONNX name of each step's output
	x      string   // the module's input
	batch  string   // the batch size, an int64 [1] tensor, once made
	used   map[string]bool
	params []string // ONNX names of the module's tensors
}

// module appends the nodes of s's forward pass applied to x. It returns the output and its
// per-sample shape.
func (e *emitter) module(src *source, x string) (string, []int, error) {
	fail := func(err error) (string, []int, error) {
		return "", nil, fmt.Errorf("onnx: %w: %s: %w", ErrNoForm, src.name, err)
	}
	var tr [2]*nnTrace
	for i, n := range nnTraceBatches {
		t, err := newNNTrace(src, n)
		if err != nil {
			return fail(fmt.Errorf("trace at batch size %d: %w", n, err))
		}
		tr[i] = t
	}
	a, b := tr[0], tr[1]
	if len(a.steps) != len(b.steps) || a.outRef != b.outRef {
		return fail(fmt.Errorf("the forward pass takes %d steps at batch size %d and %d at %d", len(a.steps), nnTraceBatches[0], len(b.steps), nnTraceBatches[1]))
	}
	w := &nnExport{e: e, src: src, tr: a, k: make([][]int, len(a.steps)), names: make([]string, len(a.steps)), x: x, used: map[string]bool{}}
	for i, s := range a.steps {
		t := b.steps[i]
		if s.Op != t.Op || !slices.Equal(a.refs[i], b.refs[i]) || !sameAttrs(s.Attr, t.Attr) {
			return fail(fmt.Errorf("step %d (%s) differs between batch sizes %d and %d", i, s.Op, nnTraceBatches[0], nnTraceBatches[1]))
		}
		k, err := batchFactors(s.Out.Shape(), t.Out.Shape())
		if err != nil {
			return fail(fmt.Errorf("step %d (%s): %w", i, s.Op, err))
		}
		w.k[i] = k
	}
	outK := w.factors(a.outRef)
	if out := a.out.Shape(); len(out) == 0 || outK[0] != 1 || slices.ContainsFunc(outK[1:], func(k int) bool { return k != 0 }) {
		return fail(fmt.Errorf("output of shape %v at batch size %d does not keep the batch as its first dimension only", out, nnTraceBatches[0]))
	}
	for _, n := range src.state {
		if err := e.init(n.Name, n.Tensor.Shape(), src.weights[n.Name]); err != nil {
			return fail(err)
		}
		w.params = append(w.params, n.Name)
	}
	// Only the steps the output depends on.
	live := make([]bool, len(a.steps))
	if a.outRef >= 0 {
		live[a.outRef] = true
	}
	for i := len(a.steps) - 1; i >= 0; i-- {
		if live[i] {
			for _, r := range a.refs[i] {
				if r >= 0 {
					live[r] = true
				}
			}
		}
	}
	for i, s := range a.steps {
		if !live[i] {
			continue
		}
		name, err := w.step(i, s)
		if err != nil {
			return fail(fmt.Errorf("step %d (%s): %w", i, s.Op, err))
		}
		w.names[i] = name
	}
	return w.name(a.outRef), a.out.Shape()[1:], nil
}

// sameAttrs compares two steps' settings, but for "keep" (a sum's kept shape, which holds the
// batch).
func sameAttrs(a, b nn.Attr) bool {
	if len(a) != len(b) {
		return false
	}
	for key, v := range a {
		w, ok := b[key]
		if !ok || (key != "keep" && !reflect.DeepEqual(v, w)) {
			return false
		}
	}
	return true
}

// name is the ONNX name of a reference.
func (x *nnExport) name(r int) string {
	switch {
	case r == nnInputRef:
		return x.x
	case r < nnInputRef:
		return x.params[-2-r]
	}
	return x.names[r]
}

// shape is a reference's shape in the first trace.
func (x *nnExport) shape(r int) []int {
	switch {
	case r == nnInputRef:
		return x.tr.in.Shape()
	case r < nnInputRef:
		return x.src.state[-2-r].Tensor.Shape()
	}
	return x.tr.steps[r].Out.Shape()
}

// factors are a reference's batch factors (see batchFactors).
func (x *nnExport) factors(r int) []int {
	switch {
	case r == nnInputRef:
		k := make([]int, x.tr.in.Rank())
		k[0] = 1
		return k
	case r < nnInputRef:
		return make([]int, x.src.state[-2-r].Tensor.Rank())
	}
	return x.k[r]
}

// stepName names step i's node: a fused op with tensors after their module ("encoder.ln"), the
// others after the step ("17.relu").
func (x *nnExport) stepName(i int, s nn.Step) string {
	name := fmt.Sprintf("%d.%s", i, s.Op)
	switch s.Op {
	case nn.OpLinear, nn.OpConv2D, nn.OpBatchNorm, nn.OpLayerNorm:
		if r := x.tr.refs[i]; len(r) > 1 && r[1] < nnInputRef {
			if prefix, _ := splitLast(x.params[-2-r[1]]); prefix != "" && !x.used[prefix] {
				name = prefix
			}
		}
	}
	x.used[name] = true
	return name
}

func (x *nnExport) node(name, op string, inputs []string, attrs ...Attr) string {
	return x.e.node(name, op, inputs, attrs...)
}

// ints is a Constant int64 vector.
func (x *nnExport) ints(name string, v ...int) string {
	w := make([]int64, len(v))
	for i, d := range v {
		w[i] = int64(d)
	}
	return x.node(name, "Constant", nil, Ints("value_ints", w...))
}

// scalar is a Constant float32 scalar.
func (x *nnExport) scalar(name string, v float32) string {
	return x.node(name, "Constant", nil, Float("value_float", v))
}

// batchSize is the batch size of the module's input, an int64 [1] tensor.
func (x *nnExport) batchSize() string {
	if x.batch == "" {
		x.batch = x.node("batch_size", "Shape", []string{x.x}, Int("start", 0), Int("end", 1))
	}
	return x.batch
}

// dynamicShape is an int64 shape tensor of dims (the first trace's) whose dimensions with a batch
// factor k are k times the input's batch size.
func (x *nnExport) dynamicShape(name string, dims, k []int) string {
	if !slices.ContainsFunc(k, func(k int) bool { return k != 0 }) {
		return x.ints(name, dims...)
	}
	var parts []string
	for d := 0; d < len(dims); {
		part := fmt.Sprintf("%s.%d", name, d)
		if k[d] == 0 {
			e := d
			for e < len(dims) && k[e] == 0 {
				e++
			}
			parts = append(parts, x.ints(part, dims[d:e]...))
			d = e
			continue
		}
		n := x.batchSize()
		if k[d] != 1 {
			n = x.node(part, "Mul", []string{n, x.ints(part+".k", k[d])})
		}
		parts = append(parts, n)
		d++
	}
	return x.node(name, "Concat", parts, Int("axis", 0))
}

// step appends the nodes of step i and returns its output's name.
func (x *nnExport) step(i int, s nn.Step) (string, error) {
	form := nnForms[s.Op]
	if form == nil {
		return "", fmt.Errorf("operator %q has no ONNX form", s.Op)
	}
	st := nnStep{Step: s, i: i, name: x.stepName(i, s), refs: x.tr.refs[i], out: s.Out.Shape()}
	st.in = make([]string, len(st.refs))
	for j, r := range st.refs {
		st.in[j] = x.name(r)
	}
	return form(x, st)
}

// nnStep is what an op's ONNX form is written from: step i, its node's name, its operands'
// references and names and its output's shape.
type nnStep struct {
	nn.Step
	i    int
	name string
	refs []int
	in   []string
	out  []int
}

func (st nnStep) attrInt(key string) int             { v, _ := st.Attr[key].(int); return v }
func (st nnStep) attrF32(key string) float32         { v, _ := st.Attr[key].(float32); return v }
func (st nnStep) node(x *nnExport, op string) string { return x.node(st.name, op, st.in) }

// nnForm appends the nodes of a step and returns its output's name.
type nnForm func(x *nnExport, st nnStep) (string, error)

// onnxOp is the form of an op that is one ONNX operator of the step's operands.
func onnxOp(op string) nnForm {
	return func(x *nnExport, st nnStep) (string, error) { return st.node(x, op), nil }
}

// trainingOnly is the form of an op that a trace (a forward pass in evaluation mode) never
// records: the graph's input, a checkpointed segment, dropout in training, a loss.
func trainingOnly(_ *nnExport, st nnStep) (string, error) {
	return "", fmt.Errorf("operator %q only runs in training", st.Op)
}

// nnForms are the ONNX forms of the ops of package nn, keyed by nn's constants; every op of nn
// has one (TestNNFormsEveryOp), training-only ones the form saying so.
var nnForms = map[nn.Op]nnForm{
	nn.OpInput: trainingOnly, nn.OpCheckpoint: trainingOnly, nn.OpDropout: trainingOnly, nn.OpCrossEntropy: trainingOnly,
	nn.OpSoftCrossEntropy: trainingOnly, nn.OpBCEWithLogits: trainingOnly, nn.OpMSE: trainingOnly, nn.OpSmoothL1: trainingOnly,

	nn.OpAdd: onnxOp("Add"), nn.OpSub: onnxOp("Sub"), nn.OpMul: onnxOp("Mul"), nn.OpDiv: onnxOp("Div"),
	nn.OpExp: onnxOp("Exp"), nn.OpLog: onnxOp("Log"), nn.OpSqrt: onnxOp("Sqrt"), nn.OpSigmoid: onnxOp("Sigmoid"),
	nn.OpTanh: onnxOp("Tanh"), nn.OpReLU: onnxOp("Relu"), nn.OpHardswish: onnxOp("HardSwish"), nn.OpMatMul: onnxOp("MatMul"),
	nn.OpGlobalAvgPool: onnxOp("GlobalAveragePool"),

	nn.OpScale: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Mul", []string{st.in[0], x.scalar(st.name+"/alpha", st.attrF32("alpha"))}), nil
	},
	nn.OpRsqrt: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Reciprocal", []string{x.node(st.name+"/sqrt", "Sqrt", st.in)}), nil
	},
	nn.OpGELU: func(x *nnExport, st nnStep) (string, error) { // x·½(1 + erf(x/√2)): opset 17 has no Gelu
		name, in := st.name, st.in
		erf := x.node(name+"/erf", "Erf", []string{x.node(name+"/div", "Div", []string{in[0], x.scalar(name+"/sqrt2", math.Sqrt2)})})
		h := x.node(name+"/mul", "Mul", []string{in[0], x.node(name+"/add", "Add", []string{erf, x.scalar(name+"/one", 1)})})
		return x.node(name, "Mul", []string{h, x.scalar(name+"/half", 0.5)}), nil
	},
	nn.OpGELUTanh: func(x *nnExport, st nnStep) (string, error) { // x·½(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		name, in := st.name, st.in
		x3 := x.node(name+"/cube", "Mul", []string{x.node(name+"/square", "Mul", []string{in[0], in[0]}), in[0]})
		inner := x.node(name+"/inner", "Add", []string{in[0], x.node(name+"/cubic", "Mul", []string{x3, x.scalar(name+"/c", 0.044715)})})
		th := x.node(name+"/tanh", "Tanh", []string{x.node(name+"/scaled", "Mul", []string{inner, x.scalar(name+"/k", float32(math.Sqrt(2/math.Pi)))})})
		h := x.node(name+"/mul", "Mul", []string{in[0], x.node(name+"/add", "Add", []string{th, x.scalar(name+"/one", 1)})})
		return x.node(name, "Mul", []string{h, x.scalar(name+"/half", 0.5)}), nil
	},
	nn.OpSiLU: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Mul", []string{st.in[0], x.node(st.name+"/sigmoid", "Sigmoid", st.in)}), nil
	},
	nn.OpHardsigmoid: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "HardSigmoid", st.in, Float("alpha", 1.0/6), Float("beta", 0.5)), nil
	},
	nn.OpReLU6: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Clip", []string{st.in[0], x.scalar(st.name+"/min", 0), x.scalar(st.name+"/max", 6)}), nil
	},
	nn.OpLinear: func(x *nnExport, st nnStep) (string, error) {
		name, in := st.name, st.in
		if len(x.shape(st.refs[0])) == 2 {
			return x.node(name, "Gemm", in, Float("alpha", 1), Float("beta", 1), Int("transA", 0), Int("transB", 1)), nil
		}
		wt := x.node(name+"/weight_t", "Transpose", in[1:2], Ints("perm", 1, 0))
		if len(in) == 2 {
			return x.node(name, "MatMul", []string{in[0], wt}), nil
		}
		return x.node(name, "Add", []string{x.node(name+"/matmul", "MatMul", []string{in[0], wt}), in[2]}), nil
	},
	nn.OpConv2D: func(x *nnExport, st nnStep) (string, error) {
		w := x.shape(st.refs[1])
		s, p := int64(max(st.attrInt("stride"), 1)), int64(st.attrInt("padding")) // stride 0 is 1
		return x.node(st.name, "Conv", st.in, Ints("kernel_shape", int64(w[2]), int64(w[3])), Ints("strides", s, s),
			Ints("pads", p, p, p, p), Ints("dilations", 1, 1), Int("group", int64(max(st.attrInt("groups"), 1)))), nil
	},
	nn.OpBatchNorm: func(x *nnExport, st nnStep) (string, error) { // x, weight, bias, running mean, running variance: ONNX's order
		return x.node(st.name, "BatchNormalization", st.in, Float("epsilon", st.attrF32("eps")), Float("momentum", 1-st.attrF32("momentum"))), nil
	},
	nn.OpLayerNorm: func(x *nnExport, st nnStep) (string, error) {
		name, in := st.name, st.in
		if len(in) == 1 { // no affine tensors: a scale of ones
			c := st.out[len(st.out)-1]
			in = append(in, x.node(name+"/ones", "Expand", []string{x.scalar(name+"/one", 1), x.ints(name+"/cols", c)}))
		}
		return x.node(name, "LayerNormalization", in, Int("axis", -1), Float("epsilon", st.attrF32("eps"))), nil
	},
	nn.OpSoftmax: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Softmax", st.in, Int("axis", -1)), nil
	},
	nn.OpScaledDotProductAttention: func(x *nnExport, st nnStep) (string, error) { // opset 17 has no attention: softmax(scale·q·kᵀ)·v
		name, in := st.name, st.in
		perm := make([]int64, len(st.out))
		for j := range perm {
			perm[j] = int64(j)
		}
		perm[len(st.out)-2], perm[len(st.out)-1] = perm[len(st.out)-1], perm[len(st.out)-2]
		kt := x.node(name+"/key_t", "Transpose", in[1:2], Ints("perm", perm...))
		scores := x.node(name+"/scores", "Mul", []string{x.node(name+"/matmul", "MatMul", []string{in[0], kt}), x.scalar(name+"/scale", st.attrF32("scale"))})
		return x.node(name, "MatMul", []string{x.node(name+"/softmax", "Softmax", []string{scores}, Int("axis", -1)), in[2]}), nil
	},
	nn.OpMaxPool2D: func(x *nnExport, st nnStep) (string, error) {
		k, s, p := int64(st.attrInt("kernel")), int64(st.attrInt("stride")), int64(st.attrInt("padding"))
		if s == 0 { // the kernel's size
			s = k
		}
		return x.node(st.name, "MaxPool", st.in, Ints("kernel_shape", k, k), Ints("strides", s, s),
			Ints("pads", p, p, p, p), Int("ceil_mode", 0)), nil
	},
	nn.OpReshape: func(x *nnExport, st nnStep) (string, error) {
		if k := x.factors(st.refs[0]); len(st.out) == 2 && k[0] == 1 && !slices.ContainsFunc(k[1:], func(k int) bool { return k != 0 }) &&
			slices.Equal(x.k[st.i], []int{1, 0}) {
			return x.node(st.name, "Flatten", st.in, Int("axis", 1)), nil // [N ...] to [N rest]
		}
		return x.node(st.name, "Reshape", []string{st.in[0], x.reshapeTarget(st.name+"/shape", st.out, x.k[st.i])}), nil
	},
	nn.OpPermute: func(x *nnExport, st nnStep) (string, error) {
		perm, _ := st.Attr["perm"].([]int)
		p := make([]int64, len(perm))
		for j, v := range perm {
			p[j] = int64(v)
		}
		return x.node(st.name, "Transpose", st.in, Ints("perm", p...)), nil
	},
	nn.OpNarrow: func(x *nnExport, st nnStep) (string, error) {
		name, d, start := st.name, st.attrInt("dim"), st.attrInt("start")
		if x.factors(st.refs[0])[d] != 0 {
			return "", fmt.Errorf("narrows dimension %d, which holds the batch", d)
		}
		return x.node(name, "Slice", []string{st.in[0], x.ints(name+"/starts", start), x.ints(name+"/ends", start+st.attrInt("length")),
			x.ints(name+"/axes", d)}), nil
	},
	nn.OpConcat: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Concat", st.in, Int("axis", int64(st.attrInt("dim")))), nil
	},
	nn.OpSum: func(x *nnExport, st nnStep) (string, error) {
		shape := x.shape(st.refs[0])
		var axes []int
		for d, n := range st.out {
			if n == 1 && shape[d] != 1 {
				axes = append(axes, d)
			}
		}
		if len(axes) == 0 { // only dimensions of size 1: the values as they are
			return x.node(st.name, "Identity", st.in), nil
		}
		return x.node(st.name, "ReduceSum", []string{st.in[0], x.ints(st.name+"/axes", axes...)}, Int("keepdims", 1)), nil
	},
	nn.OpFull: func(x *nnExport, st nnStep) (string, error) {
		return x.node(st.name, "Expand", []string{x.scalar(st.name+"/value", st.attrF32("value")), x.dynamicShape(st.name+"/shape", st.out, x.k[st.i])}), nil
	},
	nn.OpConstant: func(x *nnExport, st nnStep) (string, error) {
		if slices.ContainsFunc(x.k[st.i], func(k int) bool { return k != 0 }) {
			return "", fmt.Errorf("a constant of shape %v grows with the batch", st.out)
		}
		values, _ := st.Attr["values"].([]float32)
		dims := make([]int64, len(st.out))
		for j, d := range st.out {
			dims[j] = int64(d)
		}
		x.e.g.Initializers = append(x.e.g.Initializers, Tensor{Name: st.name, Dims: dims, Data: slices.Clone(values)})
		return st.name, nil
	},
}

// reshapeTarget is the shape tensor of a Reshape to dims (the first trace's) with batch factors k:
// the dims as they are when none holds the batch, -1 in place of the one that does, the shape
// computed from the batch size when several do.
func (x *nnExport) reshapeTarget(name string, dims, k []int) string {
	var batch []int
	for d, f := range k {
		if f != 0 {
			batch = append(batch, d)
		}
	}
	if len(batch) > 1 {
		return x.dynamicShape(name, dims, k)
	}
	dims = slices.Clone(dims)
	if len(batch) == 1 {
		dims[batch[0]] = -1
	}
	return x.ints(name, dims...)
}
