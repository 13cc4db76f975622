package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/safetensors"
)

// The metadata keys of a version 4 file of this package's own (MetaPrefix and "format" aside,
// the keys are the caller's, File.Meta).
const (
	// MetaPrefix starts every key of this package's own.
	MetaPrefix = "stoke."

	metaVersion   = MetaPrefix + "checkpoint"
	metaModel     = MetaPrefix + "model"
	metaBuilder   = MetaPrefix + "builder"
	metaOptimizer = MetaPrefix + "optimizer"
	metaSeed      = MetaPrefix + "seed"
	metaEpochs    = MetaPrefix + "epochs"
	metaSteps     = MetaPrefix + "steps"
	metaState     = MetaPrefix + "state"
	metaHistory   = MetaPrefix + "history"
	metaTensors   = MetaPrefix + "tensors"
	metaSets      = MetaPrefix + "sets"
	metaTraining  = MetaPrefix + "training"
	metaCRC       = MetaPrefix + "crc32c"
	metaID        = MetaPrefix + "id" // the training state's ID, in its own metadata
)

// sidecarName matches the name of a training-state file beside its checkpoint: the checkpoint's
// name, ".train-" and 16 hexadecimal digits.
var sidecarName = regexp.MustCompile(`\.train-[0-9a-f]{16}$`)

// write4 writes f at path in version 4 (see the package doc's Format): the training state's file
// first, under a new name, then path renamed over, then the training state of the write before
// removed.
func write4(path string, f *File, fill Fill) error {
	names, sets := make([]string, len(f.Tensors)), make([]int, len(f.Tensors))
	for i, t := range f.Tensors {
		if len(t.Values) == 0 || len(t.Values) > maxSets || t.Shape == nil {
			return fmt.Errorf("checkpoint: tensor %s: %d value sets of shape %v; want 1 to %d, and a shape", t.Name, len(t.Values), t.Shape, maxSets)
		}
		names[i], sets[i] = t.Name, len(t.Values)
	}
	for key := range f.Meta {
		if strings.HasPrefix(key, MetaPrefix) || key == "format" {
			return fmt.Errorf("checkpoint: metadata key %q is the format's own", key)
		}
	}
	// The values of set k of tensor i: f's, or fill's into scratch, one buffer for the whole write.
	var scratch []float32
	set := func(i, k int) func() ([]float32, error) {
		return func() ([]float32, error) {
			t := f.Tensors[i]
			if v := t.Values[k]; v != nil || fill == nil {
				return v, nil // a length that does not fit the shape is safetensors.Write's error
			}
			n := 1
			for _, d := range t.Shape {
				n *= d
			}
			if cap(scratch) < n {
				scratch = make([]float32, n)
			}
			if err := fill(i, k, scratch[:n]); err != nil {
				return nil, fmt.Errorf("checkpoint: tensor %s: %w", t.Name, err)
			}
			return scratch[:n], nil
		}
	}
	weights := make([]safetensors.Tensor, 0, len(f.Tensors)+len(f.Extra))
	var training []safetensors.Tensor
	for i, t := range f.Tensors {
		weights = append(weights, safetensors.Tensor{Name: t.Name, Shape: t.Shape, Fill: set(i, 0)})
		for k := 1; k < len(t.Values); k++ {
			training = append(training, safetensors.Tensor{Name: fmt.Sprintf("%d:%s", k, t.Name), Shape: t.Shape, Fill: set(i, k)})
		}
	}
	weights = append(weights, f.Extra...)
	meta := map[string]string{"format": "pt", metaVersion: "4", metaModel: f.Model, metaBuilder: f.Builder,
		metaOptimizer: f.Optimizer, metaSeed: strconv.FormatUint(f.Seed, 10), metaEpochs: strconv.Itoa(f.Epochs),
		metaSteps: strconv.Itoa(f.Steps), metaState: jsonOrNull(f.State), metaHistory: jsonOrNull(f.History)}
	b, _ := json.Marshal(names)
	meta[metaTensors] = string(b)
	b, _ = json.Marshal(sets)
	meta[metaSets] = string(b)
	for k, v := range f.Meta {
		meta[k] = v
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	sidecar := ""
	if len(training) > 0 {
		var id [8]byte
		rand.Read(id[:])
		sidecar = base + ".train-" + hex.EncodeToString(id[:])
		if err := writeFile(filepath.Join(dir, sidecar), training, map[string]string{metaVersion: "4", metaID: hex.EncodeToString(id[:])}); err != nil {
			return err
		}
		meta[metaTraining] = sidecar
	}
	if err := writeFile(path, weights, meta); err != nil {
		if sidecar != "" {
			os.Remove(filepath.Join(dir, sidecar))
		}
		return err
	}
	// The training states of earlier writes: path no longer names them.
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if n := e.Name(); n != sidecar && isSidecar(base, n) {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
	return nil
}

// maxSets bounds a tensor's value sets: the weights, an optimizer's slots and the EMA.
const maxSets = 16

// isSidecar reports whether name is a training state's name for the checkpoint named base.
func isSidecar(base, name string) bool {
	return strings.HasPrefix(name, base+".train-") && len(name) == len(base)+len(".train-")+16 && sidecarName.MatchString(name)
}

func jsonOrNull(b json.RawMessage) string {
	if b == nil {
		return "null"
	}
	return string(b)
}

// writeFile writes tensors as a safetensors file at path, atomically, with the CRC-32C of its
// data in the metadata: written as a placeholder, since the header comes before the data, and
// set once the data is written.
func writeFile(path string, tensors []safetensors.Tensor, meta map[string]string) error {
	const placeholder = "00000000"
	meta[metaCRC] = placeholder
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		fh, ok := w.(io.WriterAt)
		if !ok {
			return fmt.Errorf("checkpoint: %s: the temporary file cannot be written at an offset", path)
		}
		cw := &crcWriter{w: w, sum: crc32.New(castagnoli)}
		if err := safetensors.Write(cw, tensors, meta); err != nil {
			return err
		}
		key := []byte(`"` + metaCRC + `":"` + placeholder + `"`)
		at := bytes.Index(cw.header, key)
		if at < 0 || len(cw.header) < 8 {
			return fmt.Errorf("checkpoint: %s: no checksum placeholder in the header", path)
		}
		_, err := fh.WriteAt(fmt.Appendf(nil, "%08x", cw.sum.Sum32()), int64(at+len(key)-len(placeholder)-1))
		return err
	})
}

