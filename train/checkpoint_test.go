package train

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// TestCheckpointTarget: Config.Checkpoint never replaces something that is not a checkpoint (a
// device, a FIFO, a folder, a user's file): New refuses it before any training, leaving it as it
// was; an existing checkpoint or an empty file is fine.
func TestCheckpointTarget(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("my data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "ck.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{text, fifo, dir} {
		tr, err := New(context.Background(), smallMLP(t), openCPU(t), optim.SGD{LR: 0.1}, Config{Checkpoint: path})
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("New with Checkpoint %s = %v; want ErrConfig", path, err)
		}
	}
	if b, _ := os.ReadFile(text); string(b) != "my data" {
		t.Errorf("%s now holds %q", text, b)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO is gone or replaced: %v %v", st, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	fit(t, newFixture(t, 64), smallMLP(t), optim.SGD{LR: 0.1}, Config{Checkpoint: good})
	for _, path := range []string{empty, good} {
		tr, err := New(context.Background(), smallMLP(t), openCPU(t), optim.SGD{LR: 0.1}, Config{Checkpoint: path})
		if err != nil {
			t.Errorf("New with Checkpoint %s = %v; want it accepted", path, err)
			continue
		}
		tr.Close()
	}
}

// TestCheckpointIdentity: a checkpoint names a model NewModel built by its builder, input and
// classes, with its tensors' shapes, and a model of another builder or shape is refused; one
// written before (version 2, no builder, no shapes) is still read by its description's head, so a
// layer's reworded description breaks no checkpoint of a built-in model, while a model built by
// hand keeps its description as its identity.
func TestCheckpointIdentity(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, 64)
	mlp := func(t testing.TB) *Model {
		m, err := NewModel("mlp", img8, 10)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ck := filepath.Join(dir, "mlp.ck")
	_, tr := fit(t, f, mlp(t), optim.SGD{LR: 0.1}, Config{Seed: 2, Checkpoint: ck})
	want := modelWeights(t, tr)
	c, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	if c.Builder != "mlp 1x8x8->10" || !slices.Equal(c.Tensors[0].Shape, []int{512, 64}) {
		t.Fatalf("checkpoint identity %q, first tensor %s of shape %v; want mlp 1x8x8->10 and [512 64]", c.Builder, c.Tensors[0].Name, c.Tensors[0].Shape)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	resume := func(m *Model, path string) ([][]float32, error) {
		tr, err := New(context.Background(), m, f.dev, optim.SGD{LR: 0.1}, Config{Seed: 2, Resume: path})
		if err != nil {
			return nil, err
		}
		defer tr.Close()
		return modelWeights(t, tr), nil
	}

	// Version 2, the layers described in other words: read as the built-in mlp.
	old := *c
	old.Builder = ""
	old.Model = strings.ReplaceAll(c.Model, "linear", "dense")
	v2 := write("v2.ck", encodeV2(t, &old))
	got, err := resume(mlp(t), v2)
	if err != nil {
		t.Fatalf("resume from a version 2 checkpoint of mlp: %v", err)
	}
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("tensor %d resumed from version 2 differs from the checkpoint's", i)
		}
	}
	if m, err := CheckpointModel(v2); err != nil || m.builder() != "mlp 1x8x8->10" {
		t.Fatalf("CheckpointModel of version 2 = %v, %v; want the built-in mlp", m, err)
	}

	// The same layers built by hand are not the built-in model of a version 3 checkpoint, which
	// names its builder; a version 2 checkpoint names none, and its name, input, classes and
	// tensors are what the hand-built model has, as a state_dict's keys would be.
	byHand := func(t testing.TB) *Model {
		m, err := tSequential("mlp", img8, 10, tFlatten(), tLinear(64, 512), tReLU(), tLinear(512, 256), tReLU(), tLinear(256, 10))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := resume(byHand(t), ck); !errors.Is(err, ErrMismatch) {
		t.Errorf("resume of a hand-built model from the built-in mlp's checkpoint: %v; want ErrMismatch", err)
	}
	if got, err := resume(byHand(t), v2); err != nil || !sameBits(got[0], want[0]) {
		t.Errorf("resume of a hand-built mlp from a version 2 checkpoint: %v; want its weights", err)
	}

	// A tensor of the same size but another shape.
	bad := *c
	bad.Tensors = slices.Clone(c.Tensors)
	bad.Tensors[0].Shape = []int{64, 512}
	shaped := write("shape.ck", bad.Encode())
	if _, err := resume(mlp(t), shaped); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "shape") {
		t.Errorf("resume from a tensor of another shape: %v; want ErrMismatch naming the shape", err)
	}
	if _, err := CheckpointModel(shaped); !errors.Is(err, ErrMismatch) {
		t.Errorf("CheckpointModel of a tensor of another shape: %v; want ErrMismatch", err)
	}
}

