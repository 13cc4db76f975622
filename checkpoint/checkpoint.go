// Package checkpoint reads and writes Stoke's checkpoint files (train.Trainer's Save and Load,
// stoke train --checkpoint and --resume): a training run's whole state, the model's identity,
// the optimizer, the seed and counters, the training loop's state and history, and each tensor of
// the model with its optimizer state and EMA. It knows nothing of models and trainers: package
// train maps a Trainer to a File and back, and checks that a File fits a model.
//
// # Format
//
// Version 4, which Write writes, is two safetensors files. The checkpoint's own, at its path, is
// the model's state_dict: each tensor's weights under its name, then File.Extra (a BatchNorm's
// num_batches_tracked, a module's derived buffers), so that PyTorch takes it as it is:
//
//	model.load_state_dict(safetensors.torch.load_file(path), strict=True)
//
// Its metadata holds the rest: "format": "pt", File.Meta (timm's "pretrained_cfg", say), and
// under keys that start with "stoke.": the version ("stoke.checkpoint": "4"), the model, builder
// and optimizer strings, the seed, epochs and steps in decimal, the loop's state and history as
// JSON, the tensors' names in order, the number of value sets per tensor, the CRC-32C of the
// data, and, when there is more than the weights, the name of the training state's file beside
// it. That one, PATH.train-ID (ID 16 random hexadecimal digits), holds every optimizer slot and
// the EMA, set k of tensor NAME as "k:NAME", with its own CRC-32C: a state_dict loads only what
// the model has, so the training state cannot share its file (as Accelerate's save_state keeps
// optimizer.bin beside model.safetensors). Write writes the training state under a new ID first,
// then the checkpoint over path, then removes the training state of the write before: a crash at
// any point leaves path naming a training state that exists.
//
// Versions 1 to 3, still read, were one file of this package's own, little-endian:
//
//	magic "STOKECKP" | version u32 | payload length u64 | payload | CRC-32C of payload u32
//
// payload: model string | builder string | optimizer string | seed u64 | completed epochs u32 |
// completed steps u64 | the loop's state as JSON bytes | the history as JSON bytes | tensor count
// u32, then per tensor: name string, rank u32 and as many dimensions u32, value count u32
// (weights, then each optimizer slot, then the EMA when there is one), and per value: length u64,
// float32 values. A string is a u32 length and its bytes; JSON bytes a u64 length and the bytes.
// Version 2 had no builder string and no shapes; version 1 besides no state and, for history, a
// u32 count of 6 float64 per epoch (Epoch1). Encode still writes version 3, for tests of the
// reading of older files.
//
// Reading treats the files as outside bytes: every length is checked against what remains before
// anything is allocated, so a corrupt or hostile file costs no more memory than its own size, and
// the checksums catch damage. Both ways stream: Write takes the values of a set at a time from
// the caller (Fill), Open leaves them in the file for ReadValues to read a set at a time, and
// Read decodes them straight from the file, so none holds the file's bytes beside the values.
package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"

	"github.com/stoke-ml/stoke/safetensors"
)

// ErrFormat: the bytes are not a readable checkpoint (bad magic, unknown version, truncated,
// checksum mismatch, lengths that do not fit).
var ErrFormat = errors.New("corrupt checkpoint")

// ErrNoTrainingState: the training state of a version 4 checkpoint (its PATH.train-ID: the
// optimizer's state and the EMA) is not beside it. ReadWeights reads the weights alone.
var ErrNoTrainingState = errors.New("training state missing")

// Version is the version Write writes; Read reads versions 1 to Version.
const Version = 4

