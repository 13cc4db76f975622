package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"

	"github.com/stoke-ml/stoke/internal/half"
)

// ErrFormat: bytes that are not a well-formed safetensors file (a header longer than the file,
// bad JSON, an unknown dtype, a shape that does not fit its byte range, offsets that overlap,
// leave a gap or run past the end), or a tensor read as a type its dtype does not convert to
// (Float32s of an I64 tensor).
var ErrFormat = errors.New("bad safetensors file")

// maxHeader bounds the JSON header, as the safetensors reference implementation does (100 MB):
// the header is read whole before anything else.
const maxHeader = 100 << 20

// dtypeSizes are the element sizes of the dtypes the safetensors format defines.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// TensorInfo describes one tensor of a File, as its header gives it.
type TensorInfo struct {
	// Name is the tensor's key in the header (a state_dict name: "fc.weight").
	Name string
	// DType is the element type as the format names it: F32, F16, BF16, F64, I64, I32, I16, I8,
	// U64, U32, U16, U8, BOOL, F8_E5M2 or F8_E4M3.
	DType string
	// Shape is the tensor's dimensions, outermost first; empty for a scalar.
	Shape []int
	// Offset is where the tensor's bytes start in the file (not in the data section, as the
	// header's data_offsets count), and Size how many there are.
	Offset, Size int64
}

// Len returns the number of elements of the tensor: the product of its shape (1 for a scalar).
func (t TensorInfo) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a safetensors file whose header has been read and checked (NewFile): every tensor's
// byte range lies in the data, fits its dtype and shape, and the ranges tile the data exactly.
type File struct {
	r       io.ReaderAt
	tensors []TensorInfo   // in data order
	byName  map[string]int // index into tensors
	meta    map[string]string
}

// NewFile reads and checks the header of the safetensors file of size bytes that r reads. A
// file that is not well-formed gives an error wrapping ErrFormat that names what is wrong. It
// allocates at most the header's length (bounded by size and 100 MB) plus the parsed entries.
func NewFile(r io.ReaderAt, size int64) (*File, error) {
	var n8 [8]byte
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrFormat, size)
	}
	if _, err := r.ReadAt(n8[:], 0); err != nil {
		return nil, fmt.Errorf("%w: header length: %w", ErrFormat, err)
	}
	n := binary.LittleEndian.Uint64(n8[:])
	if n > maxHeader || n > uint64(size-8) {
		return nil, fmt.Errorf("%w: header of %d bytes in a file of %d (at most %d)", ErrFormat, n, size, maxHeader)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	f := &File{r: r, byName: map[string]int{}}
	if err := f.parseHeader(header, 8+int64(n), size); err != nil {
		return nil, err
	}
	return f, nil
}

// parseHeader parses the JSON header of a file of size bytes whose data starts at dataOff.
func (f *File) parseHeader(header []byte, dataOff, size int64) error {
	dataLen := size - dataOff
	d := json.NewDecoder(bytes.NewReader(header))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: the header is not a JSON object", ErrFormat)
	}
	// begin and end of each tensor, in the data section, in header order.
	var ranges [][2]int64
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("%w: header: %w", ErrFormat, err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: header key %v", ErrFormat, tok)
		}
		if name == "__metadata__" {
			if f.meta != nil {
				return fmt.Errorf("%w: __metadata__ twice", ErrFormat)
			}
			if err := d.Decode(&f.meta); err != nil {
				return fmt.Errorf("%w: __metadata__: %w", ErrFormat, err)
			}
			if f.meta == nil {
				f.meta = map[string]string{}
			}
			continue
		}
		if _, dup := f.byName[name]; dup {
			return fmt.Errorf("%w: tensor %q twice", ErrFormat, name)
		}
		var e struct {
			DType   string        `json:"dtype"`
			Shape   []json.Number `json:"shape"`
			Offsets []json.Number `json:"data_offsets"`
		}
		if err := d.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: the header ends inside tensor %q", ErrFormat, name)
			}
			return fmt.Errorf("%w: tensor %q: %w", ErrFormat, name, err)
		}
		t, r, err := checkEntry(name, e.DType, e.Shape, e.Offsets, dataLen)
		if err != nil {
			return err
		}
		f.byName[name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
		ranges = append(ranges, r)
	}
	if _, err := d.Token(); err != nil { // the closing brace
		return fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the header's JSON object", ErrFormat)
	}
	// The byte ranges tile the data section: sorted by start, each begins where the previous
	// ended, the last ends at the end of the file (the reference implementation's check).
	order := make([]int, len(f.tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := ranges[a], ranges[b]
		if ra[0] != rb[0] {
			return cmpInt64(ra[0], rb[0])
		}
		return cmpInt64(ra[1], rb[1])
	})
	var end int64
	prev := -1
	for _, i := range order {
		r, name := ranges[i], f.tensors[i].Name
		switch {
		case r[0] < end:
			return fmt.Errorf("%w: tensors %q and %q overlap (bytes %d-%d and %d-%d)", ErrFormat, f.tensors[prev].Name, name, ranges[prev][0], end, r[0], r[1])
		case r[0] > end:
			return fmt.Errorf("%w: tensor %q starts at byte %d; the data before it ends at %d (a gap)", ErrFormat, name, r[0], end)
		}
		end, prev = r[1], i
	}
	if end != dataLen {
		return fmt.Errorf("%w: the tensors' data ends at byte %d of %d", ErrFormat, end, dataLen)
	}
	sorted := make([]TensorInfo, len(order))
	for k, i := range order {
		t := f.tensors[i]
		t.Offset += dataOff
		sorted[k] = t
		f.byName[t.Name] = k
	}
	f.tensors = sorted
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkEntry checks one header entry: a known dtype, non-negative dimensions whose product times
// the element size neither overflows nor differs from the byte range, a range inside the data.
// It returns the tensor (its Offset in the data section) and its range there.
func checkEntry(name, dtype string, shape, offsets []json.Number, dataLen int64) (TensorInfo, [2]int64, error) {
	var none [2]int64
	size, ok := dtypeSizes[dtype]
	if !ok {
		return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: unknown dtype %q", ErrFormat, name, dtype)
	}
	t := TensorInfo{Name: name, DType: dtype, Shape: make([]int, len(shape))}
	elems := uint64(1)
	for i, s := range shape {
		v, err := s.Int64()
		if err != nil || v < 0 {
			return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: dimension %q", ErrFormat, name, s)
		}
		hi, lo := bits.Mul64(elems, uint64(v))
		if hi != 0 || lo > math.MaxInt64/8 {
			return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: shape %v has more elements than a tensor can hold", ErrFormat, name, shape)
		}
		elems, t.Shape[i] = lo, int(v)
	}
	if len(offsets) != 2 {
		return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: data_offsets %v; want [begin, end]", ErrFormat, name, offsets)
	}
	b, err1 := offsets[0].Int64()
	e, err2 := offsets[1].Int64()
	if err1 != nil || err2 != nil || b < 0 || e < b || e > dataLen {
		return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: data_offsets %v outside the %d data bytes", ErrFormat, name, offsets, dataLen)
	}
	if want := elems * uint64(size); uint64(e-b) != want {
		return TensorInfo{}, none, fmt.Errorf("%w: tensor %q: %d bytes for %s %v, which takes %d", ErrFormat, name, e-b, dtype, shape, want)
	}
	t.Offset, t.Size = b, e-b
	return t, [2]int64{b, e}, nil
}

