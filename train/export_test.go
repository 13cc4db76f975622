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

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/onnx"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/weights"
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
	_, tr := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3})
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := tr.Export(context.Background(), path); err != nil {
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
	want := modelWeights(t, tr)
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
	_, tr := fit(t, f, m, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3, Checkpoint: ck})
	want, err := tr.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := CheckpointModel(ck)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := New(context.Background(), m2, f.dev, nil, Config{Resume: ck})
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
	// A model built by hand has no builder: CheckpointModel refuses it, naming the way, and the
	// same code's model loads the checkpoint and predicts the same (as a state_dict does).
	handMade := func(t testing.TB) *Model {
		m, err := tSequential("hand-made", img8, 10, tConv(1, 4, 3, 1), tBatchNorm(4), tReLU(), tMaxPool(2), tFlatten(), tLinear(64, 10))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, build := range []func(testing.TB) *Model{handMade} {
		hand := build(t)
		ck2 := filepath.Join(t.TempDir(), "ck2")
		_, tr := fit(t, f, hand, optim.SGD{LR: 0.05}, Config{Epochs: 1, Checkpoint: ck2})
		want, err := tr.Predict(t.Context(), f.test)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := CheckpointModel(ck2); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "built again by the code that made it") {
			t.Fatalf("CheckpointModel of %s: %v; want ErrMismatch saying how to load it", hand.name, err)
		}
		tr3, err := New(context.Background(), build(t), f.dev, nil, Config{Resume: ck2})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr3.Predict(t.Context(), f.test)
		tr3.Close()
		if err != nil || !slices.Equal(got.Logits, want.Logits) {
			t.Fatalf("%s built again predicts otherwise from its checkpoint (%v)", hand.name, err)
		}
	}
}

// onnxValue is a tensor of onnxEval: its shape and values (int64 tensors' too).
type onnxValue struct {
	shape []int
	v     []float64
}

// broadcastShape is the shape of a and b broadcast together (ONNX's multidirectional rule, numpy's).
func broadcastShape(t *testing.T, a, b []int) []int {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			t.Fatalf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out
}

// at returns the flat index into a tensor of shape (aligned at the end of out, size-1 dimensions
// stretched) of the element at out's multi-index idx.
func at(shape, idx []int) int {
	off, k := 0, len(idx)-len(shape)
	for d, n := range shape {
		if n != 1 {
			off = off*n + idx[k+d]
		} else {
			off *= n
		}
	}
	return off
}