const (
	magic = "STOKECKP"
	// maxString bounds names read from a file, so a corrupt length cannot allocate much.
	maxString = 1 << 16
	// maxRank bounds a tensor's rank read from a file, for the same reason.
	maxRank = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// File is a checkpoint's contents.
type File struct {
	// Model describes the model (train's Model.String); Builder is the structural identity of a
	// model a builder made ("resnet8 1x28x28->10"), "" for another model and in files before
	// version 3.
	Model, Builder string
	// Optimizer describes the optimizer ("sgd lr=0.1 momentum=0.9 ...").
	Optimizer string
	// Seed is the run's seed; Epochs and Steps count the completed epochs and optimizer steps.
	Seed   uint64
	Epochs int
	Steps  int
	// State and History are the training loop's state and the epochs' results as JSON, in the
	// types of package train; both are nil in a version 1 file, whose history is History1.
	State, History json.RawMessage
	History1       []Epoch1
	// Tensors are the model's tensors in the model's order.
	Tensors []Tensor
	// Extra are tensors the weights file holds for PyTorch's strict loading alone (a BatchNorm's
	// num_batches_tracked, derived buffers): written, not read back.
	Extra []safetensors.Tensor
	// Meta is metadata of the caller's own, written with the weights and read back (version 4):
	// keys that do not start with MetaPrefix and are not "format".
	Meta map[string]string

	sources [][]source // of a File that Open opened: where each value set that is nil lies
	files   []*os.File // what Close closes
}

// source is where a value set lies: tensor key of file.
type source struct {
	file *safetensors.File
	key  string
	len  int
}

// Epoch1 is one epoch's record in a version 1 file.
type Epoch1 struct {
	Epoch                                                      int
	TrainLoss, TestAcc, Seconds, SamplesPerS, DataWaitFraction float64
}

// Tensor is one tensor of the model and what training keeps beside it.
type Tensor struct {
	Name string
	// Shape is the tensor's shape; nil in files before version 3.
	Shape []int
	// Values are the weights, then each slot of the optimizer's state, then the EMA; each holds
	// as many values as the tensor.
	Values [][]float32
}

// Read reads and decodes the checkpoint at path (any version), streamed: the file is not held in
// memory beside the File it decodes to. Anything but a regular file (a FIFO would block the read
// forever, a device never end it) is refused before it is opened for reading. An error of the
// bytes wraps ErrFormat; a version 4 checkpoint's training state not beside it,
// ErrNoTrainingState.
func Read(path string) (*File, error) { return readAll(Open(path, false)) }

// ReadWeights reads the checkpoint at path as Read does, but of a version 4 checkpoint only the
// weights file: each tensor's Values hold its weights alone. Predicting and exporting need no
// more than that, nor the training state beside it.
func ReadWeights(path string) (*File, error) { return readAll(Open(path, true)) }

// Open is Read, or ReadWeights with weightsOnly, that leaves the values of a version 4
// checkpoint in its files: each tensor's Values holds as many value sets as Read's would, nil,
// and ReadValues reads one set at a time, so that a reader that checks and uploads a set at a time
// holds one tensor's values, whatever the model's size. The files' checksums are checked here.
// Close the File when done. Versions 1 to 3 are read whole.
func Open(path string, weightsOnly bool) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b := make([]byte, len(magic))
	if n, _ := io.ReadFull(fh, b); n != len(b) || string(b) != magic {
		return open4(path, weightsOnly)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	f, err := decode(bufio.NewReaderSize(fh, 1<<16), st.Size())
	if err == nil && weightsOnly {
		for i := range f.Tensors {
			f.Tensors[i].Values = f.Tensors[i].Values[:min(1, len(f.Tensors[i].Values))]
		}
	}
	return f, err
}

// ReadValues writes value set k of tensor i (the weights, an optimizer slot, the EMA) into dst,
// of the tensor's element count: from memory, or from the file for a set Open left nil.
func (f *File) ReadValues(i, k int, dst []float32) error {
	t := f.Tensors[i]
	if v := t.Values[k]; v != nil {
		if len(v) != len(dst) {
			return fmt.Errorf("checkpoint: tensor %q: %d values into %d", t.Name, len(v), len(dst))
		}
		copy(dst, v)
		return nil
	}
	src := f.sources[i][k]
	if err := src.file.Float32s(src.key, dst); err != nil {
		return fmt.Errorf("checkpoint: %w: tensor %q: %w", ErrFormat, t.Name, err)
	}
	return nil
}

// Close closes the files Open left open; a File read whole has none.
func (f *File) Close() error {
	var err error
	for _, fh := range f.files {
		err = errors.Join(err, fh.Close())
	}
	f.files, f.sources = nil, nil
	return err
}

// readAll reads every value set f leaves in its files, and closes them.
func readAll(f *File, err error) (*File, error) {
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for i := range f.Tensors {
		for k, v := range f.Tensors[i].Values {
			if v == nil {
				v = make([]float32, f.sources[i][k].len)
				if err := f.ReadValues(i, k, v); err != nil {
					return nil, err
				}
				f.Tensors[i].Values[k] = v
			}
		}
	}
	return f, nil
}

// Fill gives a streamed write the values of a set that the File leaves nil: it writes set k of
// tensor i (the weights, an optimizer slot, the EMA) into dst, of the tensor's element count.
type Fill func(i, k int, dst []float32) error

// Write writes f to path in version 4, atomically: each file to a temporary file in the same
// folder, renamed over its name, so that a crash never leaves a half-written checkpoint under
// path (see the Format). It streams: a value set that is nil in f.Tensors is taken from fill when
// the write reaches it, into one buffer reused for every such set, so that the write holds one
// tensor's values beyond what f holds, whatever the model's size (the checksum, which the header
// holds, is written as a placeholder and set once the data is written). fill may be nil when f
// holds every value. Every tensor needs a Shape and as many value sets as the others.
func Write(path string, f *File, fill Fill) error { return write4(path, f, fill) }

// Sniff reports whether the regular file at path is empty or is a checkpoint (what may be
// overwritten by one).
func Sniff(path string) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return false
	}
	b := make([]byte, len(magic))
	n, _ := io.ReadFull(fh, b)
	return n == 0 || n == len(b) && string(b) == magic || sniff4(fh, st.Size())
}

