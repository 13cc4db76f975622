// Package pth reads PyTorch's weights files as torch.save writes them (a .pth or .pt file: its zip
// archive, PyTorch 1.6 and later, which torchvision's and timm's published weights are): the
// state_dict they hold, as the tensors package safetensors writes, float32 or int64.
//
// The archive's data.pkl is a pickle: Read runs it on a machine that knows only what a
// state_dict is made of (an OrderedDict or dict, torch._utils._rebuild_tensor_v2 and
// _rebuild_parameter over typed storages, tuples, lists, numbers, strings), so a file cannot run
// code as torch.load(weights_only=False) would let it; any other object is an error naming it.
// A checkpoint that holds its state_dict under "state_dict", "model" or "model_state_dict" (timm's,
// torchvision's references', Lightning's) gives that one. Every size is checked against the
// archive's bytes before anything is allocated.
package pth

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/internal/half"
	"github.com/stoke-ml/stoke/safetensors"
)

// ErrFormat: the bytes are not a state_dict as torch.save writes it (not a zip archive of a
// pickle, an object a state_dict does not hold, a tensor outside its storage).
var ErrFormat = errors.New("bad PyTorch file")

// Zip reports whether head, a file's first bytes, start a zip archive (torch.save's format).
func Zip(head []byte) bool { return len(head) >= 4 && string(head[:4]) == "PK\x03\x04" }

// maxPickle bounds data.pkl, which a state_dict keeps small (names and shapes: a few MB for the
// largest models).
const maxPickle = 64 << 20

// storageTypes are the typed storages a tensor may lie in, their element size and the dtype
// safetensors writes them as.
var storageTypes = map[string]struct {
	size  int
	float bool
}{
	"FloatStorage": {4, true}, "HalfStorage": {2, true}, "BFloat16Storage": {2, true}, "DoubleStorage": {8, true},
	"LongStorage": {8, false}, "IntStorage": {4, false}, "ShortStorage": {2, false}, "CharStorage": {1, false},
	"ByteStorage": {1, false}, "BoolStorage": {1, false},
}

