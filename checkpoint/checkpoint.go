// Package checkpoint reads and writes Stoke's checkpoint files (train.Trainer's Save and Load,
// stoke train --checkpoint and --resume): a training run's whole state in one file, the model's
// identity, the optimizer, the seed and counters, the training loop's state and history, and each
// tensor of the model with its optimizer state and EMA. It knows nothing of models and trainers:
// package train maps a Trainer to a File and back, and checks that a File fits a model.
//
// # Format
//
// Little-endian:
//
//	magic "STOKECKP" | version u32 | payload length u64 | payload | CRC-32C of payload u32
//
// payload: model string | builder string | optimizer string | seed u64 | completed epochs u32 |
// completed steps u64 | the loop's state as JSON bytes | the history as JSON bytes | tensor count
// u32, then per tensor: name string, rank u32 and as many dimensions u32, value count u32
// (weights, then each optimizer slot, then the EMA when there is one), and per value: length u64,
// float32 values. A string is a u32 length and its bytes; JSON bytes a u64 length and the bytes.
//
// Version 2, still read, had no builder string and no shapes. Version 1, still read, had besides
// no state and, for history, a u32 count of 6 float64 per epoch (Epoch1).
//
// Decode treats its input as outside bytes: every length is checked against what remains before
// anything is allocated, so a corrupt or hostile file costs no more memory than its own size.
package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"

	"github.com/stoke-ml/stoke/internal/atomicfile"
)

// ErrFormat: the bytes are not a readable checkpoint (bad magic, unknown version, truncated,
// checksum mismatch, lengths that do not fit).
var ErrFormat = errors.New("corrupt checkpoint")

// Version is the version Encode writes; Decode reads versions 1 to Version.
const Version = 3

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

// Read reads and decodes the checkpoint at path. Anything but a regular file (a FIFO would block
// the read forever, a device never end it) is refused before it is opened for reading.
func Read(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// Write writes f to path atomically: to a temporary file in the same folder, renamed over path,
// so that a crash never leaves a half-written checkpoint under path.
func Write(path string, f *File) error {
	return atomicfile.WriteFile(path, f.Encode(), 0o644)
}

// Sniff reports whether the regular file at path is empty or starts like a checkpoint (what may
// be overwritten by one).
func Sniff(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(magic))
	n, _ := io.ReadFull(f, b)
	return n == 0 || n == len(b) && string(b) == magic
}

// Encode returns f in the format of Version. State and History are written as they are, nil as
// JSON's null; History1 is not written.
func (f *File) Encode() []byte {
	var p []byte
	str := func(s string) {
		p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
		p = append(p, s...)
	}
	str(f.Model)
	str(f.Builder)
	str(f.Optimizer)
	p = binary.LittleEndian.AppendUint64(p, f.Seed)
	p = binary.LittleEndian.AppendUint32(p, uint32(f.Epochs))
	p = binary.LittleEndian.AppendUint64(p, uint64(f.Steps))
	for _, b := range []json.RawMessage{f.State, f.History} {
		if b == nil {
			b = json.RawMessage("null")
		}
		p = binary.LittleEndian.AppendUint64(p, uint64(len(b)))
		p = append(p, b...)
	}
	p = binary.LittleEndian.AppendUint32(p, uint32(len(f.Tensors)))
	for _, t := range f.Tensors {
		str(t.Name)
		p = binary.LittleEndian.AppendUint32(p, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			p = binary.LittleEndian.AppendUint32(p, uint32(d))
		}
		p = binary.LittleEndian.AppendUint32(p, uint32(len(t.Values)))
		for _, v := range t.Values {
			p = binary.LittleEndian.AppendUint64(p, uint64(len(v)))
			for _, x := range v {
				p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
			}
		}
	}
	out := make([]byte, 0, len(p)+24)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint32(out, Version)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, castagnoli))
}

// Decode parses and verifies a checkpoint's bytes; an error wraps ErrFormat.
func Decode(b []byte) (*File, error) {
	if len(b) < 24 || string(b[:8]) != magic {
		return nil, fmt.Errorf("checkpoint: %w: not a stoke checkpoint (bad magic or shorter than a header)", ErrFormat)
	}
	version := binary.LittleEndian.Uint32(b[8:])
	if version < 1 || version > Version {
		return nil, fmt.Errorf("checkpoint: %w: version %d; this build reads versions 1 to %d", ErrFormat, version, Version)
	}
	n := binary.LittleEndian.Uint64(b[12:])
	if n != uint64(len(b)-24) {
		return nil, fmt.Errorf("checkpoint: %w: payload of %d bytes declared, %d present (truncated or padded)", ErrFormat, n, len(b)-24)
	}
	payload := b[20 : 20+n]
	if sum := binary.LittleEndian.Uint32(b[20+n:]); sum != crc32.Checksum(payload, castagnoli) {
		return nil, fmt.Errorf("checkpoint: %w: checksum mismatch", ErrFormat)
	}
	r := &reader{b: payload}
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
	if uint64(nt)*8 > uint64(len(r.b)) {
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
		if uint64(nv)*8 > uint64(len(r.b)) {
			r.fail("%d value sets in %s", nv, t.Name)
		}
		for range nv {
			l := r.u64()
			if l > uint64(len(r.b))/4 {
				r.fail("%d values in %s", l, t.Name)
			}
			raw := r.take(4 * l)
			if r.err != nil {
				break
			}
			v := make([]float32, l)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			t.Values = append(t.Values, v)
		}
		f.Tensors = append(f.Tensors, t)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the last tensor", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}

// reader decodes the payload; the first short read sets err and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("checkpoint: %w: truncated payload", ErrFormat)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
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
	if uint64(n)*48 > uint64(len(r.b)) {
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
