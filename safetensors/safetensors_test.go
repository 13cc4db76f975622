package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

// stBytes assembles a safetensors file from its JSON header and data, unchecked.
func stBytes(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func parse(b []byte) (*File, error) {
	return NewFile(bytes.NewReader(b), int64(len(b)))
}

// TestHostile: each malformed file gives ErrFormat naming what is wrong.
func TestHostile(t *testing.T) {
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header past the end", append(huge, "{}"...), "header of 1099511627776 bytes in a file of 10"},
		{"not JSON", stBytes(`{"a":`, nil), `the header ends inside tensor "a"`},
		{"not an object", stBytes(`[1,2]`, nil), "not a JSON object"},
		{"trailing", stBytes(`{} {}`, nil), "data after the header"},
		{"unknown dtype", stBytes(`{"w":{"dtype":"F48","shape":[1],"data_offsets":[0,6]}}`, make([]byte, 6)), `tensor "w": unknown dtype "F48"`},
		{"negative dim", stBytes(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4)), `tensor "w": dimension "-1"`},
		{"overflowing shape", stBytes(`{"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}}`, nil),
			`tensor "w": shape [4294967296 4294967296 2] has more elements`},
		{"size mismatch", stBytes(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), `tensor "w": 4 bytes for F32 [2], which takes 8`},
		{"past the end", stBytes(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)),
			`tensor "w": data_offsets [0 8] outside the 4 data bytes`},
		{"overlap", stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`,
			make([]byte, 8)), `tensors "a" and "b" overlap (bytes 0-8 and 4-8)`},
		{"gap", stBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), `tensor "a" starts at byte 4`},
		{"short data", stBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)), "ends at byte 4 of 8"},
		{"duplicate", stBytes(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`,
			nil), `tensor "a" twice`},
		{"two offsets", stBytes(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0]}}`, nil), `tensor "a": data_offsets`},
		{"bad metadata", stBytes(`{"__metadata__":{"x":1}}`, nil), "__metadata__"},
		{"metadata twice", stBytes(`{"__metadata__":{},"__metadata__":{}}`, nil), "__metadata__ twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.file)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewFile = %v; want ErrFormat with %q", err, tc.want)
			}
		})
	}
}

// TestDataOrder: Tensors lists the tensors in the order of their data, whatever the header's
// order; Offset counts from the start of the file.
func TestDataOrder(t *testing.T) {
	hdr := `{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"__metadata__":{"k":"v"},"a":{"dtype":"I8","shape":[2,2],"data_offsets":[0,4]}}`
	f, err := parse(stBytes(hdr, make([]byte, 8)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range f.Tensors() {
		names = append(names, ti.Name)
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Tensors() in the order %v; want [a b]", names)
	}
	b, ok := f.Tensor("b")
	if !ok || b.DType != "F32" || !slices.Equal(b.Shape, []int{1}) || b.Offset != int64(8+len(hdr)+4) || b.Size != 4 || b.Len() != 1 {
		t.Errorf("Tensor(b) = %+v, %v", b, ok)
	}
	if _, ok := f.Tensor("c"); ok {
		t.Error("Tensor(c) found")
	}
	if m := f.Metadata(); len(m) != 1 || m["k"] != "v" {
		t.Errorf("Metadata() = %v", m)
	}
	if err := f.Float32s("c", nil); err == nil || errors.Is(err, ErrFormat) {
		t.Errorf("Float32s of a missing tensor: %v; want an error, not ErrFormat", err)
	}
	if err := f.Float32s("b", make([]float32, 2)); err == nil || !strings.Contains(err.Error(), "1 values into 2") {
		t.Errorf("Float32s into a slice of another length: %v", err)
	}
}

// TestFloat32s: F16 and BF16 convert exactly (normals, subnormals, the largest half, infinities,
// a negative zero); other dtypes are refused with ErrFormat naming the tensor.
func TestFloat32s(t *testing.T) {
	halves := []uint16{0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x8000} // 1, -2, 2^-24, 65504, +Inf, -0
	wantH := []float32{1, -2, 1.0 / (1 << 24), 65504, float32(math.Inf(1)), float32(math.Copysign(0, -1))}
	bf := []uint16{0x3f80, 0xc0a0} // 1, -5
	wantB := []float32{1, -5}
	var data []byte
	for _, h := range append(halves, bf...) {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-1.5))
	data = append(data, make([]byte, 8)...)
	f, err := parse(stBytes(`{"h":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},`+
		`"f":{"dtype":"F32","shape":[],"data_offsets":[16,20]},"d":{"dtype":"F64","shape":[1],"data_offsets":[20,28]}}`, data))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]float32{"h": wantH, "b": wantB, "f": {-1.5}} {
		got := make([]float32, len(want))
		if err := f.Float32s(name, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s[%d] = %v; want %v", name, i, got[i], want[i])
			}
		}
	}
	if err := f.Float32s("d", make([]float32, 1)); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"d": dtype F64`) {
		t.Errorf("Float32s of F64: %v; want ErrFormat naming the tensor", err)
	}
}

