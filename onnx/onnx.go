// Package onnx writes and reads ONNX models (https://onnx.ai), the exchange format that
// onnxruntime, TensorRT, OpenVINO and most serving runtimes load: a graph of standard operators
// over named tensors, with the weights stored in it as initializers.
//
// Model is a plain Go description of such a file, limited to what a float32 inference graph
// needs: float32 tensors (inputs, outputs, initializers), operators of the default domain with
// integer, float and integer-list attributes, one opset, and string metadata. Marshal turns it
// into the file's bytes through ONNX's own protobuf definition (onnx.proto, compiled by
// protoc-gen-go and encoded by google.golang.org/protobuf); Unmarshal reads such a file back.
// Which operators exist and what their attributes mean is ONNX's operator specification
// (https://onnx.ai/onnx/operators/); this package checks the graph's wiring, not the operators.
//
// FromModule writes a module of package nn down as such a graph, from the record of its forward
// pass (nn.Trace): train.Trainer.ExportONNX (stoke export --format onnx) is it, with the trained
// weights and the model's metadata.
//
// # Concurrency
//
// The functions are safe to call from several goroutines on different Models. A Model is a value
// the caller owns; Marshal reads it and keeps nothing of it.
package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/onnx/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

// ErrModel: a Model that Marshal refuses (a node reading a tensor nothing defines, a name given
// twice, data that does not fit its shape) or bytes that Unmarshal cannot read as one.
var ErrModel = errors.New("bad ONNX model")

// IRVersion is the version of the ONNX file format that Marshal writes when the Model names
// none: 8, the version that opset 17 (ONNX 1.12) came with, which every runtime since reads.
const IRVersion = 8

// Model is an ONNX model: one graph, the version of the default operator set it uses, who wrote
// it and what it says about itself.
type Model struct {
	// IRVersion is the file format's version; 0 means the package's IRVersion.
	IRVersion int64
	// Opset is the version of the default ("ai.onnx") operator set, e.g. 17.
	Opset int64
	// Producer and ProducerVersion name the program that wrote the model.
	Producer, ProducerVersion string
	// Doc is a free description of the model.
	Doc   string
	Graph Graph
	// Metadata is the model's metadata_props, in order; keys must be distinct.
	Metadata []Property
}

// Property is one metadata entry.
type Property struct{ Key, Value string }

// Graph is a model's computation: nodes in an order where every node's inputs are the graph's
// inputs, its initializers or outputs of earlier nodes.
type Graph struct {
	Name string
	// Inputs are the tensors the caller feeds; Outputs those the graph returns. Both are float32.
	Inputs, Outputs []Value
	Nodes           []Node
	// Initializers are the constant tensors (weights), each named, read by nodes as inputs.
	Initializers []Tensor
}

// Value names a float32 tensor and gives its shape.
type Value struct {
	Name  string
	Shape []Dim
}

// Dim is one dimension of a Value's shape: a fixed Size, or a symbolic one named Param (a
// dynamic batch: Param "batch") when Param is set.
type Dim struct {
	Size  int64
	Param string
}

// Node applies the operator Op to its named inputs, giving its named outputs.
type Node struct {
	Name            string
	Op              string
	Inputs, Outputs []string
	Attrs           []Attr
}

// AttrKind is the type of an attribute's value.
type AttrKind int

// The attribute kinds Model carries.
const (
	AttrInt AttrKind = iota + 1
	AttrFloat
	AttrInts
)

// Attr is a node's attribute: an int, a float or a list of ints, as Kind says.
type Attr struct {
	Name  string
	Kind  AttrKind
	Int   int64
	Float float32
	Ints  []int64
}

// Int, Float and Ints make attributes of each kind.
func Int(name string, v int64) Attr     { return Attr{Name: name, Kind: AttrInt, Int: v} }
func Float(name string, v float32) Attr { return Attr{Name: name, Kind: AttrFloat, Float: v} }
func Ints(name string, v ...int64) Attr { return Attr{Name: name, Kind: AttrInts, Ints: v} }

