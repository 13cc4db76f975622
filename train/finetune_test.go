package train

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/optim"
)

// columns relabels synthetic's 10 classes by the column of their bright square: 5 classes, a
// task of its own that features learned on the 10 classes serve.
func columns(labels []int32) []int32 {
	out := make([]int32, len(labels))
	for i, l := range labels {
		out[i] = l % 5
	}
	return out
}

// fiveClassResNet is smallResNet with a 5-class head.
func fiveClassResNet(t testing.TB) *Model {
	t.Helper()
	return smallResNetOf(t, 5)
}

// TestFineTuneFrozenBackbone: weights trained on one task, exported, start a run on another
// task with another class count (Config.Init, the head replaced) and a frozen backbone: the
// frozen parameters and BatchNorm statistics are bit for bit those of the file after training,
// they have no gradient buffer and no optimizer state, the head trains, and the accuracy beats
// the same head trained on a frozen random backbone.
func TestFineTuneFrozenBackbone(t *testing.T) {
	f := newFixture(t, 1000)
	_, pre := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 3})
	path := filepath.Join(t.TempDir(), "pre.safetensors")
	if err := pre.Export(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	preW := map[string][]float32{}
	for i, p := range pre.m.tensors() {
		preW[p.Name] = modelWeights(t, pre)[i]
	}

	imgs, labels := synthetic(600, 11)
	timgs, tlabels := synthetic(300, 12)
	train5 := newMemData(f.dev, imgs, columns(labels), img8, 32, true, 7)
	test5 := newMemData(f.dev, timgs, columns(tlabels), img8, 100, false, 0)
	defer train5.close()
	defer test5.close()
	run := func(cfg Config) (*Trainer, [][]float32, float64) {
		tr, err := New(context.Background(), fiveClassResNet(t), f.dev, optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		before := modelWeights(t, tr)
		res, err := tr.Fit(t.Context(), train5, test5)
		if err != nil {
			t.Fatal(err)
		}
		return tr, before, res.TestAcc
	}
	tr, before, acc := run(Config{Epochs: 2, Seed: 5, Init: path, FreezeBackbone: true})
	if rep := tr.InitReport(); !slices.Equal(rep.NewHead, []string{"8.linear.weight", "8.linear.bias"}) || len(rep.Loaded) != len(tr.m.tensors())-2 {
		t.Fatalf("init report %+v", rep)
	}
	if len(tr.m.Params()) != 2 {
		t.Fatalf("%d trained tensors; want the head's 2", len(tr.m.Params()))
	}
	after := modelWeights(t, tr)
	for i, p := range tr.m.tensors() {
		head := strings.HasPrefix(p.Name, "8.linear")
		if !head {
			if !slices.Equal(after[i], preW[p.Name]) {
				t.Errorf("frozen %s changed in training", p.Name)
			}
			if p.G.Buf != nil || len(tr.OptimizerState(p)) != 0 {
				t.Errorf("frozen %s has a gradient buffer or optimizer state", p.Name)
			}
		}
		if head && slices.Equal(after[i], before[i]) {
			t.Errorf("head %s did not train", p.Name)
		}
	}
	_, _, random := run(Config{Epochs: 2, Seed: 5, FreezeBackbone: true})
	t.Logf("head on the pretrained backbone: %.1f%%; on a random one: %.1f%%", 100*acc, 100*random)
	if !(acc > random+0.1) || acc < 0.8 {
		t.Errorf("fine-tuned accuracy %.3f; want at least 0.8 and above the random backbone's %.3f by 0.1", acc, random)
	}
}

// TestFreezeUpToAndLRGroups: FreezeUpTo freezes a prefix of the layers; the layers after it
// train, those before keep their values; BackboneLRScale slows the backbone; mistakes are
// refused.
func TestFreezeUpToAndLRGroups(t *testing.T) {
	f := newFixture(t, 200)
	tr, err := New(context.Background(), smallResNet(t), f.dev, optim.SGD{LR: 0.05}, Config{Seed: 1, FreezeUpTo: "3.residual"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := modelWeights(t, tr)
	if _, err := tr.Fit(t.Context(), f.train, nil); err != nil {
		t.Fatal(err)
	}
	after := modelWeights(t, tr)
	for i, p := range tr.m.tensors() {
		frozen := strings.HasPrefix(p.Name, "0.") || strings.HasPrefix(p.Name, "1.") || strings.HasPrefix(p.Name, "3.")
		if changed := !slices.Equal(before[i], after[i]); changed == frozen && (p.kind == kindWeight || p.buffer()) {
			t.Errorf("%s: changed %v; frozen %v", p.Name, changed, frozen)
		}
	}

	// A frozen run resumes from its checkpoint (frozen tensors carry no optimizer state) to the
	// weights of an uninterrupted run.
	ck := filepath.Join(t.TempDir(), "ck")
	_, whole := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 1, FreezeUpTo: "3.residual"})
	fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 1, FreezeUpTo: "3.residual", Checkpoint: ck})
	_, resumed := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 1, FreezeUpTo: "3.residual", Resume: ck})
	if !slices.EqualFunc(modelWeights(t, whole), modelWeights(t, resumed), slices.Equal) {
		t.Error("a resumed frozen run differs from an uninterrupted one")
	}

	// With the backbone's rate scaled by 1e-9, a step moves it by almost nothing, while the head
	// moves as without the scale.
	step := func(scale float64) (backbone, head float64) {
		tr, err := New(context.Background(), smallResNet(t), f.dev, optim.SGD{LR: 0.05}, Config{Seed: 1, BackboneLRScale: scale})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		before := modelWeights(t, tr)
		if _, err := tr.Fit(t.Context(), f.train, nil); err != nil {
			t.Fatal(err)
		}
		for i, v := range modelWeights(t, tr) {
			d := 0.0
			for j := range v {
				d = max(d, float64(abs32(v[j]-before[i][j])))
			}
			if strings.HasPrefix(tr.m.tensors()[i].Name, "8.") {
				head = max(head, d)
			} else if !tr.m.tensors()[i].buffer() {
				backbone = max(backbone, d)
			}
		}
		return backbone, head
	}
	b1, h1 := step(0)
	bs, hs := step(1e-9)
	if !(bs < b1*1e-6) || !(hs > h1/10) {
		t.Errorf("backbone moved %g (scale 1e-9) and %g (none); head %g and %g", bs, b1, hs, h1)
	}

	for _, cfg := range []Config{
		{FreezeUpTo: "nope"},
		{FreezeUpTo: "8.linear"},
		{FreezeUpTo: "3.residual", FreezeBackbone: true},
		{BackboneLRScale: -1},
	} {
		tr, err := New(context.Background(), smallResNet(t), f.dev, optim.SGD{LR: 0.05}, cfg)
		if err == nil {
			tr.Close()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("New with %+v: %v; want ErrConfig", cfg, err)
		}
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// TestDataParallelFrozen: two ranks fine-tuning with frozen layers reduce only the trained
// gradients: they finish with the same weights, and the frozen ones unchanged.
func TestDataParallelFrozen(t *testing.T) {
	imgs, labels := synthetic(256, 1)
	groups := testGroups(t, 2)
	trs := make([]*Trainer, 2)
	var before [][]float32
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		dev := openCPU(t)
		data := newRankMem(t, dev, imgs, labels, 32, r, 2, true, 7)
		tr, err := New(context.Background(), smallResNet(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Seed: 3, FreezeUpTo: "3.residual", Collective: groups[r]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs[r] = tr
		if r == 0 {
			before = modelWeights(t, tr)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = tr.Fit(context.Background(), data, nil)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	a, b := modelWeights(t, trs[0]), modelWeights(t, trs[1])
	for i, p := range trs[0].m.tensors() {
		if !slices.Equal(a[i], b[i]) {
			t.Errorf("%s differs between the ranks", p.Name)
		}
		frozen := strings.HasPrefix(p.Name, "0.") || strings.HasPrefix(p.Name, "1.") || strings.HasPrefix(p.Name, "3.")
		if frozen != slices.Equal(a[i], before[i]) && (p.kind == kindWeight || p.buffer()) {
			t.Errorf("%s: unchanged %v; frozen %v", p.Name, !frozen, frozen)
		}
	}
}

// TestFreezeUpToTensor: FreezeUpTo naming one tensor freezes the rest of its module with it: a
// batch norm's bias with its weight (frozen alone, the weight would put the norm in evaluation
// mode and leave the bias without a gradient).
func TestFreezeUpToTensor(t *testing.T) {
	m := smallResNet(t)
	tr, err := New(t.Context(), m, openCPU(t), optim.SGD{LR: 0.1}, Config{FreezeUpTo: "1.batchnorm.weight"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var frozen []string
	for _, p := range m.frozen {
		frozen = append(frozen, p.Name)
	}
	if want := []string{"0.conv2d.weight", "1.batchnorm.weight", "1.batchnorm.bias"}; !slices.Equal(frozen, want) {
		t.Errorf("frozen %v; want %v", frozen, want)
	}
}
