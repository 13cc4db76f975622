package train

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/pth"
	"github.com/stoke-ml/stoke/safetensors"
)

// ErrSafetensors: a file that is not a well-formed safetensors file (a header longer than the
// file, bad JSON, an unknown dtype, a shape that does not fit its byte range, offsets that
// overlap, leave a gap or run past the end), or weights of a dtype other than F32, F16 and BF16.
// It is package safetensors' ErrFormat.
var ErrSafetensors = safetensors.ErrFormat

// LoadOptions say how LoadWeights matches a file's tensors with the model's. The zero value is
// strict, as PyTorch's load_state_dict.
type LoadOptions struct {
	// Partial loads the tensors whose name and shape match and reports the others in the
	// WeightsReport instead of failing (load_state_dict(strict=False), which here also passes
	// over mis-shaped tensors instead of failing on them).
	Partial bool
	// NewHead leaves the classifier head (the tensors of the model's last layer with parameters,
	// or of the last linear layer of a module of package nn: a resnet's fc, a ViT's heads.head)
	// at its fresh initialization when the file's head has another shape or is absent (weights trained for another number of classes), as torchvision fine-tuning's
	// model.fc = nn.Linear(...) does. The other tensors are matched as Partial says.
	NewHead bool
	// AllowNonFinite loads tensors that hold NaN or infinite values, which LoadWeights otherwise
	// refuses (ErrNonFinite, naming the file and the tensor): such weights predict one class for
	// every input.
	AllowNonFinite bool
}

// WeightsReport says what LoadWeights did. Names are the model's tensor names.
type WeightsReport struct {
	// Loaded are the model's tensors set from the file.
	Loaded []string
	// Missing are the model's tensors the file lacks; Unexpected the file's tensors the model
	// lacks (a BatchNorm's num_batches_tracked is accepted and not listed); Mismatched the
	// tensors both have with different shapes ("fc.weight: file [10 512], model [3 512]").
	Missing, Unexpected, Mismatched []string
	// NewHead are the head's tensors left at their fresh initialization (LoadOptions.NewHead).
	NewHead []string
	// Resampled are the loaded tensors made from a file tensor of another shape by their module
	// (a Resampler: a ViT's position embeddings for another image size), with both shapes.
	Resampled []string
}

func (r *WeightsReport) problems() string {
	var parts []string
	for _, g := range []struct {
		what  string
		names []string
	}{{"missing", r.Missing}, {"unexpected", r.Unexpected}, {"mis-shaped", r.Mismatched}} {
		if len(g.names) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(g.names), g.what, listSome(g.names)))
		}
	}
	return strings.Join(parts, "; ")
}

// maxListed is how many names an error lists of a longer list (a file of 200,000 tensors made
// a one-line error of 1.69 MB).
const maxListed = 10

// listSome joins the first maxListed names and counts the others.
func listSome(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
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

// LoadWeights sets the model's weights and BatchNorm running statistics from the safetensors
// file at path, matching tensors by name: torchvision's state_dict names for resnet18 and
// resnet50 over 32 px (so a torchvision model saved with safetensors.torch.save_file loads as it
// is), the names Export writes for every model. F32, F16 and BF16 tensors are read (F16 and
// BF16 converted exactly); a BatchNorm's num_batches_tracked is accepted and kept for Export,
// which adds the steps trained since; a tensor a module derives from its configuration (Derived: a
// Swin's relative_position_index) is accepted when it equals the module's.
//
// By default every model tensor must be in the file with its shape, and the file must hold no
// other: otherwise the error, wrapping ErrMismatch, lists every missing, unexpected and
// mis-shaped tensor at once, and nothing is loaded; a tensor of another shape that its module
// resamples (a Resampler: a ViT's position embeddings) is loaded, and reported. opts relax that
// (Partial, NewHead); the report says what was loaded and what was not. The file is safetensors
// or torch.save's archive (a .pth: package pth reads its state_dict). A file that is not a
// well-formed safetensors file gives an error wrapping ErrSafetensors, naming the tensor at
// fault, and a .pth that is not torch.save's state_dict one wrapping pth.ErrFormat; a tensor
// with a NaN or an infinite value, one wrapping ErrNonFinite (unless opts.AllowNonFinite). On error the trainer's weights are unchanged, but for one: ctx ending
// during the final wait for the device, when the uploads are enqueued and complete on the stream
// (the error then wraps ctx's). The optimizer's state is left as it is (zero on a fresh trainer).
//
// Memory: from safetensors, the file's header (at most its size and 100 MB) and one host copy
// of the model's tensors, whatever the file claims, and of each file tensor a Resampler
// resamples; from a .pth, which is read whole, its storages and their float32 values besides
// (about three times the model's size for float32 weights, bounded by the file's size).
func (t *Trainer) LoadWeights(ctx context.Context, path string, opts LoadOptions) (*WeightsReport, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("train: weights: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("train: weights: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("train: weights: %s is not a regular file (%v)", path, st.Mode().Type())
	}
	f, err := openWeightsFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("train: weights %s: %w", path, err)
	}
	rep, load, nbt, candidates := t.m.match(f, opts)
	res, err := t.m.resample(f, rep, candidates)
	if err != nil {
		return rep, fmt.Errorf("train: weights %s: %w", path, err)
	}
	if strict := rep.problems(); strict != "" && !opts.Partial {
		return rep, fmt.Errorf("train: weights %s: %w: model %s: %s%s", path, ErrMismatch, t.m.name, strict, t.m.stemHint(f))
	}
	hosts := make([][]float32, len(load))
	for i, p := range load {
		hosts[i] = make([]float32, p.Len())
		if err := f.Float32s(p.Name, hosts[i]); err != nil {
			return rep, fmt.Errorf("train: weights %s: %w", path, err)
		}
		if !opts.AllowNonFinite {
			if err := finite(hosts[i]); err != nil {
				return rep, fmt.Errorf("train: weights %s: tensor %q: %w", path, p.Name, err)
			}
		}
	}
	for _, r := range res {
		if !opts.AllowNonFinite {
			if err := finite(r.values); err != nil {
				return rep, fmt.Errorf("train: weights %s: tensor %q: %w", path, r.p.Name, err)
			}
		}
		load, hosts = append(load, r.p), append(hosts, r.values)
	}
	if err := ctx.Err(); err != nil { // before the first upload: a cancelled call changes nothing
		return rep, fmt.Errorf("train: weights %s: %w", path, err)
	}
	for i, p := range load {
		if err := upload(t.s, p.W, hosts[i]); err != nil {
			return rep, fmt.Errorf("train: weights %s: %s: %w", path, p.Name, err)
		}
	}
	// The uploads are enqueued: the stream completes them whatever ctx does.
	maps.Copy(t.state.Tracked, nbt)
	if err := t.wait(ctx); err != nil {
		return rep, fmt.Errorf("train: weights %s: %w", path, err)
	}
	return rep, nil
}

