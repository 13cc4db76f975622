package train

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
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
