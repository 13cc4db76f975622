package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/weights"
)

// Checkpoint errors, checked with errors.Is.
var (
	// ErrCheckpoint: the file is not a readable checkpoint (bad magic, unknown version, truncated,
	// checksum mismatch): checkpoint.ErrFormat.
	ErrCheckpoint = checkpoint.ErrFormat
	// ErrMismatch: the checkpoint is sound but belongs to another model, optimizer, seed or batch
	// size; or a weights file (LoadWeights) lacks tensors of the model, holds others, or holds
	// them in other shapes: weights.ErrMismatch.
	ErrMismatch = weights.ErrMismatch
	// ErrNoData: an epoch or an evaluation had no sample (all skipped, or empty data).
	ErrNoData = errors.New("no data")
	// ErrNonFinite: a weights file (LoadWeights, Config.Init) or a checkpoint (Config.Resume) holds
	// a NaN or an infinite value, which no trained model has: such weights predict one class for
	// every input and train to a NaN loss. weights.Options.AllowNonFinite and
	// Config.AllowNonFinite load them anyway: weights.ErrNonFinite.
	ErrNonFinite = weights.ErrNonFinite
)

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
		if !checkpoint.Sniff(path) {
			return fmt.Errorf("train: checkpoint %s: it exists and is not a stoke checkpoint; remove it or choose another path: %w", path, ErrConfig)
		}
	}
	// Save's temporary files: "." + base + ".tmp*" (and "base.tmp*" from before that name), and
	// those of its training state's file, "." + base + ".train-ID.tmp*".
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, atomicfile.TempPrefix(path)) || strings.HasPrefix(n, base+".tmp") ||
			strings.HasPrefix(n, "."+base+".train-") && strings.Contains(n, ".tmp") {
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

// A checkpoint (package checkpoint's File) holds the trainer's state: the model's description
// and identity, the optimizer's description, the seed, the epochs and steps done, the loop's
// state (loopState) and history ([]EpochResult) as JSON, and per tensor of the model (its
// parameters, then its buffers: BatchNorm running statistics) the weights, each optimizer slot
// (Trainer.OptimizerState) and the EMA when the state says there is one.
//
// A model's identity is structural: for a model NewModel built, the builder string is its name
// with the builder's arguments, input shape and classes ("resnet8 1x28x28->10",
// "vit(image_size=28,patch_size=7) 1x28x28->10"), and with the tensors' names and shapes it is
// what a checkpoint must match. A model built otherwise (Net) has no builder string: its name,
// input and classes (Model.String) and its tensors' names and shapes are its identity, as a
// state_dict's keys are in PyTorch. A version 2 file had no builder string and no shapes: its
// description's head ("resnet8 1x28x28->10: ") names the builder of a model NewModel built, and
// the tensors' names and sizes decide.
//
// The loader needs no state of its own at an epoch boundary: its order is a function of (seed,
// epoch), and the checkpoint's epoch count says which epoch comes next. The dropout masks are a
// function of (seed, step), both stored.

// metaPretrainedCfg is the checkpoint metadata key of the trainer's Preprocess: timm's name, the
// JSON of the keys of timm's pretrained_cfg.
const metaPretrainedCfg = "pretrained_cfg"

// Save writes a checkpoint of the trainer's current state to path (via a temporary file in the same
// directory, renamed over path, so a crash never leaves a half-written checkpoint under path), once
// the state is read back from the device: if ctx ends first, nothing is written. The file is the
// model's state_dict as safetensors, which PyTorch loads as it is
// (model.load_state_dict(safetensors.torch.load_file(path))), its metadata the rest of the run
// (the Preprocess under timm's "pretrained_cfg"); the optimizer's state and the EMA lie beside it
// in PATH.train-ID, which only a resume needs (see package checkpoint's Format).
func (t *Trainer) Save(ctx context.Context, path string) error {
	if t.opt == nil {
		return fmt.Errorf("train: %w: a trainer without an optimizer has no training state to save", ErrConfig)
	}
	state := t.state
	state.EMA = t.hasEMA
	c := checkpoint.File{Model: t.m.String(), Builder: t.m.builder(), Optimizer: t.opt.String(), Seed: t.seed, Epochs: t.epochs, Steps: t.step,
		Extra: t.extraTensors()}
	var err error
	if t.pre != nil { // timm's key, beside the weights, where Python finds it
		b, err := json.Marshal(t.pre.Cfg(t.m.in, t.m.classes))
		if err != nil {
			return fmt.Errorf("train: checkpoint %s: %w", path, err)
		}
		c.Meta = map[string]string{metaPretrainedCfg: string(b)}
	}
	if c.State, err = json.Marshal(state); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	if c.History, err = json.Marshal(t.history); err != nil { // a NaN or Inf score
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	// The values stream from the device to the file a set at a time (checkpoint.Fill): a
	// checkpoint costs one tensor's host memory, not the model's (and its optimizer state's) twice.
	tensors := t.m.tensors()
	sets := make([][]kernels.F32, len(tensors))
	for i, p := range tensors {
		sets[i] = append([]kernels.F32{p.W}, t.OptimizerState(p)...)
		if t.hasEMA {
			sets[i] = append(sets[i], t.ema[i])
		}
		c.Tensors = append(c.Tensors, checkpoint.Tensor{Name: p.Name, Shape: p.Shape, Values: make([][]float32, len(sets[i]))})
	}
	fill := func(i, k int, dst []float32) error {
		v := sets[i][k]
		if v.Len != len(dst) {
			return fmt.Errorf("%d values on the device for a tensor of shape %v", v.Len, tensors[i].Shape)
		}
		if len(dst) == 0 {
			return nil
		}
		if err := t.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), v.Buf, 4*v.Off); err != nil {
			return err
		}
		return t.wait(ctx)
	}
	if err := checkpoint.Write(path, &c, fill); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	return nil
}

