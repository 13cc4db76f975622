package nn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Module is a layer or a model: a forward pass over the ops of this package. Its parameters and
// buffers are its exported fields (see the package doc); Backward derives its gradient.
type Module interface {
	Forward(x *Tensor) *Tensor
}

// Fn makes a function of one tensor a Module with no parameters: nn.Fn(nn.ReLU).
type Fn func(x *Tensor) *Tensor

// Forward returns f(x).
func (f Fn) Forward(x *Tensor) *Tensor { return f(x) }

// Sequential runs its modules one after the other; their tensors are named by index
// ("0.weight"), as torch.nn.Sequential's.
type Sequential []Module

// Forward runs the modules in order; a Conv2dLayer followed by a BatchNorm2dLayer runs as
// ConvBatchNorm.
func (s Sequential) Forward(x *Tensor) *Tensor {
	for i := 0; i < len(s); i++ {
		if c, b, ok := convBN(s[i], s, i); ok {
			x = ConvBatchNorm(x, c, b)
			i++
			continue
		}
		x = s[i].Forward(x)
	}
	return x
}

// convBN returns m and the module after it, ms[i+1], when they are a convolution and a batch norm.
func convBN[S ~[]E, E any](m Module, ms S, i int) (*Conv2dLayer, *BatchNorm2dLayer, bool) {
	c, ok := m.(*Conv2dLayer)
	if !ok || i+1 >= len(ms) {
		return nil, nil, false
	}
	var next any = ms[i+1]
	if e, ok := next.(Entry); ok {
		next = e.Module
	}
	b, ok := next.(*BatchNorm2dLayer)
	return c, b, ok
}

// Dict runs its modules in order, as Sequential does, and names their tensors by each entry's
// name: torch.nn.Sequential over an OrderedDict ("encoder_layer_0.ln_1.weight").
type Dict []Entry

// Entry is one named module of a Dict.
type Entry struct {
	Name   string
	Module Module
}

// Forward runs the modules in order, as Sequential does.
func (d Dict) Forward(x *Tensor) *Tensor {
	for i := 0; i < len(d); i++ {
		if c, b, ok := convBN(d[i].Module, d, i); ok {
			x = ConvBatchNorm(x, c, b)
			i++
			continue
		}
		x = d[i].Module.Forward(x)
	}
	return x
}

// DerivedTensor is a buffer a module's PyTorch twin keeps in its state_dict but the module derives
// from its configuration in the forward pass (a Swin's relative_position_index): int64 values
// (dtype I64, an index) when I64 is set, float32 ones otherwise. A trainer writes them to weights
// files and checks a file's copy against them, so that weights load strictly both ways.
type DerivedTensor struct {
	Name  string
	Shape []int
	I64   []int64
	F32   []float32
}

// Named is one tensor of a module tree with its dotted name.
type Named struct {
	Name   string
	Tensor *Tensor
}

// StateDict lists the parameters and buffers of m, depth first in field order, named as
// PyTorch's state_dict names them (see the package doc). A tensor reachable twice is listed
// once, under its first name.
func StateDict(m Module) ([]Named, error) {
	var out []Named
	seen := map[*Tensor]bool{}
	err := walk(reflect.ValueOf(m), "", visitor{tensor: func(name string, t *Tensor) {
		if !seen[t] {
			seen[t] = true
			out = append(out, Named{name, t})
		}
	}}, 0)
	return out, err
}

// Apply calls fn with m and each module in it, a module before the modules it holds, in the
// order StateDict lists their tensors: torch.nn.Module.modules(), over which a model's
// constructor initializes its layers (SetDist).
func Apply(m Module, fn func(Module)) error {
	return walk(reflect.ValueOf(m), "", visitor{module: func(_ string, m Module) { fn(m) }}, 0)
}

// Modules calls fn with m and each module in it, as Apply does, with the module's name: the
// prefix of its tensors' StateDict names ("" for m; "encoder.layers.encoder_layer_0"),
// torch.nn.Module.named_modules().
func Modules(m Module, fn func(name string, m Module)) error {
	return walk(reflect.ValueOf(m), "", visitor{module: fn}, 0)
}

var (
	tensorType = reflect.TypeFor[*Tensor]()
	moduleType = reflect.TypeFor[Module]()
	dictType   = reflect.TypeFor[Dict]()
)

// visitor is what walk calls for each parameter or buffer and each module it finds; either may
// be nil.
type visitor struct {
	tensor func(name string, t *Tensor)
	module func(name string, m Module)
}