// encodeV2 writes c in checkpoint format version 2: no builder, no shapes.
func encodeV2(t *testing.T, c *checkpoint.File) []byte {
	t.Helper()
	var p []byte
	str := func(s string) {
		p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
		p = append(p, s...)
	}
	str(c.Model)
	str(c.Optimizer)
	p = binary.LittleEndian.AppendUint64(p, c.Seed)
	p = binary.LittleEndian.AppendUint32(p, uint32(c.Epochs))
	p = binary.LittleEndian.AppendUint64(p, uint64(c.Steps))
	for _, b := range [][]byte{c.State, c.History} {
		p = binary.LittleEndian.AppendUint64(p, uint64(len(b)))
		p = append(p, b...)
	}
	p = binary.LittleEndian.AppendUint32(p, uint32(len(c.Tensors)))
	for _, ct := range c.Tensors {
		str(ct.Name)
		p = binary.LittleEndian.AppendUint32(p, uint32(len(ct.Values)))
		for _, v := range ct.Values {
			p = binary.LittleEndian.AppendUint64(p, uint64(len(v)))
			for _, x := range v {
				p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
			}
		}
	}
	out := append([]byte("STOKECKP"), 2, 0, 0, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
	out = append(out, p...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
}

// TestResumeNothingLeft: resuming a 2-epoch checkpoint with Epochs 2 (or fewer) trains nothing,
// and says so with ErrConfig rather than reporting the checkpoint's run as its own.
func TestResumeNothingLeft(t *testing.T) {
	f := newFixture(t, 64)
	path := filepath.Join(t.TempDir(), "ck")
	fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Epochs: 2, Checkpoint: path})
	for _, epochs := range []int{1, 2} {
		tr, err := New(context.Background(), smallMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{Epochs: epochs, Resume: path})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Fit(context.Background(), f.train, f.test)
		tr.Close()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "2 epochs are done and Epochs is "+fmt.Sprint(epochs)) {
			t.Errorf("resume of 2 epochs with Epochs %d: %v; want ErrConfig saying nothing is left", epochs, err)
		}
	}
	_, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Epochs: 3, Resume: path})
	if tr.Epochs() != 3 {
		t.Errorf("resume to 3 epochs: %d done", tr.Epochs())
	}
}

// TestCheckpointWithoutTrainingState: a checkpoint copied without its training state still
// predicts (a trainer without an optimizer takes the weights), but does not resume, and its EMA
// cannot be served: UseEMA says where it lies.
func TestCheckpointWithoutTrainingState(t *testing.T) {
	f := newFixture(t, 64)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	_, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Epochs: 1, Checkpoint: ck, EMA: 0.9})
	tr.UseEMA(t.Context()) // what a served trainer predicts is not the point: the weights are
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "ck.train-") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	served, err := New(t.Context(), smallMLP(t), f.dev, nil, Config{Resume: ck})
	if err != nil {
		t.Fatalf("a trainer without an optimizer on a checkpoint without its training state: %v", err)
	}
	defer served.Close()
	if _, err := served.Predict(t.Context(), f.test); err != nil {
		t.Fatal(err)
	}
	if _, err := served.UseEMA(t.Context()); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "training state") {
		t.Errorf("UseEMA without the training state: %v; want ErrCheckpoint naming the training state", err)
	}
	if _, err := New(t.Context(), smallMLP(t), f.dev, optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Resume: ck}); !errors.Is(err, checkpoint.ErrNoTrainingState) {
		t.Errorf("resume without the training state: %v; want ErrNoTrainingState", err)
	}
}