// Load restores weights, optimizer state, seed, step, epoch count, history and the loop's state
// (the EMA, ReduceLROnPlateau's, the best epoch and early stopping's: Config's settings decide
// which of them the run uses) from the checkpoint at path. A file that is not a valid checkpoint
// gives an error wrapping ErrCheckpoint; one written for another model (layers, shapes) or
// optimizer kind, ErrMismatch. On error the trainer's state is unchanged, but for two: ctx ending
// during the final wait for the device, when the uploads are enqueued and the load completes on
// the stream (the error then wraps ctx's), and the file failing its second read (the disk, or a
// file written over in place meanwhile), after which the trainer holds some of its tensors.
//
// Memory: one host copy of the largest tensor. The values stream from the file a set at a time,
// read twice: checked (the file's checksum when it is opened; NaN and infinite values, unless
// Config.AllowNonFinite) and summed first, then uploaded, each set's second read checked against
// its first, so that what is uploaded is what was checked.
func (t *Trainer) Load(ctx context.Context, path string) error {
	// A trainer without an optimizer (predict, export) loads weights; it resumes no run.
	what := "resume from checkpoint"
	if t.opt == nil {
		what = "load checkpoint"
	}
	c, err := readSaved(path)
	var missing error // a trainer without an optimizer takes the weights without the training state
	if errors.Is(err, checkpoint.ErrNoTrainingState) && t.opt == nil {
		missing = err
		if c, err = readCheckpoint(path, true); err == nil {
			c.weightsOnly = true
		}
	}
	if err != nil {
		return fmt.Errorf("train: %s %s: %w", what, path, err)
	}
	defer c.Close()
	if t.opt == nil {
		// A trainer without an optimizer continues no run: it takes the checkpoint's seed.
		t.seed = c.Seed
	}
	if err := t.check(c); err != nil {
		return fmt.Errorf("train: %s %s: %w", what, path, err)
	}
	var pre *models.Preprocess
	if c.state.Preprocess != nil {
		if pre, err = c.state.Preprocess.Preprocess(t.m.in, t.m.classes); err != nil {
			return fmt.Errorf("train: %s %s: %w: %w", what, path, ErrCheckpoint, err)
		}
		// A run resumed on data whose classes have other names would train its outputs as other
		// classes than the checkpoint's (a folder's classes are numbered in sorted order).
		if mine := t.cfg.Preprocess; mine != nil && mine.Classes != nil && pre.Classes != nil && !slices.Equal(mine.Classes, pre.Classes) {
			return fmt.Errorf("train: %s %s: %w: its classes are named %s; the data's %s", what, path, ErrMismatch,
				strings.Join(pre.Classes, ", "), strings.Join(mine.Classes, ", "))
		}
	}
	scratch := make([]float32, c.largest()) // a set at a time, checked, then uploaded
	sums, err := c.scan(scratch, !t.cfg.AllowNonFinite)
	if err != nil {
		return fmt.Errorf("train: %s %s: %w", what, path, err)
	}
	if afterScan != nil {
		afterScan(path)
	}
	if err := ctx.Err(); err != nil { // before the first upload: a cancelled Load changes nothing
		return fmt.Errorf("train: %s %s: %w", what, path, err)
	}
	// The EMA is loaded when the run keeps one, or to serve it (a trainer without an optimizer);
	// a run with an EMA that resumes a checkpoint without one starts it from the weights (setup).
	ema := c.state.EMA && (t.cfg.EMA > 0 || t.opt == nil) && missing == nil
	if ema && !t.hasEMA {
		if err := t.allocEMA(); err != nil {
			return err
		}
	}
	// The values stream from the file a set at a time through one host buffer, each upload
	// complete before the next set is read: a load costs one tensor's host memory, not the
	// model's and its optimizer state's. The uploads run to the end whatever ctx does.
	load := func(i, k int, dst kernels.F32) error {
		host := scratch[:dst.Len]
		if err := c.ReadValues(i, k, host); err != nil {
			return fmt.Errorf("train: %s %s: %w: %w", what, path, ErrCheckpoint, err)
		}
		if crc32.Checksum(f32Bytes(host), castagnoli) != sums[i][k] {
			return fmt.Errorf("train: %s %s: %w: tensor %q changed while it was read (written over in place?)", what, path, ErrCheckpoint, c.Tensors[i].Name)
		}
		if err := upload(t.s, dst, host); err != nil {
			return err
		}
		return t.s.Synchronize(context.WithoutCancel(ctx))
	}
	t.m.thaw()
	for i, p := range t.m.tensors() {
		// Without an optimizer only the weights are loaded (OptimizerState is empty).
		for k, dst := range append([]kernels.F32{p.W}, t.OptimizerState(p)...) {
			if err := load(i, k, dst); err != nil {
				return err
			}
		}
		if ema {
			if err := load(i, len(c.Tensors[i].Values)-1, t.ema[i]); err != nil {
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
	t.seed, t.epochs, t.step, t.history = c.Seed, c.Epochs, c.Steps, c.history
	plateau := t.state.Plateau
	t.state = c.state
	t.state.EMA = false // t.hasEMA says whether the trainer has one
	t.emaMissing = nil
	if c.state.EMA && missing != nil {
		t.emaMissing = fmt.Errorf("%w: its EMA lies in its training state: %w", ErrCheckpoint, missing)
	}
	t.state.Preprocess = nil
	if t.cfg.Preprocess == nil { // the checkpoint's, also over an earlier Load's
		t.pre = pre
	}
	if t.state.Tracked == nil { // a checkpoint written before the counts were kept
		t.state.Tracked = t.m.batchNormCounts(int64(c.state.Batches))
	}
	if t.cfg.Plateau == nil {
		t.state.Plateau = nil
	} else if t.state.Plateau == nil {
		t.state.Plateau = plateau
	}
	if err := t.wait(ctx); err != nil {
		return fmt.Errorf("train: %s %s: %w", what, path, err)
	}
	return nil
}

func (t *Trainer) check(c *saved) error {
	if err := t.m.matches(c); err != nil {
		return fmt.Errorf("train: %w: %w", ErrMismatch, err)
	}
	if c.Seed != t.seed {
		// The data order and the dropout masks follow the seed: another one would silently train
		// on another sequence than the run being continued.
		return fmt.Errorf("train: %w: it was trained with seed %d; this run has seed %d", ErrMismatch, c.Seed, t.seed)
	}
	if t.opt != nil && optimizerKind(c.Optimizer) != optimizerKind(t.opt.String()) {
		return fmt.Errorf("train: %w: it holds optimizer %q; this is %q", ErrMismatch, c.Optimizer, t.opt.String())
	}
	all := t.m.tensors()
	if len(c.Tensors) != len(all) {
		return fmt.Errorf("train: %w: %d parameters; model has %d", ErrMismatch, len(c.Tensors), len(all))
	}
	ema := 0
	if c.state.EMA && !c.weightsOnly {
		ema = 1
	}
	for i, p := range all {
		cp := c.Tensors[i]
		if want := 1 + len(t.OptimizerState(p)) + ema; cp.Name != p.Name || len(cp.Values) != want && (t.opt != nil || len(cp.Values) < 1+ema) {
			return fmt.Errorf("train: %w: parameter %d is %q with %d tensors; want %q with %d", ErrMismatch, i, cp.Name, len(cp.Values), p.Name, want)
		}
		if cp.Shape != nil && !slices.Equal(cp.Shape, p.Shape) {
			return fmt.Errorf("train: %w: parameter %s has shape %v; want %v", ErrMismatch, p.Name, cp.Shape, p.Shape)
		}
		for _, v := range cp.Values {
			if v != nil && len(v) != p.Len() { // in the file (version 4), its shape says its length
				return fmt.Errorf("train: %w: parameter %s has %d values; want %d", ErrMismatch, p.Name, len(v), p.Len())
			}
		}
	}
	return nil
}

// optimizerKind is what a resumed run's optimizer must share with the checkpoint's, from their
// descriptions (Optimizer.String): the first word, and AMSGrad (Adam's and AdamW's amsgrad=true),
// which adds a state tensor; the rates and decays may change.
func optimizerKind(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 { // a damaged checkpoint's
		return ""
	}
	if slices.Contains(f, "amsgrad=true") {
		return f[0] + " amsgrad"
	}
	return f[0]
}

// scan reads every value set of the checkpoint (weights, optimizer state, EMA) into scratch, of
// the largest tensor's length, one at a time: it returns their CRC-32Cs, which the upload checks
// its second read against, and with checkFinite, an error naming the first tensor that holds a NaN
// or an infinite value.
func (c *saved) scan(scratch []float32, checkFinite bool) ([][]uint32, error) {
	sums := make([][]uint32, len(c.Tensors))
	for i, cp := range c.Tensors {
		sums[i] = make([]uint32, len(cp.Values))
		for j := range cp.Values {
			v := scratch[:c.setLen(i)]
			if err := c.ReadValues(i, j, v); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
			}
			sums[i][j] = crc32.Checksum(f32Bytes(v), castagnoli)
			if !checkFinite {
				continue
			}
			if err := weights.Finite(v); err != nil {
				what := "weights"
				switch {
				case c.state.EMA && j == len(cp.Values)-1:
					what = "EMA"
				case j > 0:
					what = fmt.Sprintf("optimizer state %d", j)
				}
				return nil, fmt.Errorf("tensor %q (%s): %w", cp.Name, what, err)
			}
		}
	}
	return sums, nil
}

// afterScan, when set (by a test), runs between Load's two reads of the checkpoint at path.
var afterScan func(path string)

// castagnoli is CRC-32C's table (the checkpoint files' own checksum).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// saved is a checkpoint read back, its loop state and history decoded.
type saved struct {
	*checkpoint.File
	state       loopState
	history     []EpochResult
	weightsOnly bool // read without the training state: each tensor's weights alone
}

// setLen is the number of values of each set of tensor i.
func (c *saved) setLen(i int) int {
	if v := c.Tensors[i].Values[0]; v != nil || c.Tensors[i].Shape == nil {
		return len(v)
	}
	return prod(c.Tensors[i].Shape)
}

// largest is the number of values of the largest tensor.
func (c *saved) largest() int {
	n := 0
	for i := range c.Tensors {
		n = max(n, c.setLen(i))
	}
	return n
}

// readSaved opens the checkpoint at path, its values left in its files until read (ReadValues;
// Close it); an unreadable one gives an error wrapping ErrCheckpoint.
func readSaved(path string) (*saved, error) { return readCheckpoint(path, false) }

// readCheckpoint is readSaved, of the weights alone with weightsOnly.
func readCheckpoint(path string, weightsOnly bool) (_ *saved, err error) {
	f, err := checkpoint.Open(path, weightsOnly)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	c := &saved{File: f}
	if f.State == nil && f.History == nil { // version 1
		for _, e := range f.History1 {
			c.history = append(c.history, EpochResult{Epoch: e.Epoch, TrainLoss: e.TrainLoss, TestAcc: e.TestAcc, Seconds: e.Seconds,
				SamplesPerS: e.SamplesPerS, DataWaitFraction: e.DataWaitFraction})
		}
		c.state.Batches = f.Steps
		return c, nil
	}
	if err := json.Unmarshal(f.State, &c.state); err != nil {
		return nil, fmt.Errorf("%w: the loop's state: %v", ErrCheckpoint, err)
	}
	if err := json.Unmarshal(f.History, &c.history); err != nil {
		return nil, fmt.Errorf("%w: the history: %v", ErrCheckpoint, err)
	}
	if cfg, ok := f.Meta[metaPretrainedCfg]; ok { // version 4; before, in the loop's state
		if err := json.Unmarshal([]byte(cfg), &c.state.Preprocess); err != nil || c.state.Preprocess == nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCheckpoint, metaPretrainedCfg, err)
		}
	}
	return c, nil
}