func walk(v reflect.Value, prefix string, vis visitor, depth int) error {
	if depth > 64 {
		return fmt.Errorf("nn: module tree deeper than 64 at %q (a cycle?)", prefix)
	}
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	if vis.module != nil && v.Type().Implements(moduleType) {
		vis.module(prefix, v.Interface().(Module))
	}
	for v.Kind() == reflect.Pointer && v.Type() != tensorType {
		if v = v.Elem(); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil
		}
	}
	join := func(name string) string {
		if name == "" {
			return prefix
		}
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	switch {
	case v.Type() == dictType:
		for _, e := range v.Interface().(Dict) {
			if err := walk(reflect.ValueOf(e.Module), join(e.Name), vis, depth+1); err != nil {
				return err
			}
		}
	case v.Type() == tensorType:
		if t := v.Interface().(*Tensor); t.p != nil && vis.tensor != nil {
			vis.tensor(prefix, t)
		}
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
		for i := range v.Len() {
			if err := walk(v.Index(i), join(strconv.Itoa(i)), vis, depth+1); err != nil {
				return err
			}
		}
	case v.Kind() == reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, ok := fieldName(f)
			if !ok || !holds(f.Type) {
				continue
			}
			if err := walk(v.Field(i), join(name), vis, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// holds reports a field type that can hold tensors: a tensor, a module, or a slice or array of
// either.
func holds(t reflect.Type) bool {
	if t == dictType {
		return true
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t == tensorType || t.Implements(moduleType) || t == moduleType ||
		(t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(moduleType))
}

// fieldName is a field's name in state_dict keys: its tag `nn:"name"`, "" for an embedded field
// (its tensors are named as the embedder's own), or its Go name in snake case; ok is false for an
// unexported field or the tag "-".
func fieldName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	if tag, ok := f.Tag.Lookup("nn"); ok {
		return tag, tag != "-"
	}
	if f.Anonymous {
		return "", true // an embedded module's tensors are the embedder's, as a subclass's
	}
	return snake(f.Name), true
}

// snake turns a Go name into snake case: RunningMean is running_mean, QKVProj qkv_proj, Layer1
// layer1.
func snake(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Bind binds a parameter or buffer to memory: its values, and for a trained parameter the memory
// Backward writes its gradient to (the empty view: no gradient, a frozen parameter).
func (t *Tensor) Bind(values, grad kernels.F32) error {
	if t.p == nil {
		return fmt.Errorf("nn: Bind of a tensor that is not a parameter or buffer")
	}
	if values.Len != t.Len() || (grad.Len != 0 && grad.Len != t.Len()) {
		return fmt.Errorf("nn: bind a tensor of shape %v to %d values and %d gradients: %w", t.shape, values.Len, grad.Len, ErrShape)
	}
	t.data, t.p.g = values, grad
	t.grad = t.p.trained && grad.Len > 0
	return nil
}

// GradData is the memory Backward writes the parameter's gradient to (empty when none).
func (t *Tensor) GradData() kernels.F32 {
	if t.p == nil {
		return kernels.F32{}
	}
	return t.p.g
}

// InitKind is how the tensor starts (Param, Buffer); 0 for a graph's tensor.
func (t *Tensor) InitKind() Init {
	if t.p == nil {
		return 0
	}
	return t.p.init
}

// Bind allocates the parameters and buffers of m from a, with gradient memory for the trained
// ones, and enqueues their initial values on s: a function of seed and their place in
// StateDict: drawn from the tensor's Dist (SetDist) where it has one, or else by its Init:
// weights He uniform, U(±√(6/fan_in)) with fan_in the product of every dimension but the first;
// embeddings normal with std 0.02. The host values are kept until the copies have run.
func Bind(m Module, a Allocator, s gpu.Stream, seed uint64) error {
	named, err := StateDict(m)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 0x6e6e))
	for _, n := range named {
		t := n.Tensor
		if !fits(t.shape) {
			return fmt.Errorf("nn: bind %s of shape %v: a size is negative or the whole too large: %w", n.Name, t.shape, ErrShape)
		}
		vals, err := a.F32(t.Len())
		if err != nil {
			return fmt.Errorf("nn: bind %s: %w", n.Name, err)
		}
		var grad kernels.F32
		if t.p.trained {
			if grad, err = a.F32(t.Len()); err != nil {
				return fmt.Errorf("nn: bind %s: %w", n.Name, err)
			}
		}
		if err := t.Bind(vals.Slice(0, t.Len()), grad.Slice(0, grad.Len)); err != nil {
			return fmt.Errorf("nn: bind %s: %w", n.Name, err)
		}
		host := make([]float32, t.Len())
		d := t.p.dist
		if d == (Dist{}) {
			d = t.p.init.bindDist(t.shape)
		}
		d.Fill(host, r)
		if len(host) > 0 {
			b := unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host))
			if err := s.CopyH2D(vals.Buf, 4*vals.Off, b); err != nil {
				return fmt.Errorf("nn: bind %s: %w", n.Name, err)
			}
		}
	}
	return nil
}