// Attr returns the node's attribute called name, and whether it has one.
func (n *Node) Attr(name string) (Attr, bool) {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

func (n *Node) String() string {
	return fmt.Sprintf("%s %q (%v -> %v)", n.Op, n.Name, n.Inputs, n.Outputs)
}

// Tensor is a constant float32 tensor, row-major.
type Tensor struct {
	Name string
	Dims []int64
	Data []float32
}

// Meta returns the value of the metadata entry key, and whether there is one.
func (m *Model) Meta(key string) (string, bool) {
	for _, p := range m.Metadata {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Initializer returns the initializer called name, or nil.
func (g *Graph) Initializer(name string) *Tensor {
	for i := range g.Initializers {
		if g.Initializers[i].Name == name {
			return &g.Initializers[i]
		}
	}
	return nil
}

// Marshal checks m and encodes it as an ONNX file's bytes. The checks: an opset, a graph with
// inputs and outputs, distinct metadata keys, every tensor name defined once (graph input,
// initializer or node output), every node input and graph output defined before it is read, every
// initializer's data of the size its dimensions give. A Model that fails one gives an error
// wrapping ErrModel naming the node or tensor.
func Marshal(m *Model) ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	ir := m.IRVersion
	if ir == 0 {
		ir = IRVersion
	}
	g := &m.Graph
	pg := &onnxpb.GraphProto{Name: proto.String(g.Name)}
	for _, v := range g.Inputs {
		pg.Input = append(pg.Input, valueProto(v))
	}
	for _, v := range g.Outputs {
		pg.Output = append(pg.Output, valueProto(v))
	}
	for _, t := range g.Initializers {
		raw := make([]byte, 4*len(t.Data))
		for i, v := range t.Data {
			putF32(raw[4*i:], v)
		}
		pg.Initializer = append(pg.Initializer, &onnxpb.TensorProto{
			Name: proto.String(t.Name), Dims: t.Dims, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: raw,
		})
	}
	for _, n := range g.Nodes {
		pn := &onnxpb.NodeProto{Name: proto.String(n.Name), OpType: proto.String(n.Op), Input: n.Inputs, Output: n.Outputs}
		for _, a := range n.Attrs {
			pa := &onnxpb.AttributeProto{Name: proto.String(a.Name)}
			switch a.Kind {
			case AttrInt:
				pa.Type, pa.I = onnxpb.AttributeProto_INT.Enum(), proto.Int64(a.Int)
			case AttrFloat:
				pa.Type, pa.F = onnxpb.AttributeProto_FLOAT.Enum(), proto.Float32(a.Float)
			case AttrInts:
				pa.Type, pa.Ints = onnxpb.AttributeProto_INTS.Enum(), a.Ints
			}
			pn.Attribute = append(pn.Attribute, pa)
		}
		pg.Node = append(pg.Node, pn)
	}
	pm := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(ir),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(m.Opset)}},
		ProducerName:    proto.String(m.Producer),
		ProducerVersion: proto.String(m.ProducerVersion),
		Graph:           pg,
	}
	if m.Doc != "" {
		pm.DocString = proto.String(m.Doc)
	}
	for _, p := range m.Metadata {
		pm.MetadataProps = append(pm.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(p.Key), Value: proto.String(p.Value)})
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(pm)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	return b, nil
}

func (m *Model) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("onnx: %w: %s", ErrModel, fmt.Sprintf(format, args...))
	}
	if m.Opset <= 0 {
		return bad("opset %d; want a version of the default operator set (17 or later)", m.Opset)
	}
	g := &m.Graph
	if len(g.Inputs) == 0 || len(g.Outputs) == 0 {
		return bad("graph %q has %d inputs and %d outputs; want at least one of each", g.Name, len(g.Inputs), len(g.Outputs))
	}
	keys := map[string]bool{}
	for _, p := range m.Metadata {
		if keys[p.Key] {
			return bad("metadata key %q twice", p.Key)
		}
		keys[p.Key] = true
	}
	defined := map[string]string{} // tensor name -> what defines it
	define := func(name, by string) error {
		if name == "" {
			return bad("%s has an empty name", by)
		}
		if prev, dup := defined[name]; dup {
			return bad("tensor %q is defined by %s and by %s", name, prev, by)
		}
		defined[name] = by
		return nil
	}
	for _, v := range g.Inputs {
		if err := define(v.Name, "graph input"); err != nil {
			return err
		}
		for _, d := range v.Shape {
			if d.Param == "" && d.Size <= 0 {
				return bad("graph input %q: dimension %d; want a positive size or a named one", v.Name, d.Size)
			}
		}
	}
	for _, t := range g.Initializers {
		if err := define(t.Name, "an initializer"); err != nil {
			return err
		}
		n := int64(1)
		for _, d := range t.Dims {
			if d < 0 || d > math.MaxInt32 {
				return bad("initializer %q: dimension %d out of range", t.Name, d)
			}
			if n *= d; n > int64(len(t.Data)) { // no further product can come back to it, nor overflow
				break
			}
		}
		if n != int64(len(t.Data)) {
			return bad("initializer %q of shape %v holds %d values; want %d", t.Name, t.Dims, len(t.Data), n)
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Op == "" {
			return bad("node %d (%q) has no operator", i, n.Name)
		}
		for _, in := range n.Inputs {
			if _, ok := defined[in]; !ok && in != "" { // "" is an omitted optional input
				return bad("node %v reads %q, which no input, initializer or earlier node defines", n, in)
			}
		}
		for _, a := range n.Attrs {
			if a.Kind < AttrInt || a.Kind > AttrInts || a.Name == "" {
				return bad("node %v: attribute %q of kind %d", n, a.Name, a.Kind)
			}
		}
		for _, out := range n.Outputs {
			if err := define(out, fmt.Sprintf("node %q", n.Name)); err != nil {
				return err
			}
		}
	}
	for _, v := range g.Outputs {
		if _, ok := defined[v.Name]; !ok {
			return bad("graph output %q is not defined by any node", v.Name)
		}
	}
	return nil
}

