// Package weights loads a model's tensors from a weights file, as PyTorch's load_state_dict does:
// a safetensors file, or torch.save's archive (a .pth: package pth reads its state_dict), its
// tensors matched with the model's by their state_dict names and shapes, strictly unless Options
// relax it, with a Report of what was loaded and what was not. A module takes part in the match
// through two interfaces: a Resampler makes a tensor of another shape fit (a ViT's position
// embeddings for another image size), a Derived module's tensors computed from its configuration
// are checked rather than loaded (a Swin's relative_position_index). Package train uploads what
// Load returns to the device (Trainer.LoadWeights, Config.Init).
package weights

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/pth"
	"github.com/stoke-ml/stoke/safetensors"
)

var (
	// ErrMismatch: the file's tensors do not match the model's (missing, unexpected or
	// mis-shaped ones, all listed).
	ErrMismatch = errors.New("file does not match")
	// ErrNonFinite: a tensor holds a NaN or an infinite value.
	ErrNonFinite = errors.New("non-finite weights")
)

// Options say how Load matches a file's tensors with the model's. The zero value is strict, as
// PyTorch's load_state_dict.
type Options struct {
	// Partial loads the tensors whose name and shape match and reports the others in the Report
	// instead of failing (load_state_dict(strict=False), which here also passes over mis-shaped
	// tensors instead of failing on them).
	Partial bool
	// NewHead leaves the classifier head (the Tensors marked Head) at its fresh initialization
	// when the file's head has another shape or is absent (weights trained for another number of
	// classes), as torchvision fine-tuning's model.fc = nn.Linear(...) does. The other tensors
	// are matched as Partial says.
	NewHead bool
	// AllowNonFinite loads tensors that hold NaN or infinite values, which Load otherwise refuses
	// (ErrNonFinite, naming the tensor): such weights predict one class for every input.
	AllowNonFinite bool
}

// Report says what Load did. Names are the model's tensor names.
type Report struct {
	// Loaded are the model's tensors set from the file.
	Loaded []string
	// Missing are the model's tensors the file lacks; Unexpected the file's tensors the model
	// lacks (a BatchNorm's num_batches_tracked is accepted and not listed); Mismatched the
	// tensors both have with different shapes ("fc.weight: file [10 512], model [3 512]").
	Missing, Unexpected, Mismatched []string
	// NewHead are the head's tensors left at their fresh initialization (Options.NewHead).
	NewHead []string
	// Resampled are the loaded tensors made from a file tensor of another shape by their module
	// (a Resampler), with both shapes.
	Resampled []string
}

// Problems sums up the missing, unexpected and mis-shaped tensors in a line (the first few of
// each by name), "" when there are none.
func (r *Report) Problems() string {
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

// Tensor is one of the model's tensors as Load matches it: its nn.StateDict name, its shape,
// and whether it belongs to the classifier head (Options.NewHead).
type Tensor struct {
	Name  string
	Shape []int
	Head  bool
}

func (t Tensor) len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Loaded is what Load read for a model: the Report, the values of each tensor of the model
// that the file sets (indexed as Load's tensors; nil for the others) and the
// num_batches_tracked of the model's BatchNorms that the file holds, by the BatchNorm's name.
type Loaded struct {
	Report  *Report
	Values  [][]float32
	Tracked map[string]int64
}

// Open opens the weights file at path: safetensors, or torch.save's archive, whose state_dict is
// rewritten as safetensors in memory. A file that is not a well-formed safetensors file gives an
// error wrapping safetensors.ErrFormat, naming the tensor at fault, and a .pth that is not
// torch.save's state_dict one wrapping pth.ErrFormat. The caller closes the returned file.
func Open(path string) (*safetensors.File, io.Closer, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := fh.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("open %s: not a regular file (%v)", path, st.Mode().Type())
	}
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	var f *safetensors.File
	head := make([]byte, 4)
	if n, _ := fh.ReadAt(head, 0); n == 4 && pth.Zip(head) {
		var ts []safetensors.Tensor
		if ts, err = pth.Read(fh, st.Size()); err == nil {
			var b bytes.Buffer
			if err = safetensors.Write(&b, ts, nil); err == nil {
				f, err = safetensors.NewFile(bytes.NewReader(b.Bytes()), int64(b.Len()))
			}
		}
	} else {
		f, err = safetensors.NewFile(fh, st.Size())
	}
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	return f, fh, nil
}

// Load matches the tensors of f with tensors, the tensors of module in nn.StateDict's order, and
// reads the values of those it sets: F32, F16 and BF16 tensors are read (F16 and BF16 converted
// exactly); a BatchNorm's num_batches_tracked is accepted (Loaded.Tracked); a tensor a Derived
// module computes is accepted when it equals the module's.
//
// By default every tensor must be in the file with its shape, and the file must hold no other:
// otherwise the error, wrapping ErrMismatch, lists every missing, unexpected and mis-shaped
// tensor at once, and nothing is read; a tensor of another shape that its module resamples (a
// Resampler) is loaded, and reported. opts relax that (Partial, NewHead); the report says what
// was loaded and what was not, and comes with the error too. A tensor with a NaN or an infinite
// value gives an error wrapping ErrNonFinite (unless opts.AllowNonFinite).
//
// Memory: one host copy of the model's tensors, whatever the file claims, and of each file
// tensor a Resampler resamples.
func Load(f *safetensors.File, module nn.Module, tensors []Tensor, opts Options) (*Loaded, error) {
	rep, load, tracked, candidates := match(f, module, tensors, opts)
	res, err := resample(f, module, tensors, rep, candidates)
	if err != nil {
		return &Loaded{Report: rep}, err
	}
	if strict := rep.Problems(); strict != "" && !opts.Partial {
		return &Loaded{Report: rep}, fmt.Errorf("%w: %s", ErrMismatch, strict)
	}
	out := &Loaded{Report: rep, Values: make([][]float32, len(tensors)), Tracked: tracked}
	for _, i := range load {
		v := make([]float32, tensors[i].len())
		if err := f.Float32s(tensors[i].Name, v); err != nil {
			return &Loaded{Report: rep}, err
		}
		out.Values[i] = v
	}
	for i, v := range res {
		out.Values[i] = v
	}
	if !opts.AllowNonFinite {
		for i, v := range out.Values {
			if err := Finite(v); err != nil {
				return &Loaded{Report: rep}, fmt.Errorf("tensor %q: %w", tensors[i].Name, err)
			}
		}
	}
	return out, nil
}