// Encode returns f in format version 3 (tests of older files use it). State and History are
// written as they are, nil as JSON's null; History1, Extra and Meta are not written.
func (f *File) Encode() []byte {
	var b bytes.Buffer
	f.encode(&b, nil) // a bytes.Buffer never fails, and without fill nothing else can
	return b.Bytes()
}

// setLen is the number of values set v of tensor t holds in the file: a nil set filled by a
// Fill holds the tensor's element count.
func setLen(t Tensor, v []float32, fill Fill) int {
	if v != nil || fill == nil {
		return len(v)
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// encode writes f to w in format version 3, the values of its nil sets from fill.
func (f *File) encode(w io.Writer, fill Fill) error {
	state, history := f.State, f.History
	if state == nil {
		state = json.RawMessage("null")
	}
	if history == nil {
		history = json.RawMessage("null")
	}
	// The payload's length comes first: count it.
	n := 3*4 + len(f.Model) + len(f.Builder) + len(f.Optimizer) + 8 + 4 + 8 + 2*8 + len(state) + len(history) + 4
	most := 0
	for _, t := range f.Tensors {
		n += 4 + len(t.Name) + 4 + 4*len(t.Shape) + 4
		for _, v := range t.Values {
			l := setLen(t, v, fill)
			n += 8 + 4*l
			if v == nil {
				most = max(most, l)
			}
		}
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	head := binary.LittleEndian.AppendUint32([]byte(magic), 3)
	bw.Write(binary.LittleEndian.AppendUint64(head, uint64(n)))
	sum := crc32.New(castagnoli)
	e := &encoder{w: io.MultiWriter(bw, sum)}
	e.str(f.Model)
	e.str(f.Builder)
	e.str(f.Optimizer)
	e.u64(f.Seed)
	e.u32(uint32(f.Epochs))
	e.u64(uint64(f.Steps))
	for _, b := range []json.RawMessage{state, history} {
		e.u64(uint64(len(b)))
		e.write(b)
	}
	e.u32(uint32(len(f.Tensors)))
	var dst []float32
	if most > 0 {
		dst = make([]float32, most)
	}
	for i, t := range f.Tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u32(uint32(d))
		}
		e.u32(uint32(len(t.Values)))
		for k, v := range t.Values {
			if v == nil && fill != nil && e.err == nil {
				v = dst[:setLen(t, v, fill)]
				if err := fill(i, k, v); err != nil {
					return fmt.Errorf("checkpoint: tensor %s: %w", t.Name, err)
				}
			}
			e.u64(uint64(len(v)))
			e.floats(v)
		}
	}
	if e.err != nil {
		return e.err
	}
	bw.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32()))
	return bw.Flush()
}

