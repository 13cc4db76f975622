package train

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/stoke-ml/stoke/internal/half"
)

// maxSTHeader bounds the JSON header, as the safetensors reference implementation does (100 MB):
// the header is read whole before anything else.
const maxSTHeader = 100 << 20

// stDTypes are the element sizes of the dtypes the safetensors format defines.
var stDTypes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// stInfo is one tensor of a parsed safetensors header.
type stInfo struct {
	name       string
	dtype      string
	shape      []int
	elems      int
	begin, end int64 // byte range in the data section
}

// stFile is a safetensors file whose header has been parsed and checked: every tensor's byte
// range lies in the data section, fits its dtype and shape, and the ranges tile the data exactly.
type stFile struct {
	r       io.ReaderAt
	dataOff int64
	tensors map[string]*stInfo
	order   []string // in data order
	meta    map[string]string
}

// parseSafetensors reads and checks the header of the size bytes of r. It allocates at most the
// header's length (bounded by the file's size and maxSTHeader) plus the parsed entries.
func parseSafetensors(r io.ReaderAt, size int64) (*stFile, error) {
	var n8 [8]byte
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrSafetensors, size)
	}
	if _, err := r.ReadAt(n8[:], 0); err != nil {
		return nil, fmt.Errorf("%w: header length: %w", ErrSafetensors, err)
	}
	n := binary.LittleEndian.Uint64(n8[:])
	if n > maxSTHeader || n > uint64(size-8) {
		return nil, fmt.Errorf("%w: header of %d bytes in a file of %d (at most %d)", ErrSafetensors, n, size, maxSTHeader)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrSafetensors, err)
	}
	f := &stFile{r: r, dataOff: 8 + int64(n), tensors: map[string]*stInfo{}}
	if err := f.parseHeader(header, size-f.dataOff); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *stFile) parseHeader(header []byte, dataLen int64) error {
	d := json.NewDecoder(bytes.NewReader(header))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: the header is not a JSON object", ErrSafetensors)
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("%w: header: %w", ErrSafetensors, err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: header key %v", ErrSafetensors, tok)
		}
		if name == "__metadata__" {
			if f.meta != nil {
				return fmt.Errorf("%w: __metadata__ twice", ErrSafetensors)
			}
			if err := d.Decode(&f.meta); err != nil {
				return fmt.Errorf("%w: __metadata__: %w", ErrSafetensors, err)
			}
			if f.meta == nil {
				f.meta = map[string]string{}
			}
			continue
		}
		if _, dup := f.tensors[name]; dup {
			return fmt.Errorf("%w: tensor %q twice", ErrSafetensors, name)
		}
		var e struct {
			DType   string        `json:"dtype"`
			Shape   []json.Number `json:"shape"`
			Offsets []json.Number `json:"data_offsets"`
		}
		if err := d.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: the header ends inside tensor %q", ErrSafetensors, name)
			}
			return fmt.Errorf("%w: tensor %q: %w", ErrSafetensors, name, err)
		}
		t, err := checkSTEntry(name, e.DType, e.Shape, e.Offsets, dataLen)
		if err != nil {
			return err
		}
		f.tensors[name] = t
		f.order = append(f.order, name)
	}
	if _, err := d.Token(); err != nil { // the closing brace
		return fmt.Errorf("%w: header: %w", ErrSafetensors, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the header's JSON object", ErrSafetensors)
	}
	// The byte ranges tile the data section: sorted by start, each begins where the previous
	// ended, the last ends at the end of the file (the reference implementation's check).
	slices.SortStableFunc(f.order, func(a, b string) int {
		ta, tb := f.tensors[a], f.tensors[b]
		if ta.begin != tb.begin {
			return cmpInt64(ta.begin, tb.begin)
		}
		return cmpInt64(ta.end, tb.end)
	})
	var end int64
	prev := ""
	for _, name := range f.order {
		t := f.tensors[name]
		switch {
		case t.begin < end:
			return fmt.Errorf("%w: tensors %q and %q overlap (bytes %d-%d and %d-%d)", ErrSafetensors, prev, name, f.tensors[prev].begin, end, t.begin, t.end)
		case t.begin > end:
			return fmt.Errorf("%w: tensor %q starts at byte %d; the data before it ends at %d (a gap)", ErrSafetensors, name, t.begin, end)
		}
		end, prev = t.end, name
	}
	if end != dataLen {
		return fmt.Errorf("%w: the tensors' data ends at byte %d of %d", ErrSafetensors, end, dataLen)
	}
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

// checkSTEntry checks one header entry: a known dtype, non-negative dimensions whose product times the
// element size neither overflows nor differs from the byte range, a range inside the data.
func checkSTEntry(name, dtype string, shape, offsets []json.Number, dataLen int64) (*stInfo, error) {
	size, ok := stDTypes[dtype]
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q: unknown dtype %q", ErrSafetensors, name, dtype)
	}
	t := &stInfo{name: name, dtype: dtype, shape: make([]int, len(shape))}
	elems := uint64(1)
	for i, s := range shape {
		v, err := s.Int64()
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: tensor %q: dimension %q", ErrSafetensors, name, s)
		}
		hi, lo := bits.Mul64(elems, uint64(v))
		if hi != 0 || lo > math.MaxInt64/8 {
			return nil, fmt.Errorf("%w: tensor %q: shape %v has more elements than a tensor can hold", ErrSafetensors, name, shape)
		}
		elems, t.shape[i] = lo, int(v)
	}
	t.elems = int(elems)
	if len(offsets) != 2 {
		return nil, fmt.Errorf("%w: tensor %q: data_offsets %v; want [begin, end]", ErrSafetensors, name, offsets)
	}
	b, err1 := offsets[0].Int64()
	e, err2 := offsets[1].Int64()
	if err1 != nil || err2 != nil || b < 0 || e < b || e > dataLen {
		return nil, fmt.Errorf("%w: tensor %q: data_offsets %v outside the %d data bytes", ErrSafetensors, name, offsets, dataLen)
	}
	if want := elems * uint64(size); uint64(e-b) != want {
		return nil, fmt.Errorf("%w: tensor %q: %d bytes for %s %v, which takes %d", ErrSafetensors, name, e-b, dtype, shape, want)
	}
	t.begin, t.end = b, e
	return t, nil
}

// float32s reads tensor t into dst (len(dst) == t.elems), converting F16 and BF16 exactly; other
// dtypes are refused. It allocates t's bytes, which the caller has admitted by sizing dst.
func (f *stFile) float32s(dst []float32, t *stInfo) error {
	if len(dst) != t.elems {
		return fmt.Errorf("safetensors: tensor %q: %d values into %d", t.name, t.elems, len(dst))
	}
	size := stDTypes[t.dtype]
	switch t.dtype {
	case "F32", "F16", "BF16":
	default:
		return fmt.Errorf("%w: tensor %q: dtype %s; weights must be F32, F16 or BF16", ErrSafetensors, t.name, t.dtype)
	}
	raw := make([]byte, t.end-t.begin)
	if _, err := f.r.ReadAt(raw, f.dataOff+t.begin); err != nil {
		return fmt.Errorf("safetensors: tensor %q: %w", t.name, err)
	}
	for i := range dst {
		switch size {
		case 4:
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		default:
			h := binary.LittleEndian.Uint16(raw[2*i:])
			if t.dtype == "BF16" {
				dst[i] = half.BF16ToF32(h)
			} else {
				dst[i] = half.FP16ToF32(h)
			}
		}
	}
	return nil
}