// Finite returns an error wrapping ErrNonFinite that counts the NaN and infinite values of v and
// gives the first, or nil when there is none.
func Finite(v []float32) error {
	n, first := 0, -1
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf
			if n++; first < 0 {
				first = i
			}
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d values are NaN or infinite (the first, at index %d, is %v)", ErrNonFinite, n, len(v), first, v[first])
}

// match pairs the file's tensors with the model's: the indices of the tensors to load, the
// report, the num_batches_tracked values of the model's BatchNorms, and the indices of the
// tensors of another shape in the file that their module may resample.
func match(f *safetensors.File, module nn.Module, tensors []Tensor, opts Options) (*Report, []int, map[string]int64, []int) {
	rep := &Report{}
	known := map[string]bool{}
	bnPrefix := map[string]bool{}
	headPrefix := map[string]bool{}
	for _, t := range tensors {
		known[t.Name] = true
		prefix, last := splitLast(t.Name)
		if last == "running_mean" {
			bnPrefix[prefix] = true
		}
		if t.Head {
			headPrefix[prefix] = true
		}
	}
	// The head is replaced when any of its tensors is absent or mis-shaped.
	replaceHead := false
	if opts.NewHead {
		for _, t := range tensors {
			if t.Head {
				ft, ok := f.Tensor(t.Name)
				replaceHead = replaceHead || !ok || !slices.Equal(ft.Shape, t.Shape)
			}
		}
	}
	var load, candidates []int
	for i, t := range tensors {
		ft, ok := f.Tensor(t.Name)
		switch {
		case replaceHead && t.Head:
			rep.NewHead = append(rep.NewHead, t.Name)
		case !ok:
			rep.Missing = append(rep.Missing, t.Name)
		case !slices.Equal(ft.Shape, t.Shape):
			if r, _ := resamplerOf(module, t.Name); r != nil {
				candidates = append(candidates, i)
				break
			}
			rep.Mismatched = append(rep.Mismatched, fmt.Sprintf("%s: file %v, model %v", t.Name, ft.Shape, t.Shape))
		default:
			rep.Loaded = append(rep.Loaded, t.Name)
			load = append(load, i)
		}
	}
	derived := map[string]nn.DerivedTensor{}
	for _, d := range DerivedTensors(module) {
		derived[d.Name] = d
	}
	tracked := map[string]int64{}
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
		prefix, last := splitLast(name)
		if last == "num_batches_tracked" && bnPrefix[prefix] {
			if v, ok := int64Scalar(f, ft); ok {
				tracked[prefix] = v
			}
			continue
		}
		if replaceHead && headPrefix[prefix] {
			continue // the replaced head's old tensors (fc.weight of another shape is matched above)
		}
		rep.Unexpected = append(rep.Unexpected, name)
	}
	slices.Sort(rep.Unexpected)
	return rep, load, tracked, candidates
}

// splitLast splits a dotted name at its last dot: "layer1.0.bn1", "running_mean".
func splitLast(name string) (prefix, last string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
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

// CheckFile reports a PyTorch file that Open cannot read (a pickle as torch.save wrote before
// PyTorch 1.6 and pickle.dump writes; torch.save's zip archive, a .pth or .pt file, it reads)
// with an error wrapping safetensors.ErrFormat that says how to convert it, where the
// safetensors reader would report a header of absurd length. Any other file, and one that
// cannot be read, gives nil: Open says what is wrong with it.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var head [9]byte
	n, _ := io.ReadFull(f, head[:])
	kind := pyTorchKind(head[:n])
	if kind == "" {
		return nil
	}
	out := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) + ".safetensors"
	return fmt.Errorf("weights %s: %w: it is %s; convert it in Python: "+
		"from safetensors.torch import save_file; save_file(model.state_dict(), %q) "+
		"(a file that holds a state_dict: save_file(torch.load(%q, map_location=\"cpu\"), %q))",
		path, safetensors.ErrFormat, kind, out, path, out)
}

// pyTorchKind names the PyTorch format Open does not read that a file starting with head is in,
// or "" when it is not one. A safetensors file starts with its header's length, 8 bytes that may
// be anything, then its JSON header's '{': a 9th byte '{' is safetensors, whatever the first 8.
func pyTorchKind(head []byte) string {
	switch {
	case len(head) > 8 && head[8] == '{':
		return ""
	case len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5:
		return fmt.Sprintf("a pickle (protocol %d: torch.save's format before PyTorch 1.6, or pickle.dump's)", head[1])
	}
	return ""
}