// crcWriter passes a safetensors file on to w, keeping its length and header and summing its data.
type crcWriter struct {
	w      io.Writer
	header []byte // the length and the header, 8+N bytes once complete
	sum    hash.Hash32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	q := p[:n]
	for len(q) > 0 {
		want := 8
		if len(c.header) >= 8 {
			want = 8 + int(binary.LittleEndian.Uint64(c.header))
		}
		if len(c.header) >= want {
			c.sum.Write(q)
			break
		}
		take := min(len(q), want-len(c.header))
		c.header = append(c.header, q[:take]...)
		q = q[take:]
	}
	return n, err
}

// openFile opens the safetensors file at path and checks it: its header (package safetensors), the
// version, and its data against the checksum in its metadata.
func openFile(path string) (*safetensors.File, *os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	f, err := safetensors.NewFile(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, nil, fmt.Errorf("checkpoint: %w: %w", ErrFormat, err)
	}
	md := f.Metadata()
	if md[metaVersion] != "4" {
		fh.Close()
		return nil, nil, fmt.Errorf("checkpoint: %w: a safetensors file that is not a stoke checkpoint (version %q)", ErrFormat, md[metaVersion])
	}
	data := st.Size()
	for _, t := range f.Tensors() {
		data = min(data, t.Offset)
	}
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, io.NewSectionReader(fh, data, st.Size()-data)); err != nil {
		fh.Close()
		return nil, nil, err
	}
	if got := fmt.Sprintf("%08x", sum.Sum32()); got != md[metaCRC] {
		fh.Close()
		return nil, nil, fmt.Errorf("checkpoint: %w: %s: checksum mismatch", ErrFormat, filepath.Base(path))
	}
	return f, fh, nil
}

