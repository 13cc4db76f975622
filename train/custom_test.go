package train

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// dense is a user's fully connected layer over kernels.Ops: Linear written as a Module.
type dense struct {
	in, out int
	w, b    *Param
	x, y    kernels.F32
	dx      kernels.F32
}

func (l *dense) String() string { return fmt.Sprintf("dense %d->%d", l.in, l.out) }

func (l *dense) Setup(in []int) ([]int, error) {
	if prod(in) != l.in {
		return nil, fmt.Errorf("dense: input %v; want %d values", in, l.in)
	}
	return []int{l.out}, nil
}

func (l *dense) Params() []*Param {
	l.w, l.b = NewWeight("weight", []int{l.out, l.in}), NewBias("bias", []int{l.out})
	return []*Param{l.w, l.b}
}

func (l *dense) Reserve(a Allocator, n int) (err error) {
	if l.y, err = a.F32(n * l.out); err != nil {
		return err
	}
	l.dx, err = a.F32(n * l.in)
	return err
}

func (l *dense) Forward(p *Pass, x kernels.F32, n int) (kernels.F32, error) {
	l.x = x
	y := l.y.Slice(0, n*l.out)
	if err := p.Ops.Gemm(p.Stream, false, true, n, l.out, l.in, 1, x, l.w.W, 0, y); err != nil {
		return y, err
	}
	return y, p.Ops.BiasAdd(p.Stream, y, l.b.W, n, 1)
}

func (l *dense) Backward(p *Pass, dy kernels.F32, n int, needDx bool) (kernels.F32, error) {
	if err := p.Ops.Gemm(p.Stream, true, false, l.out, l.in, n, 1, dy, l.x, 0, l.w.G); err != nil {
		return dy, err
	}
	if err := p.Ops.BiasGrad(p.Stream, l.b.G, dy, n, 1); err != nil || !needDx {
		return kernels.F32{}, err
	}
	dx := l.dx.Slice(0, n*l.in)
	return dx, p.Ops.Gemm(p.Stream, false, false, n, l.in, l.out, 1, dy, l.w.W, 0, dx)
}

func parseDense(desc string) (Module, error) {
	l := &dense{}
	if _, err := fmt.Sscanf(desc, "dense %d->%d", &l.in, &l.out); err != nil {
		return nil, err
	}
	return l, nil
}

// TestCustomLayer: a user's Module written like Linear trains bit for bit like Linear (same
// initialization, same kernels), beside a Residual block too (but not inside one); once
// registered, CheckpointModel rebuilds the model from its checkpoint.
func TestCustomLayer(t *testing.T) {
	f := newFixture(t, 300)
	builtin, err := Sequential("m", img8, 10, Flatten(), Linear(64, 32), ReLU(), Linear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := Sequential("m", img8, 10, Flatten(), Custom(&dense{in: 64, out: 32}), ReLU(),
		Residual([]Layer{Linear(32, 32)}, []Layer{Linear(32, 32)}), Linear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	// A block is one module of package nn: a Module with its own backward pass is refused inside.
	_, err = Sequential("m", img8, 10, Flatten(), Linear(64, 32), ReLU(),
		Residual([]Layer{ReLU()}, []Layer{Custom(&dense{in: 32, out: 32})}), Linear(32, 10))
	if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `layer 3: train: residual block: layer shortcut.0 "dense 32->32" has a backward pass of its own`) {
		t.Errorf("a Module inside a residual block: %v", err)
	}
	plain, err := Sequential("m", img8, 10, Flatten(), Custom(&dense{in: 64, out: 32}), ReLU(), Custom(&dense{in: 32, out: 10}))
	if err != nil {
		t.Fatal(err)
	}
	resA, trA := fit(t, f, builtin, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 4})
	resB, trB := fit(t, f, plain, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 4})
	if resA.FinalLoss != resB.FinalLoss || !slices.EqualFunc(weights(t, trA), weights(t, trB), slices.Equal) {
		t.Errorf("the Module trains otherwise than Linear: loss %v and %v", resB.FinalLoss, resA.FinalLoss)
	}
	if names := []string{trB.m.params[0].Name, trB.m.params[3].Name}; !slices.Equal(names, []string{"1.dense.weight", "3.dense.bias"}) {
		t.Errorf("tensor names %v", names)
	}
	ck := filepath.Join(t.TempDir(), "ck")
	res, tr := fit(t, f, mine, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 4, Checkpoint: ck})
	if res.TestAcc < 0.8 {
		t.Errorf("a model with Modules in a residual block: test accuracy %.3f; want >= 0.8", res.TestAcc)
	}
	if _, err := CheckpointModel(ck); !errors.Is(err, ErrMismatch) ||
		!strings.Contains(err.Error(), `"dense 64->32" is not one of the package's layers nor registered`) {
		t.Fatalf("CheckpointModel before RegisterLayer: %v", err)
	}
	if err := RegisterLayer("dense", parseDense); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"dense", "linear", "two words"} {
		if err := RegisterLayer(kind, parseDense); err == nil {
			t.Errorf("RegisterLayer(%q) twice or reserved: accepted", kind)
		}
	}
	m, err := CheckpointModel(ck)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tr.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := New(context.Background(), m, f.dev, nil, Config{Resume: ck})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	got, err := tr2.Predict(t.Context(), f.test)
	if err != nil || !slices.Equal(got.Logits, want.Logits) {
		t.Fatalf("rebuilt model predicts otherwise (%v)", err)
	}
}