// Read reads the state_dict of the torch.save archive of size bytes in r, in its order: float
// tensors as F32 (F16, BF16 and F64 converted), integer and bool ones as I64.
func Read(r io.ReaderAt, size int64) ([]safetensors.Tensor, error) {
	z, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("pth: %w: not a zip archive: %v", ErrFormat, err)
	}
	files := map[string]*zip.File{}
	var pkl *zip.File
	for _, f := range z.File {
		files[f.Name] = f
		if path.Base(f.Name) == "data.pkl" && strings.Count(f.Name, "/") == 1 {
			pkl = f
		}
	}
	if pkl == nil {
		return nil, fmt.Errorf("pth: %w: no data.pkl: not torch.save's archive", ErrFormat)
	}
	dir := path.Dir(pkl.Name)
	b, err := readAll(pkl, maxPickle)
	if err != nil {
		return nil, err
	}
	u := &unpickler{b: b, memo: map[int]any{}}
	obj, err := u.run()
	if err != nil {
		return nil, fmt.Errorf("pth: %w: data.pkl: %w", ErrFormat, err)
	}
	sd, ok := obj.(*dict)
	for _, key := range []string{"state_dict", "model", "model_state_dict"} {
		if inner, isDict := sd.get(key).(*dict); ok && isDict {
			sd = inner
			break
		}
	}
	if !ok || len(sd.keys) == 0 {
		return nil, fmt.Errorf("pth: %w: it holds %s, not a state_dict (a dict of tensors)", ErrFormat, describe(obj))
	}
	storages := map[string][]byte{}
	var out []safetensors.Tensor
	var read, made int64 // storage elements read, tensor elements made: views of one storage are bounded

	for i, k := range sd.keys {
		name, isName := k.(string)
		t, isTensor := sd.vals[i].(*tensor)
		if !isName || !isTensor {
			return nil, fmt.Errorf("pth: %w: the state_dict holds %s under %s, not a tensor", ErrFormat, describe(sd.vals[i]), describe(k))
		}
		if n := t.len(); n > t.storage.numel && n > 1 {
			return nil, fmt.Errorf("pth: %w: tensor %s of shape %v has more elements than its storage of %d (an expanded view: save it contiguous)",
				ErrFormat, name, t.shape, t.storage.numel)
		}
		data, ok := storages[t.storage.key]
		if !ok {
			f := files[dir+"/data/"+t.storage.key]
			if f == nil {
				return nil, fmt.Errorf("pth: %w: tensor %s: no storage %s in the archive", ErrFormat, name, t.storage.key)
			}
			if f.Method != zip.Store { // torch.save stores its records: a compressed one could be a bomb
				return nil, fmt.Errorf("pth: %w: storage %s is compressed; torch.save writes storages stored", ErrFormat, t.storage.key)
			}
			if data, err = readAll(f, int64(t.storage.numel)*int64(storageTypes[t.storage.kind].size)); err != nil {
				return nil, err
			}
			storages[t.storage.key] = data
			read += int64(t.storage.numel)
		}
		if made += int64(t.len()); made > 4*read+1<<20 {
			return nil, fmt.Errorf("pth: %w: its tensors view %d elements of storages of %d: views that repeat their storages", ErrFormat, made, read)
		}
		st, err := t.values(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// readAll reads a file of the archive, at most limit bytes (its declared size is checked first).
func readAll(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("pth: %w: %s holds %d bytes; at most %d expected", ErrFormat, f.Name, f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("pth: %w: %s: %v", ErrFormat, f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil, fmt.Errorf("pth: %w: %s: %d bytes read (%v)", ErrFormat, f.Name, len(b), err)
	}
	return b, nil
}

// storage is a typed storage a persistent id names: its kind ("FloatStorage"), its file in the
// archive's data/ and its element count.
type storage struct {
	kind, key string
	numel     int
}

// tensor is a view of a storage (torch._utils._rebuild_tensor_v2's arguments).
type tensor struct {
	storage       *storage
	offset        int
	shape, stride []int
}

// len is the number of t's elements, 0 for a shape too large (values refuses it).
func (t *tensor) len() int {
	n := 1
	for _, d := range t.shape {
		if d > 0 && n > math.MaxInt32/d {
			return 0
		}
		n *= d
	}
	return n
}

// values reads t's elements from its storage's bytes, in row-major order.
func (t *tensor) values(name string, data []byte) (safetensors.Tensor, error) {
	st := storageTypes[t.storage.kind]
	n := 1
	for i, d := range t.shape {
		if d < 0 || t.stride[i] < 0 || (d > 0 && n > math.MaxInt32/d) {
			return safetensors.Tensor{}, fmt.Errorf("pth: %w: tensor %s: shape %v, stride %v", ErrFormat, name, t.shape, t.stride)
		}
		n *= d
	}
	// The last element's index must lie in the storage.
	last := t.offset
	for i, d := range t.shape {
		if d > 0 {
			last += (d - 1) * t.stride[i]
		}
	}
	if t.offset < 0 || (n > 0 && (last >= t.storage.numel || (last+1)*st.size > len(data))) {
		return safetensors.Tensor{}, fmt.Errorf("pth: %w: tensor %s of shape %v at offset %d, stride %v lies outside its storage of %d", ErrFormat, name, t.shape, t.offset, t.stride, t.storage.numel)
	}
	out := safetensors.Tensor{Name: name, Shape: slices.Clone(t.shape)}
	if st.float {
		out.F32 = make([]float32, n)
	} else {
		out.I64 = make([]int64, n)
	}
	idx := make([]int, len(t.shape))
	for k := range n {
		at := t.offset
		for i, j := range idx {
			at += j * t.stride[i]
		}
		b := data[at*st.size:]
		switch t.storage.kind {
		case "FloatStorage":
			out.F32[k] = math.Float32frombits(binary.LittleEndian.Uint32(b))
		case "HalfStorage":
			out.F32[k] = half.FP16ToF32(binary.LittleEndian.Uint16(b))
		case "BFloat16Storage":
			out.F32[k] = half.BF16ToF32(binary.LittleEndian.Uint16(b))
		case "DoubleStorage":
			out.F32[k] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
		case "LongStorage":
			out.I64[k] = int64(binary.LittleEndian.Uint64(b))
		case "IntStorage":
			out.I64[k] = int64(int32(binary.LittleEndian.Uint32(b)))
		case "ShortStorage":
			out.I64[k] = int64(int16(binary.LittleEndian.Uint16(b)))
		case "CharStorage":
			out.I64[k] = int64(int8(b[0]))
		default: // ByteStorage, BoolStorage
			out.I64[k] = int64(b[0])
		}
		for i := len(idx) - 1; i >= 0; i-- { // the next index, row-major
			if idx[i]++; idx[i] < t.shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

// describe names a pickled value for an error.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case *dict:
		return fmt.Sprintf("a dict of %d entries", len(v.keys))
	case *tensor:
		return "a tensor"
	case *opaque:
		return "a " + v.class + ", which a state_dict does not hold"
	case *list:
		return fmt.Sprintf("a list of %d", len(v.items))
	case tuple:
		return fmt.Sprintf("a tuple of %d", len(v))
	case nil:
		return "None"
	}
	return fmt.Sprintf("a %T", v)
}
