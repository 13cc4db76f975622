package train

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/kernels"
)

// Checkpoint errors, checked with errors.Is.
var (
	// ErrCheckpoint: the file is not a readable checkpoint (bad magic, unknown version, truncated,
	// checksum mismatch).
	ErrCheckpoint = errors.New("corrupt checkpoint")
	// ErrMismatch: the checkpoint is sound but belongs to another model, optimizer, seed or batch
	// size; or a weights file (LoadWeights) lacks tensors of the model, holds others, or holds
	// them in other shapes.
	ErrMismatch = errors.New("file does not match")
	// ErrNoData: an epoch or an evaluation had no sample (all skipped, or empty data).
	ErrNoData = errors.New("no data")
	// ErrNonFinite: a weights file (LoadWeights, Config.Init) or a checkpoint (Config.Resume) holds
	// a NaN or an infinite value, which no trained model has: such weights predict one class for
	// every input and train to a NaN loss. LoadOptions.AllowNonFinite and Config.AllowNonFinite
	// load them anyway.
	ErrNonFinite = errors.New("non-finite weights")
	// ErrRegistered: RegisterLayer was given a kind that is taken (by the package's own layers or
	// an earlier call).
	ErrRegistered = errors.New("layer kind already registered")
)

// readCheckpoint reads a checkpoint file whole; anything but a regular file (a FIFO would block the
// read forever, a device never end it) is refused first.
func readCheckpoint(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	return os.ReadFile(path)
}

// prepareCheckpoint checks that a checkpoint can be written at path (its folder exists and takes a
// file) and removes the temporary files that a killed Save left there.
func prepareCheckpoint(path string) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a folder", dir)
		}
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	// Save renames over path: never over a device, a folder or a file that is not a checkpoint
	// (as root, --checkpoint /dev/null replaced the device; a typo would replace the user's data).
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("train: checkpoint %s: it exists and is not a regular file (%v): %w", path, st.Mode().Type(), ErrConfig)
		}
		if !isCheckpoint(path) {
			return fmt.Errorf("train: checkpoint %s: it exists and is not a stoke checkpoint; remove it or choose another path: %w", path, ErrConfig)
		}
	}
	// Save's temporary files: "." + base + ".tmp*" (and "base.tmp*" from before that name).
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix(path)) || strings.HasPrefix(e.Name(), base+".tmp") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	tmp, err := os.CreateTemp(dir, atomicfile.TempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}

// isCheckpoint reports whether the regular file at path is empty or starts like a checkpoint.
func isCheckpoint(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(ckptMagic))
	n, _ := io.ReadFull(f, magic)
	return n == 0 || n == len(magic) && string(magic) == ckptMagic
}