// open4 opens the version 4 checkpoint at path (see the package doc's Format): the weights, and
// unless weightsOnly the training state beside them, their values left in the files (Open).
func open4(path string, weightsOnly bool) (_ *File, err error) {
	// Through a symbolic link (latest.ckpt), the training state lies beside the file itself.
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	sf, fh, err := openFile(path)
	if err != nil {
		return nil, err
	}
	md := sf.Metadata()
	bad := func(format string, args ...any) (*File, error) {
		return nil, fmt.Errorf("checkpoint: %w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	f := &File{Model: md[metaModel], Builder: md[metaBuilder], Optimizer: md[metaOptimizer], files: []*os.File{fh}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	var err1, err2, err3 error
	f.Seed, err1 = strconv.ParseUint(md[metaSeed], 10, 64)
	f.Epochs, err2 = strconv.Atoi(md[metaEpochs])
	f.Steps, err3 = strconv.Atoi(md[metaSteps])
	if err1 != nil || err2 != nil || err3 != nil || f.Epochs < 0 || f.Steps < 0 {
		return bad("seed %q, epochs %q, steps %q", md[metaSeed], md[metaEpochs], md[metaSteps])
	}
	for _, v := range []struct {
		key string
		dst *json.RawMessage
	}{{metaState, &f.State}, {metaHistory, &f.History}} {
		if !json.Valid([]byte(md[v.key])) {
			return bad("%s is not JSON", v.key)
		}
		*v.dst = json.RawMessage(md[v.key])
	}
	var names []string
	var sets []int
	if err := json.Unmarshal([]byte(md[metaTensors]), &names); err != nil {
		return bad("%s: %v", metaTensors, err)
	}
	if err := json.Unmarshal([]byte(md[metaSets]), &sets); err != nil || len(sets) != len(names) {
		return bad("%s: %d counts for %d tensors (%v)", metaSets, len(sets), len(names), err)
	}
	more := false
	for _, n := range sets {
		if n < 1 || n > maxSets {
			return bad("%s: a tensor of %d value sets", metaSets, n)
		}
		more = more || n > 1
	}
	for key, v := range md {
		if !strings.HasPrefix(key, MetaPrefix) && key != "format" {
			if f.Meta == nil {
				f.Meta = map[string]string{}
			}
			f.Meta[key] = v
		}
	}
	var training *safetensors.File
	if more && !weightsOnly {
		tf, th, err := openTraining(path, md[metaTraining])
		if err != nil {
			return nil, err
		}
		f.files = append(f.files, th)
		training = tf
	}
	seen := map[string]bool{}
	for i, name := range names {
		info, ok := sf.Tensor(name)
		if !ok || seen[name] || info.DType != "F32" {
			return bad("tensor %q: missing, repeated or not F32", name)
		}
		seen[name] = true
		n := sets[i]
		if weightsOnly {
			n = 1
		}
		t := Tensor{Name: name, Shape: slices.Clone(info.Shape), Values: make([][]float32, n)}
		srcs := make([]source, n)
		for k := range n {
			file, key := sf, name
			if k > 0 {
				file, key = training, fmt.Sprintf("%d:%s", k, name)
			}
			ti, ok := file.Tensor(key)
			if !ok || ti.DType != "F32" || !slices.Equal(ti.Shape, info.Shape) {
				return bad("tensor %q: value set %d missing or of another shape", name, k)
			}
			srcs[k] = source{file, key, info.Len()}
		}
		f.Tensors = append(f.Tensors, t)
		f.sources = append(f.sources, srcs)
	}
	return f, nil
}

// openTraining opens the training state named name in the metadata of the checkpoint at path:
// PATH.train-ID, ID name's, or name itself in the same folder when the pair was written under
// another name; its own metadata must hold the same ID.
func openTraining(path, name string) (*safetensors.File, *os.File, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	id, ok := strings.CutPrefix(sidecarName.FindString(name), ".train-")
	if !ok || strings.ContainsAny(name, `/\`) {
		return nil, nil, fmt.Errorf("checkpoint: %w: the training state's name %q is not NAME.train-ID", ErrFormat, name)
	}
	p := filepath.Join(dir, base+".train-"+id)
	if _, err := os.Stat(p); err != nil {
		p = filepath.Join(dir, name)
	}
	f, fh, err := openFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("checkpoint: %w: %s.train-%s, written beside %s with it (copy it with the checkpoint to resume it or serve its EMA)",
			ErrNoTrainingState, base, id, base)
	case err != nil:
		return nil, nil, fmt.Errorf("checkpoint: %w: the training state beside it (%s): %w", ErrFormat, filepath.Base(p), err)
	case f.Metadata()[metaID] != id:
		fh.Close()
		return nil, nil, fmt.Errorf("checkpoint: %w: %s is the training state of another checkpoint (ID %q; want %s)", ErrFormat, filepath.Base(p), f.Metadata()[metaID], id)
	}
	return f, fh, nil
}

// sniff4 reports whether the file at path is a safetensors file of this package's version 4.
func sniff4(fh *os.File, size int64) bool {
	f, err := safetensors.NewFile(fh, size)
	return err == nil && f.Metadata()[metaVersion] == "4"
}