// encoder writes the payload's fields; the first error of w is kept and later writes do nothing.
type encoder struct {
	w   io.Writer
	buf [1 << 12]byte
	err error
}

func (e *encoder) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u32(v uint32) { e.write(binary.LittleEndian.AppendUint32(e.buf[:0], v)) }
func (e *encoder) u64(v uint64) { e.write(binary.LittleEndian.AppendUint64(e.buf[:0], v)) }

func (e *encoder) str(s string) {
	e.u32(uint32(len(s)))
	e.write([]byte(s))
}

// floats writes v as little-endian float32, through the encoder's buffer.
func (e *encoder) floats(v []float32) {
	for len(v) > 0 && e.err == nil {
		n := min(len(v), len(e.buf)/4)
		for i, x := range v[:n] {
			binary.LittleEndian.PutUint32(e.buf[4*i:], math.Float32bits(x))
		}
		e.write(e.buf[:4*n])
		v = v[n:]
	}
}

// Decode parses and verifies a checkpoint's bytes; an error wraps ErrFormat.
func Decode(b []byte) (*File, error) {
	return decode(bytes.NewReader(b), int64(len(b)))
}

// decode parses and verifies a checkpoint of size bytes read from src. Every length is checked
// against the bytes that remain before anything is allocated; the values go straight from src
// into the File's slices.
func decode(src io.Reader, size int64) (*File, error) {
	var head [20]byte
	if size < 24 {
		return nil, fmt.Errorf("checkpoint: %w: not a stoke checkpoint (bad magic or shorter than a header)", ErrFormat)
	}
	if _, err := io.ReadFull(src, head[:]); err != nil {
		return nil, fmt.Errorf("checkpoint: %w: header: %v", ErrFormat, err)
	}
	if string(head[:8]) != magic {
		return nil, fmt.Errorf("checkpoint: %w: not a stoke checkpoint (bad magic or shorter than a header)", ErrFormat)
	}
	version := binary.LittleEndian.Uint32(head[8:])
	if version < 1 || version > 3 {
		return nil, fmt.Errorf("checkpoint: %w: version %d; this build reads versions 1 to %d (4 as safetensors)", ErrFormat, version, Version)
	}
	n := binary.LittleEndian.Uint64(head[12:])
	if n != uint64(size-24) {
		return nil, fmt.Errorf("checkpoint: %w: payload of %d bytes declared, %d present (truncated or padded)", ErrFormat, n, size-24)
	}
	r := &reader{src: src, n: n, sum: crc32.New(castagnoli)}
	f := r.payload(version)
	// A damaged file is reported by its checksum, whatever the damage made of the fields: read
	// what remains of the payload (without keeping it) and compare.
	if r.err == nil && r.n != 0 {
		r.fail("%d bytes after the last tensor", r.n)
	}
	if _, err := io.CopyN(r.sum, src, int64(r.n)); err != nil {
		return nil, fmt.Errorf("checkpoint: %w: %v", ErrFormat, err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(src, tail[:]); err != nil {
		return nil, fmt.Errorf("checkpoint: %w: checksum: %v", ErrFormat, err)
	}
	if binary.LittleEndian.Uint32(tail[:]) != r.sum.Sum32() {
		return nil, fmt.Errorf("checkpoint: %w: checksum mismatch", ErrFormat)
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}

// payload reads the fields of a payload of the given version.
func (r *reader) payload(version uint32) *File {
	f := &File{Model: r.str()}
	if version >= 3 {
		f.Builder = r.str()
	}
	f.Optimizer, f.Seed, f.Epochs, f.Steps = r.str(), r.u64(), int(r.u32()), int(r.u64())
	if version == 1 {
		f.History1 = r.history1()
	} else {
		for _, v := range []*json.RawMessage{&f.State, &f.History} {
			if b := r.take(r.u64()); r.err == nil {
				if !json.Valid(b) {
					r.fail("the loop's state or history is not JSON")
				}
				*v = json.RawMessage(b)
			}
		}
	}
	nt := r.u32()
	if uint64(nt)*8 > r.n {
		r.fail("%d tensors", nt)
	}
	for range nt {
		if r.err != nil {
			break
		}
		t := Tensor{Name: r.str()}
		if version >= 3 {
			rank := r.u32()
			if rank > maxRank {
				r.fail("%s of rank %d", t.Name, rank)
				break
			}
			t.Shape = make([]int, rank)
			for d := range t.Shape {
				t.Shape[d] = int(r.u32())
			}
		}
		nv := r.u32()
		if uint64(nv)*8 > r.n {
			r.fail("%d value sets in %s", nv, t.Name)
		}
		for range nv {
			l := r.u64()
			if l > r.n/4 {
				r.fail("%d values in %s", l, t.Name)
			}
			if r.err != nil {
				break
			}
			t.Values = append(t.Values, r.floats(int(l)))
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f
}

// reader decodes the payload from src, n bytes of it remaining, each byte read added to sum; the
// first failure sets err and every later read returns zero.
type reader struct {
	src io.Reader
	n   uint64
	sum hash.Hash32
	buf [1 << 12]byte
	err error
}

// read fills b from the payload.
func (r *reader) read(b []byte) bool {
	if r.err != nil {
		return false
	}
	if uint64(len(b)) > r.n {
		r.err = fmt.Errorf("checkpoint: %w: truncated payload", ErrFormat)
		return false
	}
	if _, err := io.ReadFull(r.src, b); err != nil {
		r.err = fmt.Errorf("checkpoint: %w: %v", ErrFormat, err)
		return false
	}
	r.sum.Write(b)
	r.n -= uint64(len(b))
	return true
}

// take reads n bytes into a new slice (n checked against what remains first).
func (r *reader) take(n uint64) []byte {
	if r.err == nil && n > r.n {
		r.err = fmt.Errorf("checkpoint: %w: truncated payload", ErrFormat)
	}
	if r.err != nil {
		return nil
	}
	b := make([]byte, n)
	if !r.read(b) {
		return nil
	}
	return b
}

// floats reads l little-endian float32 (l checked against what remains by the caller).
func (r *reader) floats(l int) []float32 {
	v := make([]float32, l)
	for at := 0; at < l && r.err == nil; {
		n := min(l-at, len(r.buf)/4)
		if r.read(r.buf[:4*n]) {
			for i := range n {
				v[at+i] = math.Float32frombits(binary.LittleEndian.Uint32(r.buf[4*i:]))
			}
		}
		at += n
	}
	return v
}

func (r *reader) u32() uint32 {
	if r.read(r.buf[:4]) {
		return binary.LittleEndian.Uint32(r.buf[:4])
	}
	return 0
}

func (r *reader) u64() uint64 {
	if r.read(r.buf[:8]) {
		return binary.LittleEndian.Uint64(r.buf[:8])
	}
	return 0
}

func (r *reader) str() string {
	n := r.u32()
	if n > maxString {
		r.fail("string of %d bytes", n)
		return ""
	}
	return string(r.take(uint64(n)))
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("checkpoint: %w: "+format, append([]any{ErrFormat}, args...)...)
	}
}

// history1 reads a version 1 file's history.
func (r *reader) history1() []Epoch1 {
	var h []Epoch1
	n := r.u32()
	if uint64(n)*48 > r.n {
		r.fail("%d history records", n)
	}
	for range n {
		if r.err != nil {
			break
		}
		var f [6]float64
		for i := range f {
			f[i] = math.Float64frombits(r.u64())
		}
		h = append(h, Epoch1{Epoch: int(f[0]), TrainLoss: f[1], TestAcc: f[2], Seconds: f[3], SamplesPerS: f[4], DataWaitFraction: f[5]})
	}
	return h
}