// TestInt64s: every integer dtype reads as int64, signed ones sign-extended, unsigned ones not;
// floats and BOOL are refused with ErrFormat.
func TestInt64s(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		data  []byte
		want  int64
	}{
		{"I8", []byte{0xfe}, -2},
		{"U8", []byte{0xfe}, 254},
		{"I16", []byte{0xfe, 0xff}, -2},
		{"U16", []byte{0xfe, 0xff}, 65534},
		{"I32", []byte{0xfe, 0xff, 0xff, 0xff}, -2},
		{"U32", []byte{0xfe, 0xff, 0xff, 0xff}, 1<<32 - 2},
		{"I64", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, -2},
		{"U64", []byte{0x02, 0, 0, 0, 0, 0, 0, 0x01}, 1<<56 + 2},
		{"BOOL", []byte{1}, 0},
		{"F32", []byte{0, 0, 0x80, 0x3f}, 0},
	} {
		hdr := `{"x":{"dtype":"` + tc.dtype + `","shape":[1],"data_offsets":[0,` + string(rune('0'+len(tc.data))) + `]}}`
		f, err := parse(stBytes(hdr, tc.data))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int64, 1)
		err = f.Int64s("x", got)
		if tc.dtype == "BOOL" || tc.dtype == "F32" {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "dtype "+tc.dtype) {
				t.Errorf("%s: %v; want ErrFormat naming the dtype", tc.dtype, err)
			}
			continue
		}
		if err != nil || got[0] != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.dtype, got[0], err, tc.want)
		}
	}
}

