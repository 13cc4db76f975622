package train

import (
	"bytes"
	"context"
	"fmt"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/safetensors"
	"github.com/stoke-ml/stoke/weights"
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
	ordered, err := t.StateDict(ctx)
	if err != nil {
		return fmt.Errorf("train: export %s: %w", path, err)
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

// extraTensors are the tensors a PyTorch twin's state_dict holds beyond the model's: each
// BatchNorm's num_batches_tracked (its count of training batches) and the module's derived
// buffers, in state_dict order.
func (t *Trainer) extraTensors() []safetensors.Tensor {
	var out []safetensors.Tensor
	for _, p := range t.m.all {
		if n, ok := t.numBatchesTracked(p); ok {
			out = append(out, n)
		}
	}
	for _, d := range weights.DerivedTensors(t.m.module) {
		out = append(out, safetensors.Tensor{Name: d.Name, Shape: d.Shape, F32: d.F32, I64: d.I64})
	}
	return out
}

// numBatchesTracked is the num_batches_tracked of the BatchNorm whose running variance p is.
func (t *Trainer) numBatchesTracked(p *Param) (safetensors.Tensor, bool) {
	prefix, last := splitLast(p.Name)
	if last != "running_var" {
		return safetensors.Tensor{}, false
	}
	return safetensors.Tensor{Name: prefix + ".num_batches_tracked", Shape: []int{}, I64: []int64{t.state.Tracked[prefix]}}, true
}

// StateDict returns the model's state_dict as PyTorch's model.state_dict() gives it, read back
// from the device: each tensor's values in state_dict order (float32), each BatchNorm's
// num_batches_tracked after its running statistics and the module's derived buffers (int64). It
// is what Export writes.
func (t *Trainer) StateDict(ctx context.Context) ([]safetensors.Tensor, error) {
	var sd []safetensors.Tensor
	for _, p := range t.m.all {
		host := make([]float32, p.W.Len)
		if len(host) > 0 {
			if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), p.W.Buf, 4*p.W.Off); err != nil {
				return nil, err
			}
		}
		sd = append(sd, safetensors.Tensor{Name: p.Name, Shape: p.Shape, F32: host})
		if n, ok := t.numBatchesTracked(p); ok {
			sd = append(sd, n)
		}
	}
	if err := t.wait(ctx); err != nil {
		return nil, err
	}
	for _, d := range weights.DerivedTensors(t.m.module) {
		sd = append(sd, safetensors.Tensor{Name: d.Name, Shape: d.Shape, F32: d.F32, I64: d.I64})
	}
	return sd, nil
}