// The checkpoint format, little-endian:
//
//	magic "STOKECKP" | version u32 | payload length u64 | payload | CRC-32C of payload u32
//
// payload: model string | builder string | optimizer string | seed u64 | completed epochs u32 |
// completed steps u64 | the loop's state (loopState) as JSON bytes | the history ([]EpochResult)
// as JSON bytes | parameter count u32, then per parameter: name string, rank u32 and as many
// dimensions u32, tensor count u32 (weights, then each optimizer slot, then the EMA when the
// state says there is one), and per tensor: length u64, float32 values. The model's buffers
// (BatchNorm running statistics) follow its parameters, each with its weights (and EMA). A string
// is a u32 length and its bytes; JSON bytes a u64 length and the bytes.
//
// A model's identity is structural: for a model NewModel built, the builder string is its name
// with the builder's arguments, input shape and classes ("resnet8 1x28x28->10",
// "vit(image_size=28,patch_size=7) 1x28x28->10"), and with the tensors' names and shapes it is
// what a checkpoint must match; the model string (Model.String) is then a description for
// people. A model built otherwise (Sequential, Net) has no builder string, and its description
// is its identity, as before. Version 2, still read, had no builder string and no shapes: its
// description's head ("resnet8 1x28x28->10: ") names the builder of a model NewModel built, and
// the tensors' names and sizes decide, so rewording a layer's description breaks no checkpoint.
// Version 1, still read, had besides no state and per epoch 6 float64 (epoch, train loss, test
// accuracy, seconds, samples/s, data wait) after a u32 count.
//
// The loader needs no state of its own at an epoch boundary: its order is a function of (seed,
// epoch), and the checkpoint's epoch count says which epoch comes next. The dropout masks are a
// function of (seed, step), both stored.
const (
	ckptMagic   = "STOKECKP"
	ckptVersion = 3
	// maxCkptString bounds names read from a file, so a corrupt length cannot allocate much.
	maxCkptString = 1 << 16
	// maxCkptRank bounds a tensor's rank read from a file, for the same reason.
	maxCkptRank = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type checkpoint struct {
	model, optimizer string
	builder          string // the model's structural identity (Model.builder); "" for none
	seed             uint64
	epochs           int
	step             int
	history          []EpochResult
	state            loopState
	params           []ckptParam
}

type ckptParam struct {
	name    string
	shape   []int // nil in a checkpoint before version 3
	tensors [][]float32
}

// Save writes a checkpoint of the trainer's current state to path (via a temporary file in the same
// directory, renamed over path, so a crash never leaves a half-written checkpoint under path), once
// the state is read back from the device: if ctx ends first, nothing is written.
func (t *Trainer) Save(ctx context.Context, path string) error {
	if t.opt == nil {
		return fmt.Errorf("train: %w: a trainer without an optimizer has no training state to save", ErrConfig)
	}
	c := checkpoint{model: t.m.String(), builder: t.m.builder(), optimizer: t.opt.String(), seed: t.seed, epochs: t.epochs, step: t.step,
		history: t.history, state: t.state}
	c.state.EMA = t.hasEMA
	for i, p := range t.m.tensors() {
		cp := ckptParam{name: p.Name, shape: p.Shape}
		vs := append([]kernels.F32{p.W}, t.OptimizerState(p)...)
		if t.hasEMA {
			vs = append(vs, t.ema[i])
		}
		for _, v := range vs {
			host := make([]float32, v.Len)
			if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), v.Buf, 4*v.Off); err != nil {
				return fmt.Errorf("train: checkpoint %s: %w", path, err)
			}
			cp.tensors = append(cp.tensors, host)
		}
		c.params = append(c.params, cp)
	}
	if err := t.wait(ctx); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	b, err := c.encode()
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	return nil
}

// Load restores weights, optimizer state, seed, step, epoch count, history and the loop's state
// (the EMA, ReduceLROnPlateau's, the best epoch and early stopping's: Config's settings decide
// which of them the run uses) from the checkpoint at path. A file that is not a valid checkpoint gives an error wrapping ErrCheckpoint; one written
// for another model (layers, shapes) or optimizer kind, ErrMismatch. On error the trainer's state
// is unchanged, but for one: ctx ending during the final wait for the device, when the uploads are
// enqueued and the load completes on the stream (the error then wraps ctx's).
func (t *Trainer) Load(ctx context.Context, path string) error {
	b, err := readCheckpoint(path)
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	c, err := decodeCheckpoint(b)
	if err != nil {
		return fmt.Errorf("train: resume from checkpoint %s: %w", path, err)
	}
	if t.opt == nil {
		// A trainer without an optimizer continues no run: it takes the checkpoint's seed.
		t.seed = c.seed
	}
	if err := t.check(c); err != nil {
		return fmt.Errorf("train: resume from checkpoint %s: %w", path, err)
	}
	if !t.cfg.AllowNonFinite {
		if err := c.finite(); err != nil {
			return fmt.Errorf("train: resume from checkpoint %s: %w", path, err)
		}
	}
	if err := ctx.Err(); err != nil { // before the first upload: a cancelled Load changes nothing
		return fmt.Errorf("train: resume from checkpoint %s: %w", path, err)
	}
	// The EMA is loaded when the run keeps one, or to serve it (a trainer without an optimizer);
	// a run with an EMA that resumes a checkpoint without one starts it from the weights (setup).
	ema := c.state.EMA && (t.cfg.EMA > 0 || t.opt == nil)
	if ema && !t.hasEMA {
		if err := t.allocEMA(); err != nil {
			return err
		}
	}
	for i, p := range t.m.tensors() {
		// Without an optimizer only the weights are loaded (OptimizerState is empty).
		ts := c.params[i].tensors
		for j, v := range append([]kernels.F32{p.W}, t.OptimizerState(p)...) {
			if err := upload(t.s, v, ts[j]); err != nil {
				return err
			}
		}
		if ema {
			if err := upload(t.s, t.ema[i], ts[len(ts)-1]); err != nil {
				return err
			}
		}
	}
	if t.hasEMA && !ema { // an EMA of other weights than these: start it again from them
		if err := t.resetEMA(); err != nil {
			return err
		}
	}
	// The uploads are enqueued: the stream completes them whatever ctx does, so the rest of the
	// state is the checkpoint's before the wait.
	t.seed, t.epochs, t.step, t.history = c.seed, c.epochs, c.step, c.history
	plateau := t.state.Plateau
	t.state = c.state
	t.state.EMA = false         // t.hasEMA says whether the trainer has one
	if t.state.Tracked == nil { // a checkpoint written before the counts were kept
		t.state.Tracked = t.m.batchNormCounts(int64(c.state.Batches))
	}
	if t.cfg.Plateau == nil {
		t.state.Plateau = nil
	} else if t.state.Plateau == nil {
		t.state.Plateau = plateau
	}
	if err := t.wait(ctx); err != nil {
		return fmt.Errorf("train: resume from checkpoint %s: %w", path, err)
	}
	return nil
}

