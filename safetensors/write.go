package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
)

// Tensor is one tensor to Write: float32 values (dtype F32), given or made by Fill, or int64
// ones (dtype I64) when I64 is set.
type Tensor struct {
	// Name is the tensor's key in the header (a state_dict name: "fc.weight"); "__metadata__" is
	// the format's own.
	Name string
	// Shape is the tensor's dimensions, outermost first; empty for a scalar. Their product is
	// the number of values.
	Shape []int
	// F32 holds the values of an F32 tensor, in row-major order.
	F32 []float32
	// I64 holds the values of an I64 tensor, in row-major order; F32 is then nil.
	I64 []int64
	// Fill, when F32 and I64 are nil, returns the F32 tensor's values (as many as its shape
	// holds) when Write reaches the tensor, in memory the caller may reuse for the next: a write
	// streams, holding one tensor's values at a time, whatever the file's size.
	Fill func() ([]float32, error)
}

// dtype is the dtype t is written as.
func (t *Tensor) dtype() string {
	if t.I64 != nil {
		return "I64"
	}
	return "F32"
}

// size is the number of bytes of t's data.
func (t *Tensor) size() int {
	switch {
	case t.I64 != nil:
		return 8 * len(t.I64)
	case t.Fill != nil:
		return 4 * t.len()
	}
	return 4 * len(t.F32)
}

// len is the number of values t's shape holds (check has bounded it).
func (t *Tensor) len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// check reports why t cannot be written: both value slices set, a negative dimension, or a
// number of values that is not the product of the shape.
func (t *Tensor) check() error {
	if t.Name == "__metadata__" {
		return fmt.Errorf("safetensors: a tensor named __metadata__, the header's metadata key")
	}
	if t.F32 != nil && t.I64 != nil || t.Fill != nil && (t.F32 != nil || t.I64 != nil) {
		return fmt.Errorf("safetensors: tensor %q has values of two kinds (F32, I64, Fill)", t.Name)
	}
	n := uint64(1)
	for _, d := range t.Shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if d < 0 || hi != 0 {
			return fmt.Errorf("safetensors: tensor %q: shape %v", t.Name, t.Shape)
		}
		n = lo
	}
	if have := max(len(t.F32), len(t.I64)); t.Fill == nil && uint64(have) != n {
		return fmt.Errorf("safetensors: tensor %q: %d values for shape %v", t.Name, have, t.Shape)
	}
	if t.Fill != nil && n > math.MaxInt/8 {
		return fmt.Errorf("safetensors: tensor %q: shape %v", t.Name, t.Shape)
	}
	return nil
}

// Write writes tensors to w as a safetensors file: the header, with metadata (when not empty)
// under "__metadata__", padded with spaces to a multiple of 8 bytes so that the data is aligned,
// then each tensor's values in the order given, little-endian. The header's keys are sorted (the
// JSON of encoding/json), so the same tensors give the same bytes. A tensor named twice or whose
// values do not fit its shape is an error, and nothing is written; an error from a tensor's Fill
// ends the write with it (what was written is then a truncated file).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	header := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	off := 0
	for i := range tensors {
		t := &tensors[i]
		if err := t.check(); err != nil {
			return err
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %q twice", t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar's shape is [], not null
		}
		header[t.Name] = entry{t.dtype(), shape, [2]int{off, off + t.size()}}
		off += t.size()
	}
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	if pad := len(h) % 8; pad != 0 {
		h = append(h, strings.Repeat(" ", 8-pad)...)
	}
	bw := bufio.NewWriter(w)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	bw.Write(n[:])
	bw.Write(h)
	for _, t := range tensors {
		for _, v := range t.I64 {
			binary.LittleEndian.PutUint64(n[:], uint64(v))
			bw.Write(n[:])
		}
		values := t.F32
		if t.Fill != nil {
			var err error
			if values, err = t.Fill(); err == nil && len(values) != t.len() {
				err = fmt.Errorf("%d values for shape %v", len(values), t.Shape)
			}
			if err != nil {
				return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
			}
		}
		for _, v := range values {
			binary.LittleEndian.PutUint32(n[:4], math.Float32bits(v))
			bw.Write(n[:4])
		}
	}
	return bw.Flush()
}
