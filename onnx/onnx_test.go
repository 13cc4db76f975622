package onnx

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/onnx/internal/onnxpb"
	"google.golang.org/protobuf/proto"
)

func testModel() *Model {
	return &Model{
		Opset: 17, Producer: "test", ProducerVersion: "1", Doc: "a test",
		Graph: Graph{
			Name:    "g",
			Inputs:  []Value{{Name: "x", Shape: []Dim{{Param: "batch"}, {Size: 3}}}},
			Outputs: []Value{{Name: "y", Shape: []Dim{{Param: "batch"}, {Size: 2}}}},
			Nodes: []Node{
				{Name: "fc", Op: "Gemm", Inputs: []string{"x", "w", "b"}, Outputs: []string{"h"}, Attrs: []Attr{Int("transB", 1), Float("alpha", 1.5)}},
				{Name: "relu", Op: "Relu", Inputs: []string{"h"}, Outputs: []string{"y"}},
			},
			Initializers: []Tensor{
				{Name: "w", Dims: []int64{2, 3}, Data: []float32{1, -2, 3.5, 0, 1e-30, -0}},
				{Name: "b", Dims: []int64{2}, Data: []float32{0.25, -1}},
			},
		},
		Metadata: []Property{{"k", "v"}, {"mean", "0.5,0.25"}},
	}
}

// TestRoundTrip: Unmarshal gives back what Marshal was given, the bytes are a ModelProto with
// the fields ONNX's runtimes read (IR version, opset import, float32 raw data, typed attributes),
// and Marshal is deterministic.
func TestRoundTrip(t *testing.T) {
	m := testModel()
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.IRVersion = IRVersion
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", got, &want)
	}
	if b2, _ := Marshal(m); string(b2) != string(b) {
		t.Error("two Marshals of one model differ")
	}
	var pm onnxpb.ModelProto
	if err := proto.Unmarshal(b, &pm); err != nil {
		t.Fatal(err)
	}
	w := pm.GetGraph().GetInitializer()[0]
	if pm.GetIrVersion() != 8 || len(pm.GetOpsetImport()) != 1 || pm.GetOpsetImport()[0].GetVersion() != 17 ||
		w.GetDataType() != int32(onnxpb.TensorProto_FLOAT) || len(w.GetRawData()) != 24 || w.GetRawData()[8] != 0 || w.GetRawData()[11] != 0x40 {
		t.Errorf("ModelProto: IR %d, opsets %v, initializer %v", pm.GetIrVersion(), pm.GetOpsetImport(), w)
	}
	a := pm.GetGraph().GetNode()[0].GetAttribute()
	if a[0].GetType() != onnxpb.AttributeProto_INT || a[0].GetI() != 1 || a[1].GetType() != onnxpb.AttributeProto_FLOAT || a[1].GetF() != 1.5 {
		t.Errorf("attributes %v", a)
	}
	if d := pm.GetGraph().GetInput()[0].GetType().GetTensorType().GetShape().GetDim(); d[0].GetDimParam() != "batch" || d[1].GetDimValue() != 3 {
		t.Errorf("input shape %v", d)
	}
}

// TestMarshalRefuses: each kind of broken wiring is refused, naming what is wrong.
func TestMarshalRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(m *Model)
		want   string
	}{
		{"no opset", func(m *Model) { m.Opset = 0 }, "opset 0"},
		{"undefined input", func(m *Model) { m.Graph.Nodes[1].Inputs[0] = "z" }, `reads "z"`},
		{"use before definition", func(m *Model) { m.Graph.Nodes[0], m.Graph.Nodes[1] = m.Graph.Nodes[1], m.Graph.Nodes[0] }, `reads "h"`},
		{"name twice", func(m *Model) { m.Graph.Nodes[1].Outputs[0] = "w" }, `tensor "w" is defined by an initializer and by node "relu"`},
		{"short data", func(m *Model) { m.Graph.Initializers[1].Data = []float32{1} }, `initializer "b" of shape [2] holds 1 values; want 2`},
		{"output undefined", func(m *Model) { m.Graph.Outputs[0].Name = "q" }, `graph output "q"`},
		{"metadata twice", func(m *Model) { m.Metadata[1].Key = "k" }, `metadata key "k" twice`},
		{"no operator", func(m *Model) { m.Graph.Nodes[0].Op = "" }, `node 0 ("fc") has no operator`},
		{"bad input dim", func(m *Model) { m.Graph.Inputs[0].Shape[1].Size = 0 }, `graph input "x": dimension 0`},
	} {
		m := testModel()
		tc.mutate(m)
		if _, err := Marshal(m); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrModel naming %q", tc.name, err, tc.want)
		}
	}
}

// TestUnmarshalRefuses: bytes that are not a model, and models with what this package does not
// read (another element type, a string attribute), give ErrModel naming it.
func TestUnmarshalRefuses(t *testing.T) {
	if _, err := Unmarshal([]byte("not a protobuf \xff\xff")); !errors.Is(err, ErrModel) {
		t.Errorf("garbage: %v", err)
	}
	b, _ := Marshal(testModel())
	var pm onnxpb.ModelProto
	if err := proto.Unmarshal(b, &pm); err != nil {
		t.Fatal(err)
	}
	pm.Graph.Initializer[0].DataType = proto.Int32(int32(onnxpb.TensorProto_INT64))
	if _, err := Unmarshal(must(t, &pm)); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `initializer "w": data type 7`) {
		t.Errorf("an int64 initializer: %v", err)
	}
	proto.Unmarshal(b, &pm)
	pm.Graph.Node[0].Attribute[0].Type = onnxpb.AttributeProto_STRING.Enum()
	if _, err := Unmarshal(must(t, &pm)); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `attribute "transB" of type STRING`) {
		t.Errorf("a string attribute: %v", err)
	}
}

func must(t *testing.T, pm *onnxpb.ModelProto) []byte {
	t.Helper()
	b, err := proto.Marshal(pm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzUnmarshal: any bytes give a Model or an error, never a panic, and a Model read back
// marshals again to a file that reads back and marshals to the same bytes.
func FuzzUnmarshal(f *testing.F) {
	b, err := Marshal(testModel())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrModel) {
				t.Fatalf("error %v does not wrap ErrModel", err)
			}
			return
		}
		again, err := Marshal(m)
		if err != nil {
			t.Fatalf("a model Unmarshal accepted does not marshal: %v", err)
		}
		m2, err := Unmarshal(again)
		if err != nil {
			t.Fatal(err)
		}
		// Bytes, not the Models, are compared: a NaN weight is not DeepEqual to itself.
		if third, err := Marshal(m2); err != nil || string(third) != string(again) {
			t.Fatalf("marshal and unmarshal changed the model (%v):\n%+v\n%+v", err, m, m2)
		}
	})
}