// CheckpointModel builds the model a checkpoint at path was written for: one NewModel builds (the
// builder, its arguments, the input shape and the classes it records: a built-in model or a
// registered one, models.Register). Load the weights with New(m, dev, nil, Config{Resume: path}) to
// predict or export. A model built otherwise gives an error wrapping ErrMismatch: as with a
// PyTorch state_dict, build that model again with the code that made it (Net) and load it the
// same way. The model's tensors must have the names and sizes of the checkpoint's (so a corrupt
// record cannot ask for more memory than the file holds).
func CheckpointModel(path string) (*Model, error) {
	c, err := readCheckpoint(path, true) // what the model is needs no training state
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	defer c.Close()
	m, err := checkpointModel(c)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w: %w", path, ErrMismatch, err)
	}
	return m, nil
}

// checkpointModel builds c's model: by its builder, or from its description, and checks its
// tensors against c's.
func checkpointModel(c *saved) (*Model, error) {
	if c.Builder != "" {
		m, err := builtModel(c.Builder)
		if err != nil {
			return nil, err
		}
		if err := m.matches(c); err != nil {
			return nil, err
		}
		return m, m.sameTensors(c)
	}
	// Before version 3, a model NewModel built is named by its description's head.
	head, _, _ := strings.Cut(c.Model, ": ")
	m, err := builtModel(head)
	if err == nil {
		if err = m.matches(c); err == nil {
			err = m.sameTensors(c)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("model %q: %w; a model no registered builder made is built again by the code that "+
			"made it (Net), then loaded with New(m, dev, nil, Config{Resume: path})", c.Model, err)
	}
	return m, nil
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
		in.C <= 0 || in.H <= 0 || in.W <= 0 || classes <= 0 || in.Len() > maxInput {
		return nil, fmt.Errorf("model %q: input shape and classes out of range", id)
	}
	return NewModel(id[:i], in, classes)
}

// sameTensors reports whether c holds m's tensors: names and sizes (and shapes, from version 3).
func (m *Model) sameTensors(c *saved) error {
	all := m.tensors()
	if len(all) != len(c.Tensors) {
		return fmt.Errorf("model %q has %d tensors; the checkpoint %d", m.name, len(all), len(c.Tensors))
	}
	for i, p := range all {
		cp := c.Tensors[i]
		if len(cp.Values) == 0 || c.setLen(i) != prod(p.Shape) || cp.Name != p.Name || cp.Shape != nil && !slices.Equal(cp.Shape, p.Shape) {
			return fmt.Errorf("tensor %d of model %q is %s of shape %v; the checkpoint's %q does not match", i, m.name, p.Name, p.Shape, cp.Name)
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
// name, input and classes (Model.String), which the description of a checkpoint before this
// package's layers became modules of nn starts with ("mlp 1x28x28->10: flatten - linear ...").
// The tensors are compared apart.
func (m *Model) matches(c *saved) error {
	switch b := m.builder(); {
	case c.Builder != "" && c.Builder == b:
	case c.Builder != "":
		if b == "" {
			b = m.String()
		}
		return fmt.Errorf("it holds model %q; this is %q", c.Builder, b)
	case c.Model == m.String() || strings.HasPrefix(c.Model, m.String()+": "):
	default:
		return fmt.Errorf("it holds model %q; this is %q", c.Model, m.String())
	}
	return nil
}
