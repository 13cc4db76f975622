package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/safetensors"
)

// sidecars lists the training-state files beside the checkpoint at path.
func sidecars(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if isSidecar(filepath.Base(path), e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestVersion4: the checkpoint is a safetensors file of the model's weights and Extra alone,
// with the metadata PyTorch and timm read ("format": "pt", the caller's Meta); its training
// state lies beside it; Meta comes back and Extra does not; a second Write replaces the pair; a
// tensor with the weights alone (a buffer) has no training state, nor a checkpoint of such
// tensors a second file.
func TestVersion4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck")
	want := sample()
	want.Tensors = append(want.Tensors, Tensor{Name: "bn.running_var", Shape: []int{2}, Values: [][]float32{{1, 2}}})
	want.Meta = map[string]string{"pretrained_cfg": `{"input_size":[1,1,3]}`}
	f := *want
	f.Extra = []safetensors.Tensor{{Name: "bn.num_batches_tracked", Shape: []int{}, I64: []int64{30}}}
	if err := Write(path, &f, nil); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := fh.Stat()
	sf, err := safetensors.NewFile(fh, st.Size())
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range sf.Tensors() {
		names = append(names, ti.Name)
	}
	if !slices.Equal(names, []string{"0.linear.weight", "0.linear.bias", "bn.running_var", "bn.num_batches_tracked"}) {
		t.Errorf("the weights file holds %v; want the weights, then the extra tensor", names)
	}
	if md := sf.Metadata(); md["format"] != "pt" || md["pretrained_cfg"] != want.Meta["pretrained_cfg"] {
		t.Errorf("metadata %v; want format pt and the caller's pretrained_cfg", md)
	}
	first := sidecars(t, path)
	if len(first) != 1 {
		t.Fatalf("training state files %v; want one", first)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v\nwant %+v", got, want)
	}
	if err := Write(path, &f, nil); err != nil {
		t.Fatal(err)
	}
	if second := sidecars(t, path); len(second) != 1 || second[0] == first[0] {
		t.Errorf("after a second Write: %v; want one training state, not the first's %s", second, first[0])
	}
	weightsOnly := filepath.Join(t.TempDir(), "w")
	w := &File{Model: "m", Tensors: []Tensor{{Name: "x", Shape: []int{1}, Values: [][]float32{{3}}}}}
	if err := Write(weightsOnly, w, nil); err != nil {
		t.Fatal(err)
	}
	if s := sidecars(t, weightsOnly); len(s) != 0 {
		t.Errorf("a checkpoint of weights alone has training state files %v", s)
	}
	if got, err := Read(weightsOnly); err != nil || got.Tensors[0].Values[0][0] != 3 {
		t.Errorf("Read of weights alone: %v", err)
	}
	bad := *want
	bad.Meta = map[string]string{"stoke.model": "x"}
	if err := Write(filepath.Join(t.TempDir(), "b"), &bad, nil); err == nil {
		t.Error("Write of metadata under the format's own key: no error")
	}
}

// TestVersion4Damage: a bit flipped in either file, a missing training state, and a training
// state's name that leaves the folder are ErrFormat, each saying what it found.
func TestVersion4Damage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck")
	if err := Write(path, sample(), nil); err != nil {
		t.Fatal(err)
	}
	side := filepath.Join(dir, sidecars(t, path)[0])
	flip := func(p string) func() {
		b, _ := os.ReadFile(p)
		orig := slices.Clone(b)
		b[len(b)-3] ^= 1 // in the data: the last value
		os.WriteFile(p, b, 0o644)
		return func() { os.WriteFile(p, orig, 0o644) }
	}
	undo := flip(path)
	if _, err := Read(path); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("a flipped bit in the weights: %v; want a checksum mismatch", err)
	}
	undo()
	undo = flip(side)
	if _, err := Read(path); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "training state beside it") {
		t.Errorf("a flipped bit in the training state: %v; want ErrFormat naming it", err)
	}
	undo()
	os.Rename(side, side+".away")
	if _, err := Read(path); !errors.Is(err, ErrNoTrainingState) || !strings.Contains(err.Error(), "copy it with the checkpoint") {
		t.Errorf("a missing training state: %v; want ErrNoTrainingState saying to copy it", err)
	}
	if w, err := ReadWeights(path); err != nil || len(w.Tensors[0].Values) != 1 || w.Tensors[0].Values[0][1] != -2 {
		t.Errorf("ReadWeights without the training state: %+v, %v; want the weights", w, err)
	}
	os.Rename(side+".away", side)
	if _, err := Read(path); err != nil {
		t.Fatal(err)
	}
	// A checkpoint whose metadata names a file outside its folder.
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(dir, "evil")
	if err := Write(evil, f, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(evil)
	name := sidecars(t, evil)[0]
	b = []byte(strings.Replace(string(b), `"`+name+`"`, `"../../etc/passwd"`+strings.Repeat(" ", len(name)-len("../../etc/passwd")), 1))
	os.WriteFile(evil, b, 0o644)
	if _, err := Read(evil); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"../../etc/passwd" is not NAME.train-ID`) {
		t.Errorf("a training state named outside the folder: %v; want ErrFormat", err)
	}
}

// TestVersion4Moved: the pair renamed together, or read through a symbolic link, still reads;
// the training state of another checkpoint put in place of this one's is refused.
func TestVersion4Moved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck")
	if err := Write(path, sample(), nil); err != nil {
		t.Fatal(err)
	}
	side := sidecars(t, path)[0]
	renamed := filepath.Join(dir, "renamed")
	os.Rename(path, renamed)
	os.Rename(filepath.Join(dir, side), filepath.Join(dir, "renamed"+strings.TrimPrefix(side, "ck")))
	if _, err := Read(renamed); err != nil {
		t.Errorf("the pair renamed together: %v", err)
	}
	link := filepath.Join(t.TempDir(), "latest")
	if err := os.Symlink(renamed, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link); err != nil {
		t.Errorf("through a symbolic link: %v", err)
	}
	other := filepath.Join(dir, "other")
	if err := Write(other, sample(), nil); err != nil {
		t.Fatal(err)
	}
	mine := sidecars(t, renamed)[0]
	b, _ := os.ReadFile(filepath.Join(dir, sidecars(t, other)[0]))
	os.WriteFile(filepath.Join(dir, mine), b, 0o644)
	if _, err := Read(renamed); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "of another checkpoint") {
		t.Errorf("another checkpoint's training state: %v; want ErrFormat saying so", err)
	}
}
