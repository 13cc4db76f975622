package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/optim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openCPU(t testing.TB) gpu.Device {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

var img8 = Shape{C: 1, H: 8, W: 8}

// The small models are registered, so that CheckpointModel rebuilds them.
func init() {
	for name, build := range map[string]func(testing.TB) *Model{"small-mlp": smallMLP, "small-resnet": smallResNet, "small-cnn": smallCNN} {
		err := models.Register(name, func(args string, in Shape, classes int) (*models.Model, error) {
			if args != "" || in != img8 || classes != 10 {
				return nil, fmt.Errorf("%s takes no arguments, 1x8x8 images and 10 classes", name)
			}
			m := build(panicTB{})
			return &models.Model{Name: m.Name(), Module: m.Module()}, nil
		})
		if err != nil {
			panic(err)
		}
	}
}

// panicTB is a testing.TB for a builder, which has none: a failure panics.
type panicTB struct{ testing.TB }

func (panicTB) Helper()           {}
func (panicTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func smallMLP(t testing.TB) *Model {
	t.Helper()
	m, err := tSequential("small-mlp", img8, 10, tFlatten(), tLinear(64, 32), tReLU(), tDropout(0.1), tLinear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func smallCNN(t testing.TB) *Model {
	t.Helper()
	m, err := tSequential("small-cnn", img8, 10, tConv(1, 4, 3, 1), tReLU(), tMaxPool(2), tFlatten(), tLinear(64, 10))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// modelWeights reads every parameter's values back from the device.
func modelWeights(t testing.TB, tr *Trainer) [][]float32 {
	t.Helper()
	var vs []kernels.F32
	for _, p := range tr.m.tensors() {
		vs = append(vs, p.W)
	}
	return readBack(t, tr, vs)
}

// readBack copies views of the trainer's device memory to the host.
func readBack(t testing.TB, tr *Trainer, vs []kernels.F32) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, v := range vs {
		host := make([]float32, v.Len)
		if err := tr.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), v.Buf, 4*v.Off); err != nil {
			t.Fatal(err)
		}
		out = append(out, host)
	}
	if err := tr.s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

type fixture struct {
	dev         gpu.Device
	train, test *memData
}

func newFixture(t testing.TB, n int) *fixture {
	dev := openCPU(t)
	imgs, labels := synthetic(n, 1)
	timgs, tlabels := synthetic(200, 2)
	f := &fixture{dev: dev,
		train: newMemData(dev, imgs, labels, img8, 32, true, 7),
		test:  newMemData(dev, timgs, tlabels, img8, 50, false, 0)}
	t.Cleanup(func() { f.train.close(); f.test.close() })
	return f
}

func fit(t testing.TB, f *fixture, m *Model, opt optim.Optimizer, cfg Config) (Result, *Trainer) {
	t.Helper()
	tr, err := New(context.Background(), m, f.dev, opt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	res, err := tr.Fit(context.Background(), f.train, f.test)
	if err != nil {
		t.Fatal(err)
	}
	return res, tr
}

func TestNewModel(t *testing.T) {
	mnist := Shape{C: 1, H: 28, W: 28}
	for _, tc := range []struct {
		name   string
		params int
	}{
		{"mlp", 784*512 + 512 + 512*256 + 256 + 256*10 + 10},
		{"cnn", 32*25 + 32 + 64*32*25 + 64 + 64*7*7*128 + 128 + 128*10 + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewModel(tc.name, mnist, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.NumParams(); got != tc.params {
				t.Fatalf("NewModel(%q).NumParams() = %d; want %d", tc.name, got, tc.params)
			}
		})
	}
	if _, err := NewModel("resnet", mnist, 10); !errors.Is(err, ErrModel) {
		t.Fatalf("NewModel(resnet) error = %v; want ErrModel", err)
	}
	if _, err := tSequential("bad", mnist, 10, tFlatten(), tLinear(100, 10)); !errors.Is(err, ErrModel) {
		t.Fatalf("Sequential with a misfit Linear error = %v; want ErrModel", err)
	}
	if _, err := tSequential("bad", mnist, 10, tConv(3, 4, 3, 1)); !errors.Is(err, ErrModel) {
		t.Fatalf("Sequential with a misfit Conv2D error = %v; want ErrModel", err)
	}
}

func TestFitLearns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func(testing.TB) *Model
		opt   optim.Optimizer
	}{
		{"mlp sgd nesterov", smallMLP, optim.SGD{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-4}},
		{"cnn sgd", smallCNN, optim.SGD{LR: 0.05, Momentum: 0.9}},
		{"mlp adamw", smallMLP, optim.AdamW{LR: 3e-3, WeightDecay: 1e-2}},
		{"cnn rmsprop", smallCNN, optim.RMSprop{LR: 2e-3, Alpha: 0.9, Eps: 0.0316, Momentum: 0.9, WeightDecay: 1e-5}},
		{"resnet sgd", smallResNet, optim.SGD{LR: 0.05, Momentum: 0.9, WeightDecay: 5e-4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1000)
			var steps, epochsSeen int
			res, tr := fit(t, f, tc.model(t), tc.opt, Config{Epochs: 3, Seed: 1, Schedule: optim.Cosine(0.2), Progress: func(p *Progress) {
				if p.Done {
					epochsSeen++
				} else {
					steps++
				}
			}})
			if res.TestAcc < 0.9 {
				t.Fatalf("test accuracy after 3 epochs = %v; want >= 0.9 (history %+v)", res.TestAcc, res.History)
			}
			if h := res.History; h[2].TrainLoss >= h[0].TrainLoss {
				t.Fatalf("train loss went from %v to %v; want it to fall", h[0].TrainLoss, h[2].TrainLoss)
			}
			if steps != 3*32 || epochsSeen != 3 {
				t.Fatalf("progress calls: %d steps, %d epochs; want 96 and 3", steps, epochsSeen)
			}
			if res.Epochs != 3 || res.FinalLoss != res.History[2].TrainLoss || !(res.SamplesPerS > 0) || res.DataWaitFraction < 0 || res.DataWaitFraction > 1 {
				t.Fatalf("result = %+v; want 3 epochs, final loss of the last epoch, positive speed, wait fraction in [0,1]", res)
			}
			if tr.m.capN != 32 {
				t.Fatalf("activations hold %d samples after evaluating batches of 50; want 32, the training batch", tr.m.capN)
			}
			if f.train.release != 3*32 {
				t.Fatalf("Release called %d times; want %d", f.train.release, 3*32)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	run := func() (Result, [][]float32) {
		f := newFixture(t, 300)
		res, tr := fit(t, f, smallCNN(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 3})
		return res, modelWeights(t, tr)
	}
	r1, w1 := run()
	r2, w2 := run()
	if r1.FinalLoss != r2.FinalLoss {
		t.Fatalf("final loss = %v then %v; want identical", r1.FinalLoss, r2.FinalLoss)
	}
	for i := range w1 {
		for j := range w1[i] {
			if math.Float32bits(w1[i][j]) != math.Float32bits(w2[i][j]) {
				t.Fatalf("param %d[%d] = %v then %v; want identical", i, j, w1[i][j], w2[i][j])
			}
		}
	}
}

func TestResumeEqualsUninterrupted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func(testing.TB) *Model
		opt   optim.Optimizer
	}{
		{"mlp with dropout, sgd", smallMLP, optim.SGD{LR: 0.05, Momentum: 0.9, Nesterov: true}},
		{"cnn adamw", smallCNN, optim.AdamW{LR: 1e-3}},
		{"mlp centered rmsprop", smallMLP, optim.RMSprop{LR: 1e-3, Momentum: 0.9, WeightDecay: 1e-4, Centered: true}},
		{"resnet with batch norm, sgd", smallResNet, optim.SGD{LR: 0.05, Momentum: 0.9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Epochs: 3, Seed: 5, Schedule: optim.Cosine(0.5)}
			full, trFull := fit(t, newFixture(t, 200), tc.model(t), tc.opt, cfg)
			want := modelWeights(t, trFull)

			// The interrupted run is the same run, killed after its first epoch's checkpoint.
			part := cfg
			part.Checkpoint = filepath.Join(dir, "ckpt")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			part.Progress = func(p *Progress) {
				if p.Done && p.Epoch == 1 {
					cancel()
				}
			}
			f := newFixture(t, 200)
			tr1, err := New(context.Background(), tc.model(t), f.dev, tc.opt, part)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr1.Fit(ctx, f.train, f.test); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted Fit error = %v; want context.Canceled", err)
			}
			if err := tr1.Close(); err != nil {
				t.Fatal(err)
			}

			resumed := cfg
			resumed.Resume = part.Checkpoint
			res, tr := fit(t, newFixture(t, 200), tc.model(t), tc.opt, resumed)
			if res.FinalLoss != full.FinalLoss || res.Epochs != 3 || len(res.History) != 3 {
				t.Fatalf("resumed: final loss %v after %d epochs; want %v after 3", res.FinalLoss, res.Epochs, full.FinalLoss)
			}
			got := modelWeights(t, tr)
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("param %d[%d] = %v resumed; want %v", i, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}

func TestCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "good")
	fit(t, newFixture(t, 64), smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Checkpoint: path})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name  string
		path  string
		model func(testing.TB) *Model
		opt   optim.Optimizer
		want  error
	}{
		{"truncated", write("trunc", good[:len(good)-10]), smallMLP, optim.SGD{LR: 0.1, Momentum: 0.9}, ErrCheckpoint},
		{"bit flip", write("flip", flipped), smallMLP, optim.SGD{LR: 0.1, Momentum: 0.9}, ErrCheckpoint},
		{"not a checkpoint", write("text", []byte("hello, world; this is not a checkpoint")), smallMLP, optim.SGD{LR: 0.1, Momentum: 0.9}, ErrCheckpoint},
		{"wrong model", path, smallCNN, optim.SGD{LR: 0.1, Momentum: 0.9}, ErrMismatch},
		{"wrong optimizer", path, smallMLP, optim.AdamW{LR: 0.1}, ErrMismatch},
		{"sgd's checkpoint for rmsprop", path, smallMLP, optim.RMSprop{LR: 0.1, Momentum: 0.9}, ErrMismatch},
		{"missing file", filepath.Join(dir, "none"), smallMLP, optim.SGD{LR: 0.1, Momentum: 0.9}, os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.model(t), openCPU(t), tc.opt, Config{Resume: tc.path})
			if !errors.Is(err, tc.want) {
				t.Fatalf("New(resume %s) error = %v; want %v", tc.name, err, tc.want)
			}
		})
	}
}

func TestBadBatch(t *testing.T) {
	f := newFixture(t, 64)
	m, err := tSequential("mlp16", Shape{C: 1, H: 4, W: 4}, 10, tFlatten(), tLinear(16, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, f.dev, optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background(), f.train, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("Fit with 8x8 batches for a 4x4 model: error = %v; want ErrConfig", err)
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t, 640)
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	tr, err := New(context.Background(), smallMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{Epochs: 5, Progress: func(p *Progress) {
		if steps++; steps == 3 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(ctx, f.train, f.test); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fit after cancel: error = %v; want context.Canceled", err)
	}
	if steps != 3 {
		t.Fatalf("steps run = %d; want 3", steps)
	}
}

func TestModelReusableAfterClose(t *testing.T) {
	f := newFixture(t, 64)
	m := smallMLP(t)
	if _, err := New(context.Background(), m, f.dev, optim.SGD{LR: 0.1}, Config{Resume: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("New with a missing checkpoint: error = nil; want one")
	}
	res, _ := fit(t, f, m, optim.SGD{LR: 0.1}, Config{})
	if res.Epochs != 1 {
		t.Fatalf("model reused after a failed New: %d epochs trained; want 1", res.Epochs)
	}
}