// Tensors returns the file's tensors in the order of their data in the file.
func (f *File) Tensors() []TensorInfo {
	return slices.Clone(f.tensors)
}

// Tensor returns the tensor named name, and whether the file holds one.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// Metadata returns a copy of the header's "__metadata__" (nil when the header has none).
func (f *File) Metadata() map[string]string {
	return maps.Clone(f.meta)
}

// chunks reads the bytes of the tensor name, whose values are to go into a destination of n
// elements, after checking that it exists and has n of them, and hands them to use a chunk of at
// most 32 KiB at a time (whole elements), with the index of the chunk's first element.
func (f *File) chunks(name string, n int, use func(t TensorInfo, b []byte, first int)) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("safetensors: no tensor %q", name)
	}
	if t.Len() != n {
		return fmt.Errorf("safetensors: tensor %q: %d values into %d", name, t.Len(), n)
	}
	size := int64(dtypeSizes[t.DType])
	buf := make([]byte, min(t.Size, 1<<15/size*size))
	for off := int64(0); off < t.Size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), t.Size-off)]
		if _, err := f.r.ReadAt(b, t.Offset+off); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		use(t, b, int(off/size))
	}
	return nil
}

// Float32s reads the tensor name into dst, which must have its number of elements (Len),
// converting F16 and BF16 exactly. A tensor of another dtype gives an error wrapping ErrFormat.
// It reads the file 32 KiB at a time.
func (f *File) Float32s(name string, dst []float32) error {
	if t, ok := f.Tensor(name); ok {
		switch t.DType {
		case "F32", "F16", "BF16":
		default:
			return fmt.Errorf("%w: tensor %q: dtype %s; want F32, F16 or BF16", ErrFormat, name, t.DType)
		}
	}
	return f.chunks(name, len(dst), func(t TensorInfo, raw []byte, first int) {
		for i := range len(raw) / dtypeSizes[t.DType] {
			switch t.DType {
			case "F32":
				dst[first+i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			case "BF16":
				dst[first+i] = half.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
			default:
				dst[first+i] = half.FP16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		}
	})
}

// Int64s reads the tensor name, of any integer dtype (I8 to I64, U8 to U64), into dst, which
// must have its number of elements (Len). A U64 value above math.MaxInt64 wraps to a negative
// one. A tensor of another dtype (BOOL among them) gives an error wrapping ErrFormat. It reads
// the file 32 KiB at a time.
func (f *File) Int64s(name string, dst []int64) error {
	t, ok := f.Tensor(name)
	if ok && t.DType[0] != 'I' && t.DType[0] != 'U' {
		return fmt.Errorf("%w: tensor %q: dtype %s; want an integer dtype", ErrFormat, name, t.DType)
	}
	return f.chunks(name, len(dst), func(t TensorInfo, raw []byte, first int) {
		size := dtypeSizes[t.DType]
		for i := range len(raw) / size {
			var v int64
			switch size {
			case 8:
				v = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			case 4:
				v = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			case 2:
				v = int64(int16(binary.LittleEndian.Uint16(raw[2*i:])))
			default:
				v = int64(int8(raw[i]))
			}
			if t.DType[0] == 'U' && size < 8 {
				v &= 1<<(8*size) - 1
			}
			dst[first+i] = v
		}
	})
}
