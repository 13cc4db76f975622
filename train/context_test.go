package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/weights"
)

// sameWeights fails t unless a and b are the same bit for bit.
func sameWeights(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: tensor %d[%d] = %v; want %v (unchanged)", what, i, j, b[i][j], a[i][j])
			}
		}
	}
}

// emptyDir fails t if dir holds anything (a file, or an atomic write's temporary one), and
// removes it for the next call.
func emptyDir(t *testing.T, what, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		t.Errorf("%s left %s behind", what, e.Name())
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestContextCancelled checks that every blocking method fails on a cancelled context with an error
// wrapping context.Canceled, writing no file and leaving the trainer's weights as they were.
func TestContextCancelled(t *testing.T) {
	f := newFixture(t, 128)
	_, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Seed: 1, EMA: 0.5})
	// A second model's weights and checkpoint, for LoadWeights and Load to (not) read.
	_, other := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Seed: 1, Epochs: 2})
	src := t.TempDir()
	stPath, ckPath := filepath.Join(src, "other.safetensors"), filepath.Join(src, "other.ckpt")
	if err := other.Export(context.Background(), stPath); err != nil {
		t.Fatal(err)
	}
	if err := other.Save(context.Background(), ckPath); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want := modelWeights(t, tr)
	if ow := modelWeights(t, other); math.Float32bits(ow[0][0]) == math.Float32bits(want[0][0]) {
		t.Fatalf("the other model's weights equal these (%v): LoadWeights' test would not see a change", ow[0][0])
	}
	if ema := readBack(t, tr, tr.ema); math.Float32bits(ema[0][0]) == math.Float32bits(want[0][0]) {
		t.Fatalf("the EMA equals the weights (%v): UseEMA's test would not see a change", ema[0][0])
	}
	epochs := tr.Epochs()

	out := t.TempDir()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Save", func() error { return tr.Save(ctx, filepath.Join(out, "ckpt")) }},
		{"Export", func() error { return tr.Export(ctx, filepath.Join(out, "w.safetensors")) }},
		{"ExportONNX", func() error { return tr.ExportONNX(ctx, filepath.Join(out, "m.onnx"), nil, nil) }},
		{"LoadWeights", func() error { _, err := tr.LoadWeights(ctx, stPath, weights.Options{}); return err }},
		{"Load", func() error { return tr.Load(ctx, ckPath) }},
		{"UseEMA", func() error { _, err := tr.UseEMA(ctx); return err }},
		{"Fit", func() error { _, err := tr.Fit(ctx, f.train, f.test); return err }},
		{"PredictBatch", func() error {
			for b, err := range f.test.Batches(context.Background(), 0) {
				if err != nil {
					return err
				}
				_, err := tr.PredictBatch(ctx, b, nil, nil)
				return err
			}
			return errors.New("no batch")
		}},
		{"New", func() error {
			tr2, err := New(ctx, smallMLP(t), f.dev, nil, Config{Resume: ckPath})
			if err == nil {
				tr2.Close()
			}
			return err
		}},
	} {
		if err := tc.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s(cancelled ctx) = %v; want an error wrapping context.Canceled", tc.name, err)
		}
		emptyDir(t, tc.name, out)
		sameWeights(t, tc.name, want, modelWeights(t, tr))
	}
	if tr.Epochs() != epochs {
		t.Errorf("epochs = %d after the cancelled calls; want %d", tr.Epochs(), epochs)
	}
	// The trainer still works with a live context.
	if err := tr.Save(context.Background(), filepath.Join(out, "ckpt")); err != nil {
		t.Fatal(err)
	}
}

// TestContextDeadlineWhileWaiting checks that the wait itself honours ctx: with the stream held
// by a host function, Save, Export and ExportONNX return when ctx's deadline passes, having
// written nothing, and the trainer works again once the stream moves on.
func TestContextDeadlineWhileWaiting(t *testing.T) {
	f := newFixture(t, 64)
	_, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1}, Config{Seed: 1})
	out := t.TempDir()
	hold := make(chan struct{})
	if err := tr.Stream().Host(func() error { <-hold; return nil }); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(hold)
		}
	}()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Save", func(ctx context.Context) error { return tr.Save(ctx, filepath.Join(out, "ckpt")) }},
		{"Export", func(ctx context.Context) error { return tr.Export(ctx, filepath.Join(out, "w.safetensors")) }},
		{"ExportONNX", func(ctx context.Context) error { return tr.ExportONNX(ctx, filepath.Join(out, "m.onnx"), nil, nil) }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- tc.call(ctx) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s with the stream held has not returned a minute after ctx's deadline", tc.name)
		}
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with the stream held = %v; want an error wrapping context.DeadlineExceeded", tc.name, err)
		}
		emptyDir(t, tc.name, out)
	}
	close(hold)
	released = true
	if err := tr.Save(context.Background(), filepath.Join(out, "ckpt")); err != nil {
		t.Fatal(err)
	}
}
