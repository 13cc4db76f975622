package train

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/onnx"
)

// stEntry is a tensor read back from a safetensors file.
type stEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
	data    []byte
}

// readSafetensors parses a safetensors file as its specification says, checking what a strict
// reader checks: the header length, JSON, 8-byte alignment of the data, and offsets that tile the
// data exactly in file order.
func readSafetensors(t *testing.T, b []byte) (map[string]stEntry, []string, map[string]string) {
	t.Helper()
	if len(b) < 8 {
		t.Fatalf("%d bytes; want a header", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 || 8+n > uint64(len(b)) {
		t.Fatalf("header length %d (file %d bytes); want a multiple of 8 inside the file", n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}
	data := b[8+n:]
	out := map[string]stEntry{}
	var meta map[string]string
	var order []string
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &meta); err != nil {
				t.Fatalf("metadata: %v", err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		size := map[string]int{"F32": 4, "I64": 8}[e.DType]
		if size == 0 {
			t.Fatalf("%s: dtype %q", name, e.DType)
		}
		for _, d := range e.Shape {
			size *= d
		}
		if e.Offsets[1]-e.Offsets[0] != size || e.Offsets[1] > len(data) {
			t.Fatalf("%s: offsets %v for %d bytes of %v %s (data %d bytes)", name, e.Offsets, size, e.Shape, e.DType, len(data))
		}
		e.data = data[e.Offsets[0]:e.Offsets[1]]
		out[name] = e
		order = append(order, name)
	}
	slices.SortFunc(order, func(a, b string) int { return out[a].Offsets[0] - out[b].Offsets[0] })
	end := 0
	for _, name := range order {
		if out[name].Offsets[0] != end {
			t.Fatalf("%s starts at %d; the previous tensor ended at %d", name, out[name].Offsets[0], end)
		}
		end = out[name].Offsets[1]
	}
	if end != len(data) {
		t.Fatalf("tensors end at %d of %d data bytes", end, len(data))
	}
	return out, order, meta
}

// TestExportRoundTrip exports a trained model with BatchNorm and reads every tensor back: names,
// shapes, values bit for bit, the state_dict order, and num_batches_tracked = training steps.
func TestExportRoundTrip(t *testing.T) {
	f := newFixture(t, 100)
	_, tr := fit(t, f, smallResNet(t), SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3})
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := tr.Export(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, order, meta := readSafetensors(t, b)
	if meta["format"] != "pt" || meta["stoke_model"] != tr.m.String() {
		t.Errorf("metadata %v", meta)
	}
	want := weights(t, tr)
	for i, p := range tr.m.tensors() {
		e, ok := got[p.Name]
		if !ok {
			t.Fatalf("no tensor %s", p.Name)
		}
		if e.DType != "F32" || !slices.Equal(e.Shape, p.Shape) {
			t.Fatalf("%s: %s %v; want F32 %v", p.Name, e.DType, e.Shape, p.Shape)
		}
		for j, v := range want[i] {
			if g := binary.LittleEndian.Uint32(e.data[4*j:]); g != math.Float32bits(v) {
				t.Fatalf("%s[%d] = %v; want %v", p.Name, j, math.Float32frombits(g), v)
			}
		}
	}
	// Per BatchNorm: weight, bias, running_mean, running_var, num_batches_tracked, as in PyTorch.
	bn := "3.residual.main.1.batchnorm"
	i := slices.Index(order, bn+".weight")
	if i < 0 || !slices.Equal(order[i:i+5], []string{bn + ".weight", bn + ".bias", bn + ".running_mean", bn + ".running_var", bn + ".num_batches_tracked"}) {
		t.Fatalf("order around %s: %v", bn, order)
	}
	nbt := got[bn+".num_batches_tracked"]
	if nbt.DType != "I64" || len(nbt.Shape) != 0 || binary.LittleEndian.Uint64(nbt.data) != uint64(f.train.Steps()) {
		t.Fatalf("num_batches_tracked %s %v = %d; want I64 scalar %d", nbt.DType, nbt.Shape, binary.LittleEndian.Uint64(nbt.data), f.train.Steps())
	}
	if len(got) != len(tr.m.tensors())+5 {
		t.Fatalf("%d tensors; want %d and 5 num_batches_tracked", len(got), len(tr.m.tensors()))
	}
}

// TestCheckpointModel rebuilds a named model from its checkpoint and loads it into an
// optimizer-less trainer that predicts exactly like the trainer that wrote it; a hand-built model
// is refused.
func TestCheckpointModel(t *testing.T) {
	f := newFixture(t, 100)
	m, err := NewModel("resnet8", img8, 10)
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	_, tr := fit(t, f, m, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3, Checkpoint: ck})
	want, err := tr.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := CheckpointModel(ck)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := New(m2, f.dev, nil, Config{Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	got, err := tr2.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Logits, want.Logits) {
		t.Fatalf("logits after CheckpointModel differ from the trainer's")
	}
	if _, err := tr2.Fit(t.Context(), f.train, nil); err == nil {
		t.Fatal("Fit without an optimizer succeeded")
	}
	// A model built by hand from the package's layers is rebuilt from its description.
	for _, hand := range []*Model{smallMLP(t), smallResNet(t), smallCNN(t)} {
		ck2 := filepath.Join(t.TempDir(), "ck2")
		_, tr := fit(t, f, hand, SGD{LR: 0.05}, Config{Epochs: 1, Checkpoint: ck2})
		want, err := tr.Predict(t.Context(), f.test)
		if err != nil {
			t.Fatal(err)
		}
		m3, err := CheckpointModel(ck2)
		if err != nil {
			t.Fatalf("CheckpointModel of %s: %v", hand.name, err)
		}
		tr3, err := New(m3, f.dev, nil, Config{Resume: ck2})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr3.Predict(t.Context(), f.test)
		tr3.Close()
		if err != nil || !slices.Equal(got.Logits, want.Logits) {
			t.Fatalf("%s rebuilt from its checkpoint predicts otherwise (%v)", hand.name, err)
		}
	}
	// A layer of another package is named in the error.
	m4, err := Sequential("mine", img8, 10, Flatten(), Linear(64, 10), scaleLayer{})
	if err != nil {
		t.Fatal(err)
	}
	ck4 := filepath.Join(t.TempDir(), "ck4")
	fit(t, f, m4, SGD{LR: 0.05}, Config{Epochs: 1, Checkpoint: ck4})
	if _, err := CheckpointModel(ck4); !errors.Is(err, ErrMismatch) ||
		!strings.Contains(err.Error(), `layer "scale 2" is not one of the package's layers nor registered`) {
		t.Fatalf("CheckpointModel of a model with a layer of its own: %v; want ErrMismatch naming the layer", err)
	}
}

// scaleLayer doubles its input: a layer that is not one of the package's.
type scaleLayer struct{}

func (scaleLayer) String() string                { return "scale 2" }
func (scaleLayer) setup(in []int) ([]int, error) { return in, nil }
func (scaleLayer) newParams(string) []*Param     { return nil }
func (scaleLayer) reserve(*arena, int) error     { return nil }
func (scaleLayer) forward(r *run, x kernels.F32, _ int) (kernels.F32, error) {
	return x, r.ops.Scale(r.s, x, 2)
}
func (scaleLayer) backward(r *run, dy kernels.F32, _ int, _ bool) (kernels.F32, error) {
	return dy, r.ops.Scale(r.s, dy, 2)
}

// FuzzParseModel: no description makes the parser panic, or rebuild a model whose String differs
// from the description, or one past the bounds.
func FuzzParseModel(f *testing.F) {
	for _, m := range []func(testing.TB) *Model{smallMLP, smallResNet, smallCNN} {
		f.Add(m(f).String())
	}
	r18, _ := NewModel("resnet18", Shape{C: 3, H: 64, W: 64}, 5)
	f.Add(r18.String())
	f.Add("x 1x1x1->1: residual(residual(relu) | relu - relu)")
	f.Fuzz(func(t *testing.T, desc string) {
		m, err := parseModel(desc)
		if err != nil {
			return
		}
		if m.String() != desc {
			t.Fatalf("rebuilt %q from %q", m.String(), desc)
		}
		if m.in.Len() > maxArchInput {
			t.Fatalf("input %v past the bound", m.in)
		}
	})
}

// onnxValue is a tensor of onnxEval: its shape and values.
type onnxValue struct {
	shape []int
	v     []float64
}

// onnxEval runs the graph of m on the input x of shape [n c h w], in float64, with the operators
// ExportONNX writes as ONNX's operator specification defines them (a reference independent of the
// kernels), and returns the graph's first output.
func onnxEval(t *testing.T, m *onnx.Model, x []float32, n int) []float32 {
	t.Helper()
	vals := map[string]onnxValue{}
	in := m.Graph.Inputs[0]
	shape := []int{n}
	for _, d := range in.Shape[1:] {
		shape = append(shape, int(d.Size))
	}
	vals[in.Name] = onnxValue{shape, f64(x)}
	for _, init := range m.Graph.Initializers {
		s := make([]int, len(init.Dims))
		for i, d := range init.Dims {
			s[i] = int(d)
		}
		vals[init.Name] = onnxValue{s, f64(init.Data)}
	}
	ints := func(nd *onnx.Node, name string, def ...int64) []int {
		a, ok := nd.Attr(name)
		if ok {
			def = a.Ints
		}
		out := make([]int, len(def))
		for i, v := range def {
			out[i] = int(v)
		}
		return out
	}
	for i := range m.Graph.Nodes {
		nd := &m.Graph.Nodes[i]
		arg := func(i int) onnxValue {
			v, ok := vals[nd.Inputs[i]]
			if !ok {
				t.Fatalf("node %v: input %q undefined", nd, nd.Inputs[i])
			}
			return v
		}
		x := arg(0)
		var y onnxValue
		switch nd.Op {
		case "Identity":
			y = x
		case "Relu":
			y = onnxValue{x.shape, make([]float64, len(x.v))}
			for i, v := range x.v {
				y.v[i] = max(v, 0)
			}
		case "Add":
			b := arg(1)
			if !slices.Equal(x.shape, b.shape) {
				t.Fatalf("node %v: Add of %v and %v", nd, x.shape, b.shape)
			}
			y = onnxValue{x.shape, make([]float64, len(x.v))}
			for i := range x.v {
				y.v[i] = x.v[i] + b.v[i]
			}
		case "Flatten":
			if a, _ := nd.Attr("axis"); a.Int != 1 {
				t.Fatalf("node %v: axis %d", nd, a.Int)
			}
			y = onnxValue{[]int{x.shape[0], len(x.v) / x.shape[0]}, x.v}
		case "Gemm":
			w, b := arg(1), arg(2)
			if a, _ := nd.Attr("transB"); a.Int != 1 || len(x.shape) != 2 || x.shape[1] != w.shape[1] {
				t.Fatalf("node %v: transB %d, x %v, w %v", nd, a.Int, x.shape, w.shape)
			}
			rows, k, out := x.shape[0], w.shape[1], w.shape[0]
			y = onnxValue{[]int{rows, out}, make([]float64, rows*out)}
			for r := range rows {
				for o := range out {
					s := b.v[o]
					for j := range k {
						s += x.v[r*k+j] * w.v[o*k+j]
					}
					y.v[r*out+o] = s
				}
			}
		case "BatchNormalization":
			sc, bi, mu, vr := arg(1), arg(2), arg(3), arg(4)
			eps, _ := nd.Attr("epsilon")
			c, hw := x.shape[1], x.shape[2]*x.shape[3]
			y = onnxValue{x.shape, make([]float64, len(x.v))}
			for i := range x.v {
				ch := i / hw % c
				y.v[i] = (x.v[i]-mu.v[ch])/math.Sqrt(vr.v[ch]+float64(eps.Float))*sc.v[ch] + bi.v[ch]
			}
		case "GlobalAveragePool":
			c, hw := x.shape[1], x.shape[2]*x.shape[3]
			y = onnxValue{[]int{x.shape[0], c, 1, 1}, make([]float64, x.shape[0]*c)}
			for i := range y.v {
				for j := range hw {
					y.v[i] += x.v[i*hw+j]
				}
				y.v[i] /= float64(hw)
			}
		case "Conv", "MaxPool":
			k, st, pad := ints(nd, "kernel_shape"), ints(nd, "strides", 1, 1), ints(nd, "pads", 0, 0, 0, 0)
			if g, ok := nd.Attr("group"); ok && g.Int != 1 {
				t.Fatalf("node %v: group %d", nd, g.Int)
			}
			N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
			oh, ow := (H+pad[0]+pad[2]-k[0])/st[0]+1, (W+pad[1]+pad[3]-k[1])/st[1]+1
			oc := C
			var w, b onnxValue
			if nd.Op == "Conv" {
				w = arg(1)
				oc = w.shape[0]
				if len(nd.Inputs) > 2 {
					b = arg(2)
				}
			}
			y = onnxValue{[]int{N, oc, oh, ow}, make([]float64, N*oc*oh*ow)}
			for s := range N {
				for o := range oc {
					for i := range oh {
						for j := range ow {
							acc := math.Inf(-1)
							if nd.Op == "Conv" {
								acc = 0
								if b.v != nil {
									acc = b.v[o]
								}
							}
							for ci := range C {
								if nd.Op == "MaxPool" && ci != o {
									continue
								}
								for di := range k[0] {
									for dj := range k[1] {
										r, c := i*st[0]-pad[0]+di, j*st[1]-pad[1]+dj
										if r < 0 || r >= H || c < 0 || c >= W {
											continue
										}
										v := x.v[((s*C+ci)*H+r)*W+c]
										if nd.Op == "MaxPool" {
											acc = max(acc, v)
										} else {
											acc += v * w.v[((o*C+ci)*k[0]+di)*k[1]+dj]
										}
									}
								}
							}
							y.v[((s*oc+o)*oh+i)*ow+j] = acc
						}
					}
				}
			}
		default:
			t.Fatalf("node %v: operator %s is not one ExportONNX writes", nd, nd.Op)
		}
		vals[nd.Outputs[0]] = y
	}
	out := vals[m.Graph.Outputs[0].Name]
	r := make([]float32, len(out.v))
	for i, v := range out.v {
		r[i] = float32(v)
	}
	return r
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// exportONNX exports tr's model with the normalization mean, std and reads the file back.
func exportONNX(t *testing.T, tr *Trainer, mean, std []float32) *onnx.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.onnx")
	if err := tr.ExportONNX(path, mean, std); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExportONNX exports trained models of every layer ExportONNX knows (a residual network with
// BatchNorm and a strided shortcut; convolutions with a bias, max pooling, dropout) and checks the
// file: opset, a dynamic batch, initializers named and valued as the model's tensors, metadata;
// and that the graph, run by a reference evaluator on the normalized pixels, gives Predict's
// logits.
func TestExportONNX(t *testing.T) {
	f := newFixture(t, 100)
	pooled, err := Sequential("pooled", img8, 10, Conv2D(1, 4, 3, 1), ReLU(), MaxPool2D(2), Dropout(0.25),
		Conv2D(4, 6, 3, 1, Stride(2)), ReLU(), Flatten(), Linear(24, 16), ReLU(), Linear(16, 10))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m   *Model
		ops []string
	}{
		{smallResNet(t), []string{"Conv", "BatchNormalization", "Relu",
			"Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Conv", "BatchNormalization", "Add", "Relu",
			"Conv", "BatchNormalization", "Add", "Relu", "GlobalAveragePool", "Flatten", "Gemm"}},
		{pooled, []string{"Conv", "Relu", "MaxPool", "Conv", "Relu", "Flatten", "Gemm", "Relu", "Gemm"}},
	} {
		t.Run(tc.m.name, func(t *testing.T) {
			_, tr := fit(t, f, tc.m, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3})
			mean, std := f.test.Normalization()
			m := exportONNX(t, tr, mean, std)
			if m.Opset != 17 || m.IRVersion != onnx.IRVersion || m.Producer != "stoke" {
				t.Errorf("opset %d, IR version %d, producer %q", m.Opset, m.IRVersion, m.Producer)
			}
			g := &m.Graph
			if len(g.Inputs) != 1 || g.Inputs[0].Name != "input" || fmt.Sprint(g.Inputs[0].Shape) != "[{0 batch} {1 } {8 } {8 }]" ||
				len(g.Outputs) != 1 || g.Outputs[0].Name != "logits" || fmt.Sprint(g.Outputs[0].Shape) != "[{0 batch} {10 }]" {
				t.Errorf("inputs %v, outputs %v; want input [batch 1 8 8], logits [batch 10]", g.Inputs, g.Outputs)
			}
			var ops []string
			for _, n := range g.Nodes {
				ops = append(ops, n.Op)
			}
			if !slices.Equal(ops, tc.ops) {
				t.Errorf("operators %v; want %v", ops, tc.ops)
			}
			want := weights(t, tr)
			all := tr.m.tensors()
			if len(g.Initializers) != len(all) {
				t.Errorf("%d initializers; want the model's %d tensors", len(g.Initializers), len(all))
			}
			for i, p := range all {
				init := g.Initializer(p.Name)
				if init == nil {
					t.Fatalf("no initializer %s", p.Name)
				}
				if fmt.Sprint(init.Dims) != fmt.Sprint(p.Shape) || !slices.Equal(init.Data, want[i]) {
					t.Fatalf("initializer %s: %v; want the tensor's %v and values", p.Name, init.Dims, p.Shape)
				}
			}
			for key, v := range map[string]string{ONNXMetaModel: tr.m.String(), ONNXMetaInputShape: "1,8,8", ONNXMetaMean: "0.3", ONNXMetaStd: "0.3"} {
				if got, _ := m.Meta(key); got != v {
					t.Errorf("metadata %s = %q; want %q", key, got, v)
				}
			}
			if in, _ := m.Meta(ONNXMetaInput); !strings.Contains(in, "(x - mean[c]) / std[c]") || !strings.Contains(in, "NCHW") {
				t.Errorf("metadata %s = %q; want the input described", ONNXMetaInput, in)
			}

			p, err := tr.Predict(context.Background(), f.test)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 3} {
				x := make([]float32, n*64)
				for i, v := range f.test.images[:n*64] {
					x[i] = (float32(v)/255 - mean[0]) / std[0]
				}
				got, want := onnxEval(t, m, x, n), p.Logits[:n*10]
				if d, tol := maxDiff(got, want), 1e-4*maxAbs(want); d > tol {
					t.Errorf("batch %d: the graph's logits differ from Predict's by %g (tolerance %g):\n%v\n%v", n, d, tol, got, want)
				}
			}
		})
	}
}

func maxAbs(x []float32) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

func maxDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestExportONNXTorchvision checks torchvision's resnet18 stem on photos (7x7 stride 2, then a
// padded 3x3 max pooling): nodes and initializers carry the state_dict's names, and the graph
// computes what Predict does.
func TestExportONNXTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("resnet18 at 36 px")
	}
	dev := openCPU(t)
	in := Shape{C: 3, H: 36, W: 36} // above 32 px: torchvision's stem; odd sides from the pooling on
	m, err := NewModel("resnet18", in, 5)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(m, dev, nil, Config{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	om := exportONNX(t, tr, mean, std)
	var names []string
	for _, n := range om.Graph.Nodes[:5] {
		names = append(names, n.Op+" "+n.Name)
	}
	if want := []string{"Conv conv1", "BatchNormalization bn1", "Relu 2.relu", "MaxPool 3.maxpool", "Conv layer1.0.conv1"}; !slices.Equal(names, want) {
		t.Errorf("first nodes %v; want %v", names, want)
	}
	mp := om.Graph.Nodes[3]
	if a, _ := mp.Attr("pads"); !slices.Equal(a.Ints, []int64{1, 1, 1, 1}) {
		t.Errorf("max pooling pads %v; want 1 on each side", a.Ints)
	}
	for _, name := range []string{"conv1.weight", "bn1.running_var", "layer4.1.bn2.bias", "layer2.0.downsample.0.weight", "fc.weight"} {
		if om.Graph.Initializer(name) == nil {
			t.Errorf("no initializer %s", name)
		}
	}
	if got, _ := om.Meta(ONNXMetaMean); got != "0.485,0.456,0.406" {
		t.Errorf("mean %q", got)
	}
	imgs := make([]uint8, in.Len())
	for i := range imgs {
		imgs[i] = uint8(i * 7 % 251)
	}
	data := newMemData(dev, imgs, []int32{1}, in, 1, false, 0)
	defer data.close()
	p, err := tr.Predict(context.Background(), normalized{data, mean, std})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(imgs))
	for i, v := range imgs {
		c := i / (in.H * in.W)
		x[i] = (float32(v)/255 - mean[c]) / std[c]
	}
	got := onnxEval(t, om, x, 1)
	if d, tol := maxDiff(got, p.Logits), 1e-4*maxAbs(p.Logits); d > tol {
		t.Errorf("the graph's logits differ from Predict's by %g (tolerance %g):\n%v\n%v", d, tol, got, p.Logits)
	}
}

// TestExportONNXRefused: a layer of one's own, even inside a residual block, is named in the
// error, and no file is written; so is a normalization that does not fit the input.
func TestExportONNXRefused(t *testing.T) {
	f := newFixture(t, 10)
	m, err := Sequential("mine", img8, 10, Flatten(), Linear(64, 32), ReLU(),
		Residual([]Layer{Custom(&dense{in: 32, out: 32})}, nil), Linear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(m, f.dev, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	path := filepath.Join(t.TempDir(), "m.onnx")
	err = tr.ExportONNX(path, nil, nil)
	if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `layer 3.main.0 "dense 32->32" is a layer of one's own (Custom)`) {
		t.Errorf("a custom layer: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused export left %s: %v", path, err)
	}
	_, tr2 := fit(t, f, smallMLP(t), SGD{LR: 0.05}, Config{Epochs: 1})
	for _, norm := range [][2][]float32{{{0.5, 0.5}, {1, 1}}, {{0.5}, {0}}, {{float32(math.NaN())}, {1}}} {
		if err := tr2.ExportONNX(path, norm[0], norm[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("mean %v, std %v: %v; want ErrConfig", norm[0], norm[1], err)
		}
	}
	om := exportONNX(t, tr2, nil, nil)
	if mean, _ := om.Meta(ONNXMetaMean); mean != "0" {
		t.Errorf("no normalization: mean %q; want 0", mean)
	}
	if std, _ := om.Meta(ONNXMetaStd); std != "1" {
		t.Errorf("no normalization: std %q; want 1", std)
	}
}

// normalized is data with another normalization.
type normalized struct {
	*memData
	mean, std []float32
}

func (d normalized) Normalization() (mean, std []float32) { return d.mean, d.std }