func valueProto(v Value) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range v.Shape {
		pd := &onnxpb.TensorShapeProto_Dimension{}
		if d.Param != "" {
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
		} else {
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Size}
		}
		shape.Dim = append(shape.Dim, pd)
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(v.Name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: shape,
		}}},
	}
}

// Unmarshal decodes an ONNX file's bytes into a Model. It reads what Marshal writes: float32
// tensors (raw or as float_data), int, float and int-list attributes, the default operator set.
// Anything else (another element type, a tensor stored outside the file, a graph or string
// attribute, another operator domain) gives an error wrapping ErrModel naming it; so do bytes
// that are not a protobuf ModelProto.
func Unmarshal(b []byte) (*Model, error) {
	var pm onnxpb.ModelProto
	if err := proto.Unmarshal(b, &pm); err != nil {
		return nil, fmt.Errorf("onnx: %w: %w", ErrModel, err)
	}
	bad := func(format string, args ...any) (*Model, error) {
		return nil, fmt.Errorf("onnx: %w: %s", ErrModel, fmt.Sprintf(format, args...))
	}
	m := &Model{IRVersion: pm.GetIrVersion(), Producer: pm.GetProducerName(), ProducerVersion: pm.GetProducerVersion(), Doc: pm.GetDocString()}
	for _, o := range pm.GetOpsetImport() {
		if d := o.GetDomain(); d != "" && d != "ai.onnx" {
			return bad("operator set of domain %q (version %d); this package reads the default one", d, o.GetVersion())
		}
		m.Opset = o.GetVersion()
	}
	for _, p := range pm.GetMetadataProps() {
		m.Metadata = append(m.Metadata, Property{p.GetKey(), p.GetValue()})
	}
	pg := pm.GetGraph()
	if pg == nil {
		return bad("no graph")
	}
	g := &m.Graph
	g.Name = pg.GetName()
	values := func(vs []*onnxpb.ValueInfoProto, what string) ([]Value, error) {
		var out []Value
		for _, pv := range vs {
			tt := pv.GetType().GetTensorType()
			if tt == nil || tt.GetElemType() != int32(onnxpb.TensorProto_FLOAT) {
				return nil, fmt.Errorf("onnx: %w: %s %q is not a float32 tensor (type %v)", ErrModel, what, pv.GetName(), pv.GetType())
			}
			v := Value{Name: pv.GetName()}
			for _, d := range tt.GetShape().GetDim() {
				v.Shape = append(v.Shape, Dim{Size: d.GetDimValue(), Param: d.GetDimParam()})
			}
			out = append(out, v)
		}
		return out, nil
	}
	var err error
	if g.Inputs, err = values(pg.GetInput(), "graph input"); err != nil {
		return nil, err
	}
	if g.Outputs, err = values(pg.GetOutput(), "graph output"); err != nil {
		return nil, err
	}
	for _, pt := range pg.GetInitializer() {
		if pt.GetDataType() != int32(onnxpb.TensorProto_FLOAT) || pt.GetDataLocation() != onnxpb.TensorProto_DEFAULT {
			return bad("initializer %q: data type %d, location %v; this package reads float32 tensors held in the file",
				pt.GetName(), pt.GetDataType(), pt.GetDataLocation())
		}
		t := Tensor{Name: pt.GetName(), Dims: pt.GetDims(), Data: pt.GetFloatData()}
		if raw := pt.GetRawData(); raw != nil {
			if len(raw)%4 != 0 || len(t.Data) != 0 {
				return bad("initializer %q: %d bytes of raw data (and %d float_data values)", t.Name, len(raw), len(t.Data))
			}
			t.Data = make([]float32, len(raw)/4)
			for i := range t.Data {
				t.Data[i] = getF32(raw[4*i:])
			}
		}
		g.Initializers = append(g.Initializers, t)
	}
	for _, pn := range pg.GetNode() {
		if d := pn.GetDomain(); d != "" && d != "ai.onnx" {
			return bad("node %q: operator %s of domain %q", pn.GetName(), pn.GetOpType(), d)
		}
		n := Node{Name: pn.GetName(), Op: pn.GetOpType(), Inputs: pn.GetInput(), Outputs: pn.GetOutput()}
		for _, pa := range pn.GetAttribute() {
			a := Attr{Name: pa.GetName()}
			switch pa.GetType() {
			case onnxpb.AttributeProto_INT:
				a.Kind, a.Int = AttrInt, pa.GetI()
			case onnxpb.AttributeProto_FLOAT:
				a.Kind, a.Float = AttrFloat, pa.GetF()
			case onnxpb.AttributeProto_INTS:
				a.Kind, a.Ints = AttrInts, pa.GetInts()
			default:
				return bad("node %q: attribute %q of type %v; this package reads ints, floats and int lists", n.Name, a.Name, pa.GetType())
			}
			n.Attrs = append(n.Attrs, a)
		}
		g.Nodes = append(g.Nodes, n)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func getF32(b []byte) float32 {
	return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}