func (t *Trainer) check(c *checkpoint) error {
	if err := t.m.matches(c); err != nil {
		return fmt.Errorf("train: %w: %w", ErrMismatch, err)
	}
	if c.seed != t.seed {
		// The data order and the dropout masks follow the seed: another one would silently train
		// on another sequence than the run being continued.
		return fmt.Errorf("train: %w: it was trained with seed %d; this run has seed %d", ErrMismatch, c.seed, t.seed)
	}
	kind := func(s string) string { return strings.Fields(s + " ")[0] }
	if t.opt != nil && kind(c.optimizer) != kind(t.opt.String()) {
		return fmt.Errorf("train: %w: it holds optimizer %q; this is %q", ErrMismatch, c.optimizer, t.opt.String())
	}
	all := t.m.tensors()
	if len(c.params) != len(all) {
		return fmt.Errorf("train: %w: %d parameters; model has %d", ErrMismatch, len(c.params), len(all))
	}
	ema := 0
	if c.state.EMA {
		ema = 1
	}
	for i, p := range all {
		cp := c.params[i]
		if want := 1 + len(t.OptimizerState(p)) + ema; cp.name != p.Name || len(cp.tensors) != want && (t.opt != nil || len(cp.tensors) < 1+ema) {
			return fmt.Errorf("train: %w: parameter %d is %q with %d tensors; want %q with %d", ErrMismatch, i, cp.name, len(cp.tensors), p.Name, want)
		}
		if cp.shape != nil && !slices.Equal(cp.shape, p.Shape) {
			return fmt.Errorf("train: %w: parameter %s has shape %v; want %v", ErrMismatch, p.Name, cp.shape, p.Shape)
		}
		for _, v := range cp.tensors {
			if len(v) != p.Len() {
				return fmt.Errorf("train: %w: parameter %s has %d values; want %d", ErrMismatch, p.Name, len(v), p.Len())
			}
		}
	}
	return nil
}

// finite checks every tensor of the checkpoint (weights, optimizer state, EMA) for NaN and
// infinite values; the error names the first tensor that holds one.
func (c *checkpoint) finite() error {
	for _, cp := range c.params {
		for j, v := range cp.tensors {
			if err := finite(v); err != nil {
				what := "weights"
				switch {
				case c.state.EMA && j == len(cp.tensors)-1:
					what = "EMA"
				case j > 0:
					what = fmt.Sprintf("optimizer state %d", j)
				}
				return fmt.Errorf("tensor %q (%s): %w", cp.name, what, err)
			}
		}
	}
	return nil
}

