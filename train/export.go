package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/atomicfile"
)

// Export writes the model's weights and BatchNorm running statistics to path in the safetensors
// format (https://github.com/huggingface/safetensors: an 8-byte little-endian header length, a
// JSON header naming each tensor's dtype, shape and byte range, then the raw little-endian data),
// under the tensors' names: torchvision's state_dict names and layouts for the resnets (each
// BatchNorm also gets num_batches_tracked, the number of training steps (plus the count of the
// weights LoadWeights read, if any; a frozen BatchNorm, whose statistics did not move, keeps the
// count its weights came with), as torchvision's state_dict has it), so that
//
//	model = torchvision.models.resnet18(num_classes=K)
//	model.load_state_dict(safetensors.torch.load_file("model.safetensors"))
//
// works for a model trained on images over 32 px; ours ("1.linear.weight") for the others. The
// file is written atomically (a temporary file renamed over path), once the weights are read back
// from the device: if ctx ends first, nothing is written.
func (t *Trainer) Export(ctx context.Context, path string) error {
	// The state_dict's order: each layer's tensors in order, a BatchNorm's running statistics after
	// its parameters, then its step count.
	var ordered []stTensor
	for _, ps := range t.m.layerParams {
		for _, p := range ps {
			host := make([]float32, p.W.Len)
			if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), p.W.Buf, 4*p.W.Off); err != nil {
				return fmt.Errorf("train: export %s: %w", path, err)
			}
			ordered = append(ordered, stTensor{name: p.Name, dtype: "F32", shape: p.Shape, f32: host})
			if prefix, last := splitLast(p.Name); last == "running_var" {
				n := t.state.Tracked[prefix]
				ordered = append(ordered, stTensor{name: prefix + ".num_batches_tracked", dtype: "I64", shape: []int{}, i64: []int64{n}})
			}
		}
	}
	if err := t.wait(ctx); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	for _, d := range t.m.derived() {
		dtype := "F32"
		if d.I64 != nil {
			dtype = "I64"
		}
		ordered = append(ordered, stTensor{name: d.Name, dtype: dtype, shape: d.Shape, f32: d.F32, i64: d.I64})
	}
	meta := map[string]string{"format": "pt", "stoke_model": t.m.String()}
	var buf bytes.Buffer
	if err := writeSafetensors(&buf, ordered, meta); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	return nil
}

// stTensor is one tensor of a safetensors file: float32 values, or int64 ones (dtype I64).
type stTensor struct {
	name, dtype string
	shape       []int
	f32         []float32
	i64         []int64
}

func (t stTensor) bytes() int {
	if t.dtype == "I64" {
		return 8 * len(t.i64)
	}
	return 4 * len(t.f32)
}

// writeSafetensors writes the header (padded with spaces to a multiple of 8 bytes, so that the
// data is aligned) and the tensors' data in order.
func writeSafetensors(w io.Writer, tensors []stTensor, meta map[string]string) error {
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": meta}
	off := 0
	for _, t := range tensors {
		if _, dup := header[t.name]; dup {
			return fmt.Errorf("train: safetensors: tensor %q twice", t.name)
		}
		header[t.name] = entry{t.dtype, t.shape, [2]int{off, off + t.bytes()}}
		off += t.bytes()
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
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
		for _, v := range t.i64 {
			binary.LittleEndian.PutUint64(n[:], uint64(v))
			bw.Write(n[:])
		}
		for _, v := range t.f32 {
			binary.LittleEndian.PutUint32(n[:4], math.Float32bits(v))
			bw.Write(n[:4])
		}
	}
	return bw.Flush()
}