// TestActivationsTooLarge: a batch whose activations, estimated from the model's trace, would not
// fit beside the model in the device's memory is refused before anything is allocated, with the
// figures and the largest activation; a batch that fits is not.
func TestActivationsTooLarge(t *testing.T) {
	dev := openCPU(t)
	m, err := NewModel("resnet18", Shape{C: 3, H: 1024, W: 1024}, 10)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(t.Context(), m, dev, optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	n := int(dev.Info().Memory/(8*m.acts1Estimate(t))) + 1 // one image more than fits
	err = tr.reserve(t.Context(), n)
	if !errors.Is(err, gpu.ErrOutOfMemory) || !strings.Contains(err.Error(), "lower the batch size or the image size") ||
		!strings.Contains(err.Error(), "the largest, a conv2d's output") || m.capN != 0 {
		t.Fatalf("a batch of %d 1024 px images: %v (capacity %d); want ErrOutOfMemory naming the figures, nothing allocated", n, err, m.capN)
	}
	if err := tr.reserve(t.Context(), 2); err != nil {
		t.Errorf("a batch of 2: %v", err)
	}
}

// acts1Estimate is the activations of one sample, as checkActivations counts them.
func (m *Model) acts1Estimate(t *testing.T) int64 {
	t.Helper()
	s, err := nn.Summarize(m.module, 1, m.in.C, m.in.H, m.in.W)
	if err != nil {
		t.Fatal(err)
	}
	return s.Activations
}

// TestLoadStreams: Load reads a checkpoint a value set at a time, allocating about its largest
// tensor (twice: checked, then uploaded), not the weights and optimizer state whole; the loaded
// weights and optimizer state are the saved ones.
func TestLoadStreams(t *testing.T) {
	f := newFixture(t, 64)
	wide := func() *Model {
		m, err := tSequential("wide-mlp", img8, 10, tFlatten(), tLinear(64, 1024), tReLU(), tLinear(1024, 1024), tReLU(), tLinear(1024, 10))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ck := filepath.Join(t.TempDir(), "ck")
	_, saved := fit(t, f, wide(), optim.AdamW{LR: 1e-3}, Config{Seed: 1, Checkpoint: ck})
	tr, err := New(t.Context(), wide(), f.dev, optim.AdamW{LR: 1e-3}, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := tr.Load(t.Context(), ck); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	var all, largest int
	for _, p := range tr.m.tensors() {
		all += 3 * 4 * p.Len() // the weights and AdamW's two slots
		largest = max(largest, 4*p.Len())
	}
	if a := int(after.TotalAlloc - before.TotalAlloc); a > largest+1<<20 {
		t.Errorf("Load of %d KiB of values allocated %d KiB; want the largest tensor's %d KiB and buffers", all>>10, a>>10, largest>>10)
	}
	state := func(tr *Trainer) [][]float32 {
		var vs []kernels.F32
		for _, p := range tr.m.tensors() {
			vs = append(append(vs, p.W), tr.OptimizerState(p)...)
		}
		return readBack(t, tr, vs)
	}
	got, want := state(tr), state(saved)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("value set %d differs from the saved trainer's", i)
		}
	}
}

// TestLoadChangedMeanwhile: a checkpoint written over in place between Load's check and its
// upload is an error wrapping ErrCheckpoint that names the tensor, not weights of two files.
func TestLoadChangedMeanwhile(t *testing.T) {
	f := newFixture(t, 64)
	ck := filepath.Join(t.TempDir(), "ck")
	fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Seed: 1, Checkpoint: ck})
	afterScan = func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0x40 // the last tensor's last value, in place
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { afterScan = nil }()
	tr, err := New(t.Context(), smallMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Load(t.Context(), ck); !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), "changed while it was read") {
		t.Errorf("Load of a file changed between its reads: %v; want ErrCheckpoint saying so", err)
	}
}