// finite returns an error wrapping ErrNonFinite that counts the NaN and infinite values of v and
// gives the first, or nil when there is none.
func finite(v []float32) error {
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

func (c *checkpoint) encode() ([]byte, error) {
	var p []byte
	str := func(s string) {
		p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
		p = append(p, s...)
	}
	str(c.model)
	str(c.builder)
	str(c.optimizer)
	p = binary.LittleEndian.AppendUint64(p, c.seed)
	p = binary.LittleEndian.AppendUint32(p, uint32(c.epochs))
	p = binary.LittleEndian.AppendUint64(p, uint64(c.step))
	for _, v := range []any{c.state, c.history} {
		b, err := json.Marshal(v)
		if err != nil { // a NaN or Inf score
			return nil, err
		}
		p = binary.LittleEndian.AppendUint64(p, uint64(len(b)))
		p = append(p, b...)
	}
	p = binary.LittleEndian.AppendUint32(p, uint32(len(c.params)))
	for _, cp := range c.params {
		str(cp.name)
		p = binary.LittleEndian.AppendUint32(p, uint32(len(cp.shape)))
		for _, d := range cp.shape {
			p = binary.LittleEndian.AppendUint32(p, uint32(d))
		}
		p = binary.LittleEndian.AppendUint32(p, uint32(len(cp.tensors)))
		for _, v := range cp.tensors {
			p = binary.LittleEndian.AppendUint64(p, uint64(len(v)))
			for _, f := range v {
				p = binary.LittleEndian.AppendUint32(p, math.Float32bits(f))
			}
		}
	}
	out := make([]byte, 0, len(p)+24)
	out = append(out, ckptMagic...)
	out = binary.LittleEndian.AppendUint32(out, ckptVersion)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, castagnoli)), nil
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
		r.err = fmt.Errorf("train: %w: truncated payload", ErrCheckpoint)
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
	if n > maxCkptString {
		r.fail("string of %d bytes", n)
		return ""
	}
	return string(r.take(uint64(n)))
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("train: %w: "+format, append([]any{ErrCheckpoint}, args...)...)
	}
}

// historyV1 reads a version 1 checkpoint's history.
func (r *reader) historyV1() []EpochResult {
	var h []EpochResult
	nh := r.u32()
	if uint64(nh)*48 > uint64(len(r.b)) {
		r.fail("%d history records", nh)
	}
	for range nh {
		if r.err != nil {
			break
		}
		var f [6]float64
		for i := range f {
			f[i] = math.Float64frombits(r.u64())
		}
		h = append(h, EpochResult{Epoch: int(f[0]), TrainLoss: f[1], TestAcc: f[2], Seconds: f[3], SamplesPerS: f[4], DataWaitFraction: f[5]})
	}
	return h
}

// decodeCheckpoint parses and verifies a checkpoint file's bytes.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < 24 || string(b[:8]) != ckptMagic {
		return nil, fmt.Errorf("train: %w: not a stoke checkpoint (bad magic or shorter than a header)", ErrCheckpoint)
	}
	version := binary.LittleEndian.Uint32(b[8:])
	if version < 1 || version > ckptVersion {
		return nil, fmt.Errorf("train: %w: version %d; this build reads versions 1 to %d", ErrCheckpoint, version, ckptVersion)
	}
	n := binary.LittleEndian.Uint64(b[12:])
	if n != uint64(len(b)-24) {
		return nil, fmt.Errorf("train: %w: payload of %d bytes declared, %d present (truncated or padded)", ErrCheckpoint, n, len(b)-24)
	}
	payload := b[20 : 20+n]
	if sum := binary.LittleEndian.Uint32(b[20+n:]); sum != crc32.Checksum(payload, castagnoli) {
		return nil, fmt.Errorf("train: %w: checksum mismatch", ErrCheckpoint)
	}
	r := &reader{b: payload}
	c := &checkpoint{model: r.str()}
	if version >= 3 {
		c.builder = r.str()
	}
	c.optimizer, c.seed, c.epochs, c.step = r.str(), r.u64(), int(r.u32()), int(r.u64())
	if version == 1 {
		c.history = r.historyV1()
		c.state.Batches = c.step
	} else {
		for _, f := range []struct {
			what string
			v    any
		}{{"state", &c.state}, {"history", &c.history}} {
			if b := r.take(r.u64()); r.err == nil {
				if err := json.Unmarshal(b, f.v); err != nil {
					r.fail("%s: %v", f.what, err)
				}
			}
		}
	}
	np := r.u32()
	if uint64(np)*8 > uint64(len(r.b)) {
		r.fail("%d parameters", np)
	}
	for range np {
		if r.err != nil {
			break
		}
		cp := ckptParam{name: r.str()}
		if version >= 3 {
			rank := r.u32()
			if rank > maxCkptRank {
				r.fail("%s of rank %d", cp.name, rank)
				break
			}
			cp.shape = make([]int, rank)
			for d := range cp.shape {
				cp.shape[d] = int(r.u32())
			}
		}
		nt := r.u32()
		if uint64(nt)*8 > uint64(len(r.b)) {
			r.fail("%d tensors in %s", nt, cp.name)
		}
		for range nt {
			l := r.u64()
			if l > uint64(len(r.b))/4 {
				r.fail("tensor of %d values in %s", l, cp.name)
			}
			raw := r.take(4 * l)
			if r.err != nil {
				break
			}
			v := make([]float32, l)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			cp.tensors = append(cp.tensors, v)
		}
		c.params = append(c.params, cp)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d bytes after the last parameter", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// CheckpointModel builds the model a checkpoint at path was written for: one of NewModel's (the
// builder, its arguments, the input shape and the classes it records), or a Sequential model of
// the package's layers (Linear, Conv2D, ReLU, MaxPool2D, Flatten, Dropout, BatchNorm2D,
// GlobalAvgPool, Residual blocks of them), rebuilt from the description the checkpoint holds
// (Model.String). Load the weights with New(m, dev, nil, Config{Resume: path}) to predict or
// export. A model with a layer of another package gives an error wrapping ErrMismatch that names
// the layer: build that model again and load it the same way. The model's tensors must have the
// names and sizes of the checkpoint's (so a corrupt description cannot ask for more memory than
// the file holds).
func CheckpointModel(path string) (*Model, error) {
	b, err := readCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	c, err := decodeCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	m, err := checkpointModel(c)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w: %w", path, ErrMismatch, err)
	}
	return m, nil
}

