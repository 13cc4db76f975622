package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
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

// repeating is y = dense(x + offset), whose offset a file's offset of another length fills by
// repetition: a stand-in for a ViT and its position embeddings.
type repeating struct {
	Offset *nn.Tensor // [4]
	Dense  *nn.LinearLayer
}

func (m *repeating) String() string { return "repeating" }
func (m *repeating) Forward(x *nn.Tensor) *nn.Tensor {
	return m.Dense.Forward(nn.Add(nn.Flatten(x), m.Offset))
}

func (m *repeating) Resample(name string, from []int, values []float32) ([]float32, error) {
	switch {
	case name != "offset":
		return nil, fmt.Errorf("only offset is resampled")
	case len(from) != 1 || from[0] == 3:
		return nil, errors.New("three values do not repeat into four")
	case from[0] == 1:
		return values, nil // too short: the loader must notice
	}
	out := make([]float32, 4)
	for i := range out {
		out[i] = values[i%len(values)]
	}
	return out, nil
}

// TestResampler: LoadWeights gives a file tensor of another shape to the Resampler module that
// holds it and loads what it returns, reporting it; a tensor the module cannot resample, or
// resamples to the wrong size, is mis-shaped with the module's reason (strictly: nothing loads;
// Partial: the rest loads), and resampled values are checked for NaN as loaded ones are.
func TestResampler(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := Net("repeating", Shape{C: 1, H: 2, W: 2}, 2, &repeating{Offset: nn.Param([]int{4}, nn.Zeros), Dense: nn.NewLinear(4, 2, true)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, nil, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	file := func(offset ...float32) string {
		var b bytes.Buffer
		if err := safetensors.Write(&b, []safetensors.Tensor{{Name: "offset", Shape: []int{len(offset)}, F32: offset},
			{Name: "dense.weight", Shape: []int{2, 4}, F32: []float32{1, 2, 3, 4, 5, 6, 7, 8}},
			{Name: "dense.bias", Shape: []int{2}, F32: []float32{9, 10}}}, nil); err != nil {
			t.Fatal(err)
		}
		return writeFile(t, b.Bytes())
	}
	exported := func() []float32 {
		path := filepath.Join(t.TempDir(), "out.safetensors")
		if err := tr.Export(context.Background(), path); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		st, _ := fh.Stat()
		f, err := safetensors.NewFile(fh, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, 4)
		if err := f.Float32s("offset", v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	rep, err := tr.LoadWeights(context.Background(), file(1, 2), weights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Resampled, []string{"offset: file [2], model [4]"}) || len(rep.Loaded) != 3 {
		t.Errorf("report %+v; want offset resampled and three tensors loaded", rep)
	}
	if got := exported(); !slices.Equal(got, []float32{1, 2, 1, 2}) {
		t.Errorf("offset %v after loading [1 2]; want [1 2 1 2]", got)
	}

	for _, tc := range []struct {
		offset []float32
		want   string
	}{
		{[]float32{5, 5, 5}, "offset: file [3], model [4] (three values do not repeat into four)"},
		{[]float32{5}, "offset: file [1], model [4] (resampled to 1 values; the model's tensor has 4)"},
	} {
		_, err := tr.LoadWeights(context.Background(), file(tc.offset...), weights.Options{})
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("offset %v: error %v; want ErrMismatch saying %q", tc.offset, err, tc.want)
		}
		if got := exported(); !slices.Equal(got, []float32{1, 2, 1, 2}) {
			t.Errorf("offset %v: a refused file changed the offset to %v", tc.offset, got)
		}
	}
	rep, err = tr.LoadWeights(context.Background(), file(5, 5, 5), weights.Options{Partial: true})
	if err != nil || len(rep.Mismatched) != 1 || len(rep.Loaded) != 2 || len(rep.Resampled) != 0 {
		t.Errorf("Partial: report %+v, %v; want offset mis-shaped and the rest loaded", rep, err)
	}
	if _, err := tr.LoadWeights(context.Background(), file(float32(math.NaN()), 1), weights.Options{}); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), `"offset"`) {
		t.Errorf("a NaN in a resampled tensor: %v; want ErrNonFinite naming offset", err)
	}
}
