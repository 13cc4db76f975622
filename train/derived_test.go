package train

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/safetensors"
	"github.com/stoke-ml/stoke/weights"
)

// deriving is a Linear whose PyTorch twin would keep an index and a table it derives from its
// configuration, as a Swin's attention keeps relative_position_index.
type deriving struct{ Dense *nn.LinearLayer }

func (m *deriving) String() string                  { return "deriving" }
func (m *deriving) Forward(x *nn.Tensor) *nn.Tensor { return m.Dense.Forward(nn.Flatten(x)) }
func (m *deriving) Derived() []nn.DerivedTensor {
	return []nn.DerivedTensor{
		{Name: "dense.index", Shape: []int{3}, I64: []int64{2, 0, 1}},
		{Name: "dense.table", Shape: []int{1, 2}, F32: []float32{0.5, -0.25}},
	}
}

// TestDerived: Export writes a Derived module's tensors with their dtypes, a strict LoadWeights
// accepts them (and a file without them), and a file whose derived tensor differs in values,
// shape or kind is refused naming it, loading nothing.
func TestDerived(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := Net("deriving", Shape{C: 1, H: 2, W: 2}, 2, &deriving{Dense: nn.NewLinear(4, 2, true)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, nil, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	path := filepath.Join(t.TempDir(), "out.safetensors")
	if err := tr.Export(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.NewFile(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	idx, ok1 := f.Tensor("dense.index")
	tab, ok2 := f.Tensor("dense.table")
	if !ok1 || idx.DType != "I64" || !slices.Equal(idx.Shape, []int{3}) || !ok2 || tab.DType != "F32" || !slices.Equal(tab.Shape, []int{1, 2}) {
		t.Fatalf("the export's derived tensors: %+v, %+v; want dense.index I64 [3] and dense.table F32 [1 2]", idx, tab)
	}
	// A strict load accepts the exported index and table only when they equal the module's.
	if _, err := tr.LoadWeights(context.Background(), path, weights.Options{}); err != nil {
		t.Errorf("a strict load of the export: %v", err)
	}

	tensors := []safetensors.Tensor{{Name: "dense.weight", Shape: []int{2, 4}, F32: []float32{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "dense.bias", Shape: []int{2}, F32: []float32{9, 10}}}
	file := func(extra ...safetensors.Tensor) string {
		var b bytes.Buffer
		if err := safetensors.Write(&b, append(slices.Clone(tensors), extra...), nil); err != nil {
			t.Fatal(err)
		}
		return writeFile(t, b.Bytes())
	}
	table := safetensors.Tensor{Name: "dense.table", Shape: []int{1, 2}, F32: []float32{0.5, -0.25}}
	if _, err := tr.LoadWeights(context.Background(), file(), weights.Options{}); err != nil {
		t.Errorf("a file without the derived tensors: %v", err)
	}
	if _, err := tr.LoadWeights(context.Background(), file(table), weights.Options{}); err != nil {
		t.Errorf("a file with the same table: %v", err)
	}
	for _, tc := range []struct {
		name  string
		extra safetensors.Tensor
		want  string
	}{
		{"another index", safetensors.Tensor{Name: "dense.index", Shape: []int{3}, I64: []int64{0, 1, 2}}, "dense.index: the values differ"},
		{"another table", safetensors.Tensor{Name: "dense.table", Shape: []int{1, 2}, F32: []float32{0.5, 0.25}}, "dense.table: the values differ"},
		{"another shape", safetensors.Tensor{Name: "dense.index", Shape: []int{1}, I64: []int64{2}}, "dense.index: file [1], model [3]"},
		{"a float index", safetensors.Tensor{Name: "dense.index", Shape: []int{3}, F32: []float32{2, 0, 1}}, "dense.index: dtype F32"},
	} {
		_, err := tr.LoadWeights(context.Background(), file(tc.extra), weights.Options{})
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrMismatch saying %q", tc.name, err, tc.want)
		}
	}
}
