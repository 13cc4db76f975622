package train

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Derived is an NNModule whose PyTorch twin keeps, as persistent buffers, tensors it derives from
// its configuration (a Swin's relative_position_index and V2's relative_coords_table). Stoke
// computes them in the forward pass, so they are neither trained nor loaded; but the twin's
// state_dict holds them, so LoadWeights accepts a file's copy when it equals the module's (and
// reports one that differs as mis-shaped: another window size), and Export writes them, so that
// weights load strictly both ways.
type Derived interface {
	// Derived returns the derived tensors, named as in nn.StateDict.
	Derived() []DerivedTensor
}

// DerivedTensor is one derived buffer: int64 values (dtype I64, an index) when I64 is set,
// float32 ones otherwise.
type DerivedTensor struct {
	Name  string
	Shape []int
	I64   []int64
	F32   []float32
}

// derived returns the model's derived tensors under their names in the model (a layer's prefix
// added), in layer order.
func (m *Model) derived() []DerivedTensor {
	var out []DerivedTensor
	for _, l := range m.layers {
		c, ok := l.(*custom)
		if !ok {
			continue
		}
		nm, ok := c.m.(*nnModule)
		if !ok || len(nm.tensors) == 0 {
			continue
		}
		d, ok := nm.m.(Derived)
		if !ok {
			continue
		}
		// The layer's prefix: what its first tensor's model name adds to its module name.
		prefix := strings.TrimSuffix(nm.params[0].Name, nm.tensors[0].Name)
		for _, t := range d.Derived() {
			t.Name = prefix + t.Name
			out = append(out, t)
		}
	}
	return out
}

// checkDerived reports why the file's tensor t is not the derived tensor d, or nil when it
// equals it: the same shape, and the same values (as int64 for an index of any integer dtype;
// float32 within 1e-6 of the largest, or 1e-2 for F16 and BF16, for a float table).
func (f *stFile) checkDerived(t *stInfo, d DerivedTensor) error {
	if !slices.Equal(t.shape, d.Shape) {
		return fmt.Errorf("file %v, model %v (derived from the model's configuration)", t.shape, d.Shape)
	}
	differ := fmt.Errorf("the values differ from those the model derives from its configuration")
	if d.I64 != nil {
		size := stDTypes[t.dtype]
		if t.dtype[0] != 'I' && t.dtype[0] != 'U' {
			return fmt.Errorf("dtype %s; an index is an integer", t.dtype)
		}
		raw := make([]byte, t.end-t.begin)
		if _, err := f.r.ReadAt(raw, f.dataOff+t.begin); err != nil {
			return err
		}
		for i, want := range d.I64 {
			var v int64
			switch size {
			case 8:
				v = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			case 4:
				v = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			case 2:
				v = int64(int16(binary.LittleEndian.Uint16(raw[2*i:])))
			default:
				v = int64(raw[i])
			}
			if t.dtype[0] == 'U' && size < 8 {
				v &= 1<<(8*size) - 1
			}
			if v != want {
				return differ
			}
		}
		return nil
	}
	got := make([]float32, t.elems)
	if err := f.float32s(got, t); err != nil {
		return err
	}
	tol := 1e-6
	if t.dtype != "F32" {
		tol = 1e-2
	}
	big := 1.0
	for _, v := range d.F32 {
		big = max(big, math.Abs(float64(v)))
	}
	for i, want := range d.F32 {
		if math.Abs(float64(got[i])-float64(want)) > tol*big {
			return differ
		}
	}
	return nil
}
