package train

import (
	"bytes"
	"context"
	"fmt"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/safetensors"
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
	var ordered []safetensors.Tensor
	for _, ps := range t.m.layerParams {
		for _, p := range ps {
			host := make([]float32, p.W.Len)
			if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), p.W.Buf, 4*p.W.Off); err != nil {
				return fmt.Errorf("train: export %s: %w", path, err)
			}
			ordered = append(ordered, safetensors.Tensor{Name: p.Name, Shape: p.Shape, F32: host})
			if prefix, last := splitLast(p.Name); last == "running_var" {
				n := t.state.Tracked[prefix]
				ordered = append(ordered, safetensors.Tensor{Name: prefix + ".num_batches_tracked", Shape: []int{}, I64: []int64{n}})
			}
		}
	}
	if err := t.wait(ctx); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	for _, d := range t.m.derived() {
		ordered = append(ordered, safetensors.Tensor{Name: d.Name, Shape: d.Shape, F32: d.F32, I64: d.I64})
	}
	meta := map[string]string{"format": "pt", "stoke_model": t.m.String()}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ordered, meta); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
	}
	return nil
}