// TestWriteRoundTrip: what Write writes reads back, with its metadata, aligned and in order; the
// same tensors give the same bytes.
func TestWriteRoundTrip(t *testing.T) {
	tensors := []Tensor{
		{Name: "z.weight", Shape: []int{2, 2}, F32: []float32{1, -2, float32(math.Inf(-1)), 0.5}},
		{Name: "a.num_batches_tracked", Shape: []int{}, I64: []int64{-7}},
		{Name: "empty", Shape: []int{0, 3}, F32: []float32{}},
		{Name: "scalar", F32: []float32{3}},
	}
	var b1, b2 bytes.Buffer
	if err := Write(&b1, tensors, map[string]string{"format": "pt", "a<b": "c&d"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b2, tensors, map[string]string{"a<b": "c&d", "format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Error("the same tensors wrote different bytes")
	}
	raw := b1.Bytes()
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header of %d bytes; want a multiple of 8", n)
	}
	f, err := parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m := f.Metadata(); m["format"] != "pt" || m["a<b"] != "c&d" {
		t.Errorf("metadata %v", m)
	}
	got := f.Tensors()
	if len(got) != len(tensors) {
		t.Fatalf("%d tensors; want %d", len(got), len(tensors))
	}
	for i, want := range tensors {
		g := got[i]
		if g.Name != want.Name || g.DType != want.dtype() || !slices.Equal(g.Shape, want.Shape) && len(want.Shape)+len(g.Shape) > 0 {
			t.Errorf("tensor %d: %+v; want %+v", i, g, want)
		}
		if want.I64 != nil {
			v := make([]int64, g.Len())
			if err := f.Int64s(g.Name, v); err != nil || !slices.Equal(v, want.I64) {
				t.Errorf("%s = %v, %v; want %v", g.Name, v, err, want.I64)
			}
			continue
		}
		v := make([]float32, g.Len())
		if err := f.Float32s(g.Name, v); err != nil || !slices.Equal(v, want.F32) {
			t.Errorf("%s = %v, %v; want %v", g.Name, v, err, want.F32)
		}
	}
	if !bytes.Contains(raw, []byte(`"scalar":{"dtype":"F32","shape":[],`)) {
		t.Errorf("a nil shape is not written as []: %s", raw[8:])
	}
	var nometa bytes.Buffer
	if err := Write(&nometa, tensors[:1], nil); err != nil || bytes.Contains(nometa.Bytes(), []byte("__metadata__")) {
		t.Errorf("Write without metadata: %v, %q", err, nometa.Bytes())
	}
}

// TestWriteFill: tensors whose values Fill gives when the write reaches them give the bytes of the
// same values given, each Fill called once, in order; a Fill's error, or its values of another
// length, ends the write naming the tensor.
func TestWriteFill(t *testing.T) {
	given := []Tensor{
		{Name: "b", Shape: []int{2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "n", Shape: []int{}, I64: []int64{9}},
		{Name: "a", Shape: []int{4}, F32: []float32{-1, 0.5, 7, 8}},
	}
	var calls []string
	filled := slices.Clone(given)
	for i := range filled {
		if v := filled[i].F32; v != nil {
			name := filled[i].Name
			filled[i].F32 = nil
			filled[i].Fill = func() ([]float32, error) {
				calls = append(calls, name)
				return slices.Clone(v), nil
			}
		}
	}
	var want, got bytes.Buffer
	if err := Write(&want, given, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&got, filled, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || !slices.Equal(calls, []string{"b", "a"}) {
		t.Errorf("filled write differs from the given values' (Fill calls %v)", calls)
	}
	boom := errors.New("boom")
	filled[2].Fill = func() ([]float32, error) { return nil, boom }
	if err := Write(io.Discard, filled, nil); !errors.Is(err, boom) || !strings.Contains(err.Error(), `tensor "a"`) {
		t.Errorf("a failing Fill: %v; want its error naming the tensor", err)
	}
	filled[2].Fill = func() ([]float32, error) { return make([]float32, 3), nil }
	if err := Write(io.Discard, filled, nil); err == nil || !strings.Contains(err.Error(), `tensor "a": 3 values for shape [4]`) {
		t.Errorf("a Fill of 3 values for 4: %v; want an error naming the tensor", err)
	}
}

// TestWriteRefuses: a tensor Write cannot write as asked is an error, and nothing is written.
func TestWriteRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"twice", []Tensor{{Name: "a", Shape: []int{1}, F32: []float32{1}}, {Name: "a", Shape: []int{1}, F32: []float32{1}}}, `tensor "a" twice`},
		{"metadata key", []Tensor{{Name: "__metadata__", Shape: []int{1}, F32: []float32{1}}}, "__metadata__"},
		{"both", []Tensor{{Name: "a", Shape: []int{1}, F32: []float32{1}, I64: []int64{1}}}, "values of two kinds"},
		{"fill and values", []Tensor{{Name: "a", Shape: []int{1}, F32: []float32{1}, Fill: func() ([]float32, error) { return nil, nil }}}, "values of two kinds"},
		{"short", []Tensor{{Name: "a", Shape: []int{2, 2}, F32: []float32{1, 2, 3}}}, `tensor "a": 3 values for shape [2 2]`},
		{"negative", []Tensor{{Name: "a", Shape: []int{-1}}}, `tensor "a": shape [-1]`},
	} {
		var b bytes.Buffer
		if err := Write(&b, tc.tensors, nil); err == nil || !strings.Contains(err.Error(), tc.want) || b.Len() != 0 {
			t.Errorf("%s: %v, %d bytes written; want an error with %q and nothing written", tc.name, err, b.Len(), tc.want)
		}
	}
}

// FuzzNewFile: no input makes the parser panic, allocate past the file's size, or accept ranges
// that do not tile the data; every tensor of an accepted file reads as its dtype allows.
func FuzzNewFile(f *testing.F) {
	f.Add(stBytes(`{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},`+
		`"b":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}`, make([]byte, 10)))
	f.Add(stBytes(`{"w":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]},"n":{"dtype":"I64","shape":[],"data_offsets":[4,12]}}`, make([]byte, 12)))
	f.Add(stBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add(stBytes(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil))
	f.Add(stBytes(`{"i":{"dtype":"U16","shape":[3],"data_offsets":[0,6]},"j":{"dtype":"I8","shape":[2],"data_offsets":[6,8]}}`, make([]byte, 8)))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 1<<62), "{}"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := parse(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		var total int64
		for _, st := range sf.Tensors() {
			total += st.Size
			switch st.DType[0] {
			case 'F', 'B':
				err = sf.Float32s(st.Name, make([]float32, st.Len()))
				if want := st.DType == "F32" || st.DType == "F16" || st.DType == "BF16"; want != (err == nil) {
					t.Fatalf("%s (%s): %v", st.Name, st.DType, err)
				}
			default:
				if err := sf.Int64s(st.Name, make([]int64, st.Len())); err != nil {
					t.Fatalf("%s: %v", st.Name, err)
				}
			}
		}
		if dataOff := 8 + int64(binary.LittleEndian.Uint64(b)); dataOff+total != int64(len(b)) {
			t.Fatalf("tensors cover %d of %d data bytes", total, int64(len(b))-dataOff)
		}
	})
}
