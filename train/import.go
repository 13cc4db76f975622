package train

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/stoke-ml/stoke/safetensors"
	"github.com/stoke-ml/stoke/weights"
)

// ErrSafetensors: a file that is not a well-formed safetensors file (a header longer than the
// file, bad JSON, an unknown dtype, a shape that does not fit its byte range, offsets that
// overlap, leave a gap or run past the end), or weights of a dtype other than F32, F16 and BF16.
// It is package safetensors' ErrFormat.
var ErrSafetensors = safetensors.ErrFormat

// LoadWeights sets the model's weights and BatchNorm running statistics from the weights file at
// path (weights.Open: safetensors, or torch.save's .pth), matching tensors by name as
// weights.Load does: torchvision's and timm's state_dict names for the zoo's models (so a
// torchvision model saved with safetensors.torch.save_file loads as it is), the names Export
// writes for every model, strictly unless opts relax it; the head of opts.NewHead is the model's
// last layer with parameters (a resnet's fc, a ViT's heads.head). A BatchNorm's
// num_batches_tracked is kept for Export, which adds the steps trained since. Errors wrap
// ErrMismatch (listing every missing, unexpected and mis-shaped tensor at once),
// ErrSafetensors, pth.ErrFormat or ErrNonFinite, and name the file. On error the trainer's
// weights are unchanged, but for one: ctx ending during the final wait for the device, when the
// uploads are enqueued and complete on the stream (the error then wraps ctx's). The optimizer's
// state is left as it is (zero on a fresh trainer).
//
// Memory: from safetensors, the file's header (at most its size and 100 MB) and one host copy
// of the model's tensors, whatever the file claims, and of each file tensor a Resampler
// resamples; from a .pth, which is read whole, its storages and their float32 values besides
// (about three times the model's size for float32 weights, bounded by the file's size).
func (t *Trainer) LoadWeights(ctx context.Context, path string, opts weights.Options) (*weights.Report, error) {
	f, closer, err := weights.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: weights %s: %w", path, err)
	}
	defer closer.Close()
	all, head := t.m.tensors(), t.m.head()
	tensors := make([]weights.Tensor, len(all))
	for i, p := range all {
		tensors[i] = weights.Tensor{Name: p.Name, Shape: p.Shape, Head: head[p]}
	}
	got, err := weights.Load(f, t.m.module, tensors, opts)
	if errors.Is(err, ErrMismatch) {
		err = fmt.Errorf("%w: model %s: %s%s", ErrMismatch, t.m.name, got.Report.Problems(), t.m.stemHint(f))
	}
	if err != nil {
		return got.Report, fmt.Errorf("train: weights %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil { // before the first upload: a cancelled call changes nothing
		return got.Report, fmt.Errorf("train: weights %s: %w", path, err)
	}
	t.m.thaw()
	for i, v := range got.Values {
		if v != nil {
			if err := upload(t.s, all[i].W, v); err != nil {
				return got.Report, fmt.Errorf("train: weights %s: %s: %w", path, all[i].Name, err)
			}
		}
	}
	// The uploads are enqueued: the stream completes them whatever ctx does.
	maps.Copy(t.state.Tracked, got.Tracked)
	if err := t.wait(ctx); err != nil {
		return got.Report, fmt.Errorf("train: weights %s: %w", path, err)
	}
	return got.Report, nil
}

// stemHint explains a conv1.weight whose file shape is the 7x7 stem of a resnet that takes large
// images while the model, taking images of at most 32 px a side, has the small-image 3x3 stem
// (torchResNet); "" otherwise.
func (m *Model) stemHint(f *safetensors.File) string {
	ft, ok := f.Tensor("conv1.weight")
	if !ok || len(ft.Shape) != 4 || ft.Shape[2] != 7 {
		return ""
	}
	for _, p := range m.tensors() {
		if p.Name == "conv1.weight" && len(p.Shape) == 4 && p.Shape[2] == 3 {
			return fmt.Sprintf("; conv1: the model takes %dx%d images, and at most 32 px a side a resnet has the small-image stem "+
				"(a 3x3 conv1, no max pooling); these weights are for the 7x7 stem of larger images (torchvision's): give the model images "+
				"larger than 32 px a side", m.in.H, m.in.W)
		}
	}
	return ""
}