// unflat is the multi-index of flat index i in shape.
func unflat(shape []int, i int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// onnxEval runs the graph of m on the input x of shape [n c h w], in float64, with the operators
// ExportONNX writes as ONNX's operator specification defines them (a reference independent of the
// kernels and of package nn), and returns the graph's first output.
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
	asInts := func(v onnxValue) []int {
		out := make([]int, len(v.v))
		for i, f := range v.v {
			out[i] = int(f)
		}
		return out
	}
	axis := func(a, rank int) int {
		if a < 0 {
			return a + rank
		}
		return a
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
		var x onnxValue
		if len(nd.Inputs) > 0 {
			x = arg(0)
		}
		intAttr := func(name string, def int64) int {
			if a, ok := nd.Attr(name); ok {
				return int(a.Int)
			}
			return int(def)
		}
		floatAttr := func(name string) float64 {
			a, ok := nd.Attr(name)
			if !ok {
				t.Fatalf("node %v: no attribute %s", nd, name)
			}
			return float64(a.Float)
		}
		unary := func(f func(float64) float64) onnxValue {
			y := onnxValue{x.shape, make([]float64, len(x.v))}
			for i, v := range x.v {
				y.v[i] = f(v)
			}
			return y
		}
		binary := func(b onnxValue, f func(a, b float64) float64) onnxValue {
			s := broadcastShape(t, x.shape, b.shape)
			y := onnxValue{s, make([]float64, numel(s))}
			for i := range y.v {
				idx := unflat(s, i)
				y.v[i] = f(x.v[at(x.shape, idx)], b.v[at(b.shape, idx)])
			}
			return y
		}
		var y onnxValue
		switch nd.Op {
		case "Identity":
			y = x
		case "Constant":
			if a, ok := nd.Attr("value_ints"); ok {
				y = onnxValue{[]int{len(a.Ints)}, make([]float64, len(a.Ints))}
				for i, v := range a.Ints {
					y.v[i] = float64(v)
				}
			} else {
				y = onnxValue{nil, []float64{floatAttr("value_float")}}
			}
		case "Shape":
			s := x.shape[intAttr("start", 0):intAttr("end", int64(len(x.shape)))]
			y = onnxValue{[]int{len(s)}, f64Ints(s)}
		case "Relu":
			y = unary(func(v float64) float64 { return max(v, 0) })
		case "Exp":
			y = unary(math.Exp)
		case "Log":
			y = unary(math.Log)
		case "Sqrt":
			y = unary(math.Sqrt)
		case "Reciprocal":
			y = unary(func(v float64) float64 { return 1 / v })
		case "Sigmoid":
			y = unary(func(v float64) float64 { return 1 / (1 + math.Exp(-v)) })
		case "Tanh":
			y = unary(math.Tanh)
		case "Erf":
			y = unary(math.Erf)
		case "HardSigmoid":
			a, b := floatAttr("alpha"), floatAttr("beta")
			y = unary(func(v float64) float64 { return max(0, min(1, a*v+b)) })
		case "HardSwish":
			y = unary(func(v float64) float64 { return v * max(0, min(1, v/6+0.5)) })
		case "Clip":
			lo, hi := arg(1).v[0], arg(2).v[0]
			y = unary(func(v float64) float64 { return max(lo, min(hi, v)) })
		case "Add":
			y = binary(arg(1), func(a, b float64) float64 { return a + b })
		case "Sub":
			y = binary(arg(1), func(a, b float64) float64 { return a - b })
		case "Mul":
			y = binary(arg(1), func(a, b float64) float64 { return a * b })
		case "Div":
			y = binary(arg(1), func(a, b float64) float64 { return a / b })
		case "Expand":
			y = binary(onnxValue{asInts(arg(1)), make([]float64, numel(asInts(arg(1))))}, func(a, _ float64) float64 { return a })
		case "Reshape":
			s := asInts(arg(1))
			infer := -1
			for d, v := range s {
				switch v {
				case 0:
					s[d] = x.shape[d]
				case -1:
					infer = d
				}
			}
			if infer >= 0 {
				s[infer] = 1
				s[infer] = len(x.v) / numel(s)
			}
			if numel(s) != len(x.v) {
				t.Fatalf("node %v: reshape %v to %v", nd, x.shape, s)
			}
			y = onnxValue{s, x.v}
		case "Transpose":
			perm := ints(nd, "perm")
			s := make([]int, len(perm))
			for d, p := range perm {
				s[d] = x.shape[p]
			}
			y = onnxValue{s, make([]float64, len(x.v))}
			src := make([]int, len(perm))
			for i := range y.v {
				idx := unflat(s, i)
				for d, p := range perm {
					src[p] = idx[d]
				}
				y.v[i] = x.v[at(x.shape, src)]
			}
		case "Slice":
			starts, ends, axes := asInts(arg(1)), asInts(arg(2)), asInts(arg(3))
			s, from := slices.Clone(x.shape), make([]int, len(x.shape))
			for j, a := range axes {
				a = axis(a, len(s))
				from[a], s[a] = starts[j], min(ends[j], x.shape[a])-starts[j]
			}
			y = onnxValue{s, make([]float64, numel(s))}
			for i := range y.v {
				idx := unflat(s, i)
				for d := range idx {
					idx[d] += from[d]
				}
				y.v[i] = x.v[at(x.shape, idx)]
			}
		case "Concat":
			a := axis(intAttr("axis", 0), len(x.shape))
			s := slices.Clone(x.shape)
			s[a] = 0
			for j := range nd.Inputs {
				s[a] += arg(j).shape[a]
			}
			y = onnxValue{s, make([]float64, numel(s))}
			for i := range y.v {
				idx := unflat(s, i)
				for j := range nd.Inputs {
					p := arg(j)
					if idx[a] < p.shape[a] {
						y.v[i] = p.v[at(p.shape, idx)]
						break
					}
					idx[a] -= p.shape[a]
				}
			}
		case "ReduceSum":
			if intAttr("keepdims", 1) != 1 {
				t.Fatalf("node %v: keepdims 0", nd)
			}
			s := slices.Clone(x.shape)
			for _, a := range asInts(arg(1)) {
				s[axis(a, len(s))] = 1
			}
			y = onnxValue{s, make([]float64, numel(s))}
			for i, v := range x.v {
				y.v[at(s, unflat(x.shape, i))] += v
			}
		case "MatMul":
			b := arg(1)
			ra, rb := len(x.shape), len(b.shape)
			mm, k, nn := x.shape[ra-2], x.shape[ra-1], b.shape[rb-1]
			if b.shape[rb-2] != k {
				t.Fatalf("node %v: MatMul of %v and %v", nd, x.shape, b.shape)
			}
			bs := broadcastShape(t, x.shape[:ra-2], b.shape[:rb-2])
			s := append(slices.Clone(bs), mm, nn)
			y = onnxValue{s, make([]float64, numel(s))}
			for i := range y.v {
				idx := unflat(s, i)
				r, c := idx[len(idx)-2], idx[len(idx)-1]
				ia, ib := append(slices.Clone(idx[:len(bs)]), r, 0), append(slices.Clone(idx[:len(bs)]), 0, c)
				for j := range k {
					ia[len(ia)-1], ib[len(ib)-2] = j, j
					y.v[i] += x.v[at(x.shape, ia)] * b.v[at(b.shape, ib)]
				}
			}
		case "Flatten":
			if a, _ := nd.Attr("axis"); a.Int != 1 {
				t.Fatalf("node %v: axis %d", nd, a.Int)
			}
			y = onnxValue{[]int{x.shape[0], len(x.v) / x.shape[0]}, x.v}
		case "Gemm":
			w := arg(1)
			if a, _ := nd.Attr("transB"); a.Int != 1 || len(x.shape) != 2 || x.shape[1] != w.shape[1] {
				t.Fatalf("node %v: transB %d, x %v, w %v", nd, a.Int, x.shape, w.shape)
			}
			rows, k, out := x.shape[0], w.shape[1], w.shape[0]
			y = onnxValue{[]int{rows, out}, make([]float64, rows*out)}
			for r := range rows {
				for o := range out {
					s := 0.0
					if len(nd.Inputs) > 2 {
						s = arg(2).v[o]
					}
					for j := range k {
						s += x.v[r*k+j] * w.v[o*k+j]
					}
					y.v[r*out+o] = s
				}
			}
		case "LayerNormalization", "Softmax":
			if a := intAttr("axis", -1); axis(a, len(x.shape)) != len(x.shape)-1 {
				t.Fatalf("node %v: axis %d", nd, a)
			}
			cols := x.shape[len(x.shape)-1]
			y = onnxValue{x.shape, make([]float64, len(x.v))}
			for r := 0; r < len(x.v); r += cols {
				row, out := x.v[r:r+cols], y.v[r:r+cols]
				if nd.Op == "Softmax" {
					hi, sum := slices.Max(row), 0.0
					for j, v := range row {
						out[j] = math.Exp(v - hi)
						sum += out[j]
					}
					for j := range out {
						out[j] /= sum
					}
					continue
				}
				mean, vr := 0.0, 0.0
				for _, v := range row {
					mean += v / float64(cols)
				}
				for _, v := range row {
					vr += (v - mean) * (v - mean) / float64(cols)
				}
				for j, v := range row {
					out[j] = (v - mean) / math.Sqrt(vr+floatAttr("epsilon")) * arg(1).v[j]
					if len(nd.Inputs) > 2 {
						out[j] += arg(2).v[j]
					}
				}
			}
		case "BatchNormalization":
			sc, bi, mu, vr := arg(1), arg(2), arg(3), arg(4)
			eps, _ := nd.Attr("epsilon")
			c, hw := x.shape[1], numel(x.shape[2:])
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
			groups := intAttr("group", 1)
			N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
			oh, ow := (H+pad[0]+pad[2]-k[0])/st[0]+1, (W+pad[1]+pad[3]-k[1])/st[1]+1
			oc, cg := C, C/groups // output channels; input channels per group
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
								if nd.Op == "MaxPool" && ci != o || nd.Op == "Conv" && ci/cg != o/(oc/groups) {
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
											acc += v * w.v[((o*cg+ci%cg)*k[0]+di)*k[1]+dj]
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

func f64Ints(x []int) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
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
	if err := tr.ExportONNX(context.Background(), path, mean, std); err != nil {
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
	pooled, err := tSequential("pooled", img8, 10, tConv(1, 4, 3, 1), tReLU(), tMaxPool(2), tDropout(0.25),
		tConv(4, 6, 3, 1, tStride(2)), tReLU(), tFlatten(), tLinear(24, 16), tReLU(), tLinear(16, 10))
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
			_, tr := fit(t, f, tc.m, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3})
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
			want := modelWeights(t, tr)
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
			for key, v := range map[string]string{onnx.MetaModel: tr.m.String(), onnx.MetaInputShape: "1,8,8", onnx.MetaMean: "0.3", onnx.MetaStd: "0.3"} {
				if got, _ := m.Meta(key); got != v {
					t.Errorf("metadata %s = %q; want %q", key, got, v)
				}
			}
			if in, _ := m.Meta(onnx.MetaInput); !strings.Contains(in, "(x - mean[c]) / std[c]") || !strings.Contains(in, "NCHW") {
				t.Errorf("metadata %s = %q; want the input described", onnx.MetaInput, in)
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
	tr, err := New(context.Background(), m, dev, nil, Config{Seed: 2})
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
	// The stem's pooling before its ReLU, as the model runs them: the same values.
	if want := []string{"Conv conv1", "BatchNormalization bn1", "MaxPool 2.max_pool2d", "Relu 3.relu", "Conv layer1.0.conv1"}; !slices.Equal(names, want) {
		t.Errorf("first nodes %v; want %v", names, want)
	}
	mp := om.Graph.Nodes[2]
	if a, _ := mp.Attr("pads"); !slices.Equal(a.Ints, []int64{1, 1, 1, 1}) {
		t.Errorf("max pooling pads %v; want 1 on each side", a.Ints)
	}
	for _, name := range []string{"conv1.weight", "bn1.running_var", "layer4.1.bn2.bias", "layer2.0.downsample.0.weight", "fc.weight"} {
		if om.Graph.Initializer(name) == nil {
			t.Errorf("no initializer %s", name)
		}
	}
	if got, _ := om.Meta(onnx.MetaMean); got != "0.485,0.456,0.406" {
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

// TestExportONNXRefused: a normalization that does not fit the input is refused.
func TestExportONNXRefused(t *testing.T) {
	f := newFixture(t, 10)
	path := filepath.Join(t.TempDir(), "m.onnx")
	_, tr2 := fit(t, f, smallMLP(t), optim.SGD{LR: 0.05}, Config{Epochs: 1})
	for _, norm := range [][2][]float32{{{0.5, 0.5}, {1, 1}}, {{0.5}, {0}}, {{float32(math.NaN())}, {1}}} {
		if err := tr2.ExportONNX(context.Background(), path, norm[0], norm[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("mean %v, std %v: %v; want ErrConfig", norm[0], norm[1], err)
		}
	}
	om := exportONNX(t, tr2, nil, nil)
	if mean, _ := om.Meta(onnx.MetaMean); mean != "0" {
		t.Errorf("no normalization: mean %q; want 0", mean)
	}
	if std, _ := om.Meta(onnx.MetaStd); std != "1" {
		t.Errorf("no normalization: std %q; want 1", std)
	}
}

// normalized is data with another normalization.
type normalized struct {
	*memData
	mean, std []float32
}

func (d normalized) Normalization() (mean, std []float32) { return d.mean, d.std }

// everyOp is a module of package nn that uses every op ExportONNX writes down from a trace: a
// convolution, batch norm and pooling, linears of 2 and 3 dimensions with and without a bias,
// layer norms with and without affine tensors, attention-like products over a batch·heads
// reshape and the fused attention, a class token made of a batch-sized Full, narrowing, concatenation, sums and means,
// a constant and each elementwise function.
type everyOp struct {
	Conv  *nn.Conv2dLayer
	BN    *nn.BatchNorm2dLayer
	Proj  *nn.Tensor
	LN    *nn.LayerNormLayer
	Token *nn.Tensor
	Head  *nn.LinearLayer
}

func newEveryOp(c int) *everyOp {
	return &everyOp{Conv: nn.NewConv2d(c, 4, 3, nn.ConvOptions{Padding: 1}, true), BN: nn.NewBatchNorm2d(4),
		Proj: nn.Param([]int{8, 4}, nn.Weight), LN: nn.NewLayerNorm(8), Token: nn.Param([]int{1, 1, 8}, nn.Weight),
		Head: nn.NewLinear(8, 10, true)}
}

func (m *everyOp) String() string { return "everyop" }

func (m *everyOp) Forward(x *nn.Tensor) *nn.Tensor {
	n, g := x.Dim(0), x.Graph()
	y := nn.MaxPool2d(nn.ReLU6(m.BN.Forward(m.Conv.Forward(x))), 2, 2, 0) // [N 4 4 4]
	y = nn.Mul(y, nn.Hardsigmoid(nn.GlobalAvgPool(y)))
	t := nn.Hardswish(nn.Permute(y.Reshape(n, 4, 16), 0, 2, 1)) // [N 16 4]
	t = m.LN.Forward(nn.GELU(nn.Linear(t, m.Proj, nil)))        // [N 16 8]
	h := t.Reshape(n*2, 16, 4)                                  // two "heads": the batch times 2
	h = nn.MatMul(nn.Softmax(nn.Scale(nn.MatMul(h, nn.Transpose(h, 1, 2)), 0.5)), h).Reshape(n, 16, 8)
	h = nn.ScaledDotProductAttention(h, nn.Scale(h, 2), h, 0.3) // the fused op: its own ONNX form
	h = nn.LayerNorm(h, nil, nil, 1e-5)
	token := nn.Add(g.Full(0, n, 1, 8), m.Token)
	t = nn.Narrow(nn.SiLU(nn.GELUTanh(nn.Concat(1, token, h))), 1, 0, 9) // [N 9 8]
	v := nn.Add(nn.Mean(t, []int{1}, false), nn.Log(nn.Sum(nn.Exp(nn.Scale(t, 0.1)), []int{1}, true).Reshape(n, 8)))
	v = nn.Div(nn.Sub(v, nn.Sqrt(nn.Sigmoid(v))), nn.AddScalar(nn.Exp(nn.Tanh(v)), 1))
	v = nn.Mul(v, nn.Rsqrt(nn.AddScalar(nn.Sigmoid(v), 1)))
	v = nn.ReLU(nn.Add(v, g.Constant([]float32{0.1, -0.1, 0.2, -0.2, 0.3, -0.3, 0.4, -0.4}, 8)))
	return m.Head.Forward(v)
}

// TestExportONNXNN exports a trained model holding a module of package nn after layers of the
// package: each of the module's ops has its ONNX form, its tensors are initializers under their
// names and with their values, and the graph, run by the reference evaluator at batch sizes 1
// and 3 (it was traced at 2 and 3), gives Predict's logits.
func TestExportONNXNN(t *testing.T) {
	f := newFixture(t, 100)
	m, err := tSequential("everyop", img8, 10, tConv(1, 2, 3, 1), tReLU(), tModule("everyop", newEveryOp(2)))
	if err != nil {
		t.Fatal(err)
	}
	_, tr := fit(t, f, m, optim.AdamW{LR: 3e-3}, Config{Epochs: 1, Seed: 5})
	mean, std := f.test.Normalization()
	om := exportONNX(t, tr, mean, std)
	g := &om.Graph
	if fmt.Sprint(g.Inputs[0].Shape) != "[{0 batch} {1 } {8 } {8 }]" || fmt.Sprint(g.Outputs[0].Shape) != "[{0 batch} {10 }]" {
		t.Errorf("input %v, output %v; want [batch 1 8 8] and [batch 10]", g.Inputs[0].Shape, g.Outputs[0].Shape)
	}
	ops := map[string]bool{}
	for _, n := range g.Nodes {
		ops[n.Op] = true
	}
	for _, op := range []string{"Conv", "BatchNormalization", "Clip", "MaxPool", "GlobalAveragePool", "HardSigmoid", "Mul",
		"Reshape", "Transpose", "HardSwish", "MatMul", "Erf", "LayerNormalization", "Softmax", "Shape", "Expand", "Add",
		"Concat", "Tanh", "Sigmoid", "Slice", "ReduceSum", "Exp", "Log", "Sub", "Sqrt", "Div", "Reciprocal", "Relu", "Gemm"} {
		if !ops[op] {
			t.Errorf("no %s node", op)
		}
	}
	for _, name := range []string{"2.everyop.conv", "2.everyop.bn", "2.everyop.ln", "2.everyop.head"} {
		if !slices.ContainsFunc(g.Nodes, func(n onnx.Node) bool { return n.Name == name }) {
			t.Errorf("no node %s (named after its module)", name)
		}
	}
	want := modelWeights(t, tr)
	all := tr.m.tensors()
	if len(g.Initializers) != len(all)+1 {
		t.Errorf("%d initializers; want the model's %d tensors and the constant", len(g.Initializers), len(all))
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
	p, err := tr.Predict(context.Background(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		x := make([]float32, n*64)
		for i, v := range f.test.images[:n*64] {
			x[i] = (float32(v)/255 - mean[0]) / std[0]
		}
		got, want := onnxEval(t, om, x, n), p.Logits[:n*10]
		if d, tol := maxDiff(got, want), 1e-4*maxAbs(want); d > tol {
			t.Errorf("batch %d: the graph's logits differ from Predict's by %g (tolerance %g):\n%v\n%v", n, d, tol, got, want)
		}
	}
}

// batchNarrow mixes the samples of a batch: x + x[0].
type batchNarrow struct{}

func (batchNarrow) String() string                  { return "batchnarrow" }
func (batchNarrow) Forward(x *nn.Tensor) *nn.Tensor { return nn.Add(x, nn.Narrow(x, 0, 0, 1)) }

// TestExportONNXNNRefused: a module whose pass does not hold for every batch size is refused
// with an error naming the layer and the step, and no file is written.
func TestExportONNXNNRefused(t *testing.T) {
	m, err := tSequential("mixer", img8, 10, tModule("batchnarrow", batchNarrow{}), tFlatten(), tLinear(64, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, openCPU(t), nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	path := filepath.Join(t.TempDir(), "m.onnx")
	err = tr.ExportONNX(context.Background(), path, nil, nil)
	if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `mixer: step 0 (narrow): narrows dimension 0, which holds the batch`) {
		t.Errorf("a pass that narrows the batch: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused export left %s: %v", path, err)
	}
}

// derivedIndex is a module with a derived buffer "index" of its own and a scalar parameter.
type derivedIndex struct {
	FC    *nn.LinearLayer
	Scale *nn.Tensor
}

func (m *derivedIndex) Forward(x *nn.Tensor) *nn.Tensor {
	return nn.Mul(m.FC.Forward(nn.Flatten(x)), m.Scale)
}
func (m *derivedIndex) Derived() []nn.DerivedTensor {
	return []nn.DerivedTensor{{Name: "index", Shape: []int{2}, I64: []int64{0, 1}}}
}

// TestDerivedNested: a Derived module inside another has its buffers named after its place, and
// a scalar parameter (no shape) checkpoints.
func TestDerivedNested(t *testing.T) {
	m, err := Net("nested", img8, 10, nn.Dict{{Name: "inner", Module: &derivedIndex{FC: nn.NewLinear(64, 10, true), Scale: nn.Param(nil, nn.Ones)}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := weights.DerivedTensors(m.module); len(d) != 1 || d[0].Name != "inner.index" {
		t.Errorf("derived tensors %+v; want inner.index", d)
	}
	f := newFixture(t, 32)
	ck := filepath.Join(t.TempDir(), "ck")
	fit(t, f, m, optim.SGD{LR: 0.01}, Config{Epochs: 1, Checkpoint: ck})
	c, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Tensors); n != 3 {
		t.Errorf("the checkpoint holds %d tensors; want fc's two and the scalar", n)
	}
}