// checkpointModel builds c's model: by its builder, or from its description, and checks its
// tensors against c's.
func checkpointModel(c *checkpoint) (*Model, error) {
	if c.builder != "" {
		m, err := builtModel(c.builder)
		if err != nil {
			return nil, err
		}
		if err := m.matches(c); err != nil {
			return nil, err
		}
		return m, m.sameTensors(c)
	}
	// Before version 3, a model NewModel built is named by its description's head; a model built
	// otherwise under the same name is rebuilt from its description.
	head, _, _ := strings.Cut(c.model, ": ")
	if m, err := builtModel(head); err == nil && m.matches(c) == nil && m.sameTensors(c) == nil {
		return m, nil
	}
	m, err := parseModel(c.model)
	if err != nil {
		return nil, err
	}
	return m, m.sameTensors(c)
}

// builtModel is NewModel's model of a builder identity ("resnet8 1x28x28->10").
func builtModel(id string) (*Model, error) {
	var in Shape
	var classes int
	i := strings.LastIndexByte(id, ' ')
	if i <= 0 {
		return nil, fmt.Errorf("model %q is not a builder, input shape and classes", id)
	}
	if _, err := fmt.Sscanf(id[i+1:], "%dx%dx%d->%d", &in.C, &in.H, &in.W, &classes); err != nil ||
		in.C <= 0 || in.H <= 0 || in.W <= 0 || classes <= 0 || in.Len() > maxArchInput {
		return nil, fmt.Errorf("model %q: input shape and classes out of range", id)
	}
	return NewModel(id[:i], in, classes)
}

// sameTensors reports whether c holds m's tensors: names and sizes (and shapes, from version 3).
func (m *Model) sameTensors(c *checkpoint) error {
	all := m.tensors()
	if len(all) != len(c.params) {
		return fmt.Errorf("model %q has %d tensors; the checkpoint %d", m.name, len(all), len(c.params))
	}
	for i, p := range all {
		cp := c.params[i]
		if len(cp.tensors) == 0 || len(cp.tensors[0]) != prod(p.Shape) || cp.name != p.Name || cp.shape != nil && !slices.Equal(cp.shape, p.Shape) {
			return fmt.Errorf("tensor %d of model %q is %s of shape %v; the checkpoint's %q does not match", i, m.name, p.Name, p.Shape, cp.name)
		}
	}
	return nil
}

// builder is the model's structural identity when NewModel built it: its name (with the
// builder's arguments), input shape and classes, "resnet8 1x28x28->10"; "" otherwise.
func (m *Model) builder() string {
	if !m.built {
		return ""
	}
	return fmt.Sprintf("%s %v->%d", m.name, m.in, m.classes)
}

// matches reports whether checkpoint c was written for a model of m's identity (see the format):
// the same builder, or, for a model no builder made (or a checkpoint before version 3), the same
// description, or a description whose head names m's builder. The tensors are compared apart.
func (m *Model) matches(c *checkpoint) error {
	switch b := m.builder(); {
	case c.builder != "" && c.builder == b:
	case c.builder != "":
		if b == "" {
			b = m.String()
		}
		return fmt.Errorf("it holds model %q; this is %q", c.builder, b)
	case c.model == m.String():
	case b != "" && strings.HasPrefix(c.model, b+": "):
	default:
		return fmt.Errorf("it holds model %q; this is %q", c.model, m.String())
	}
	return nil
}