// match pairs the file's tensors with the model's: the tensors to load, the report, the
// num_batches_tracked values of the model's BatchNorms, and the tensors of another shape in the
// file that their module may resample (m.resample).
func (m *Model) match(f *safetensors.File, opts LoadOptions) (*WeightsReport, []*Param, map[string]int64, []*Param) {
	rep := &WeightsReport{}
	head := m.head()
	all := m.tensors()
	known := map[string]bool{}
	bnPrefix := map[string]bool{}
	for _, p := range all {
		known[p.Name] = true
		if prefix, last := splitLast(p.Name); last == "running_mean" {
			bnPrefix[prefix] = true
		}
	}
	// The head is replaced when any of its tensors is absent or mis-shaped.
	replaceHead := false
	if opts.NewHead {
		for p := range head {
			ft, ok := f.Tensor(p.Name)
			replaceHead = replaceHead || !ok || !slices.Equal(ft.Shape, p.Shape)
		}
	}
	var load, candidates []*Param
	for _, p := range all {
		ft, ok := f.Tensor(p.Name)
		switch {
		case replaceHead && head[p]:
			rep.NewHead = append(rep.NewHead, p.Name)
		case !ok:
			rep.Missing = append(rep.Missing, p.Name)
		case !slices.Equal(ft.Shape, p.Shape):
			if r, _ := m.resamplerOf(p); r != nil {
				candidates = append(candidates, p)
				break
			}
			rep.Mismatched = append(rep.Mismatched, fmt.Sprintf("%s: file %v, model %v", p.Name, ft.Shape, p.Shape))
		default:
			rep.Loaded = append(rep.Loaded, p.Name)
			load = append(load, p)
		}
	}
	derived := map[string]nn.DerivedTensor{}
	for _, d := range m.derived() {
		derived[d.Name] = d
	}
	nbt := map[string]int64{}
	for _, ft := range f.Tensors() {
		name := ft.Name
		if known[name] {
			continue
		}
		if d, ok := derived[name]; ok {
			if err := checkDerived(f, ft, d); err != nil {
				rep.Mismatched = append(rep.Mismatched, fmt.Sprintf("%s: %v", name, err))
			}
			continue
		}
		if prefix, last := splitLast(name); last == "num_batches_tracked" && bnPrefix[prefix] {
			if v, ok := int64Scalar(f, ft); ok {
				nbt[prefix] = v
			}
			continue
		}
		if replaceHead && m.isHeadName(name, head) {
			continue // the replaced head's old tensors (fc.weight of another shape is matched above)
		}
		rep.Unexpected = append(rep.Unexpected, name)
	}
	slices.Sort(rep.Unexpected)
	return rep, load, nbt, candidates
}

// isHeadName reports whether a file tensor's name belongs to the head's layer (same prefix).
func (m *Model) isHeadName(name string, head map[*Param]bool) bool {
	prefix, _ := splitLast(name)
	for p := range head {
		if hp, _ := splitLast(p.Name); hp == prefix {
			return true
		}
	}
	return false
}

// int64Scalar reads an I64 scalar (num_batches_tracked); ok is false for anything else.
func int64Scalar(f *safetensors.File, t safetensors.TensorInfo) (int64, bool) {
	if t.DType != "I64" || t.Len() != 1 {
		return 0, false
	}
	var v [1]int64
	if err := f.Int64s(t.Name, v[:]); err != nil {
		return 0, false
	}
	return v[0], true
}

// openWeightsFile reads a weights file: safetensors, or torch.save's archive (package pth),
// whose state_dict is rewritten as safetensors in memory.
func openWeightsFile(r io.ReaderAt, size int64) (*safetensors.File, error) {
	head := make([]byte, 4)
	if n, _ := r.ReadAt(head, 0); n == 4 && pth.Zip(head) {
		ts, err := pth.Read(r, size)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := safetensors.Write(&b, ts, nil); err != nil {
			return nil, err
		}
		return safetensors.NewFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
	}
	return safetensors.NewFile(r, size)
}
