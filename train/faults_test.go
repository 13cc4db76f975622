package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/checkpoint"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/safetensors"
	"github.com/stoke-ml/stoke/weights"
)

// TestNonFiniteWeightsRefused: a safetensors file or a checkpoint with a NaN or an infinite value
// is refused at load, by LoadWeights, Config.Init and Config.Resume alike, naming the file and the
// tensor, and loaded when the caller allows it.
func TestNonFiniteWeightsRefused(t *testing.T) {
	f := newFixture(t, 64)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	_, tr := fit(t, f, smallMLP(t), optim.SGD{LR: 0.1, Momentum: 0.9}, Config{Epochs: 1, Checkpoint: ck})
	st := filepath.Join(dir, "w.safetensors")
	if err := tr.Export(context.Background(), st); err != nil {
		t.Fatal(err)
	}

	// One value of a tensor of each file becomes NaN, another's +Inf.
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := safetensors.NewFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	all := sf.Tensors()
	vt := all[len(all)-1]
	victim := vt.Name
	binary.LittleEndian.PutUint32(b[vt.Offset+4:], math.Float32bits(float32(math.NaN())))
	badST := filepath.Join(dir, "nan.safetensors")
	if err := os.WriteFile(badST, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := checkpoint.Read(ck)
	if err != nil {
		t.Fatal(err)
	}
	c.Tensors[0].Values[1][2] = float32(math.Inf(1)) // the first parameter's momentum
	badCK := filepath.Join(dir, "inf.ckpt")
	if err := os.WriteFile(badCK, c.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("Predict", func(t *testing.T) {
		// A trainer without an optimizer (predict, export) loads a checkpoint; it resumes nothing.
		w, err := checkpoint.Read(ck)
		if err != nil {
			t.Fatal(err)
		}
		w.Tensors[0].Values[0][0] = float32(math.NaN())
		nanCK := filepath.Join(dir, "nan.ckpt")
		if err := os.WriteFile(nanCK, w.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = New(context.Background(), smallMLP(t), f.dev, nil, Config{Resume: nanCK})
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "train: load checkpoint "+nanCK) {
			t.Fatalf("a checkpoint with NaN weights for predicting: %v; want ErrNonFinite from loading it, not resuming", err)
		}
	})
	t.Run("LoadWeights", func(t *testing.T) {
		tr2, err := New(context.Background(), smallMLP(t), f.dev, nil, Config{Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer tr2.Close()
		before := modelWeights(t, tr2)
		_, err = tr2.LoadWeights(context.Background(), badST, weights.Options{})
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), badST) || !strings.Contains(err.Error(), `"`+victim+`"`) ||
			!strings.Contains(err.Error(), "1 of") || !strings.Contains(err.Error(), "index 1, is NaN") {
			t.Fatalf("LoadWeights(NaN) = %v; want ErrNonFinite naming %s and %s", err, badST, victim)
		}
		if after := modelWeights(t, tr2); !equalAll(before, after) {
			t.Fatal("a refused file changed the weights")
		}
		if _, err := tr2.LoadWeights(context.Background(), badST, weights.Options{AllowNonFinite: true}); err != nil {
			t.Fatalf("LoadWeights(AllowNonFinite) = %v", err)
		}
	})
	opt := optim.SGD{LR: 0.1, Momentum: 0.9}
	for _, tc := range []struct {
		name, tensor string
		cfg          Config
	}{
		{"Init", victim, Config{Init: badST}},
		{"Resume", c.Tensors[0].Name + `" (optimizer state 1)`, Config{Resume: badCK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), smallMLP(t), f.dev, opt, tc.cfg)
			path := tc.cfg.Init + tc.cfg.Resume
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.tensor) {
				t.Fatalf("New(%s) = %v; want ErrNonFinite naming %s and %s", tc.name, err, path, tc.tensor)
			}
			tc.cfg.AllowNonFinite = true
			tr, err := New(context.Background(), smallMLP(t), f.dev, opt, tc.cfg)
			if err != nil {
				t.Fatalf("New(%s, AllowNonFinite) = %v", tc.name, err)
			}
			tr.Close()
		})
	}
}

func equalAll(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

// TestKeepBestIsNotCheckpoint: Validate refuses a KeepBest that names the Checkpoint file by
// another spelling, a link or a linked folder, and takes two files.
func TestKeepBestIsNotCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	if err := os.WriteFile(ck, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Link(ck, filepath.Join(dir, "hard")))
	must(os.Symlink(ck, filepath.Join(dir, "soft")))
	must(os.Symlink(dir, filepath.Join(dir, "linkdir")))
	for _, tc := range []struct {
		checkpoint, keepBest string
		refused              bool
	}{
		{ck, ck, true},
		{ck, filepath.Join(dir, "sub", "..", "ck"), true},
		{ck, filepath.Join(dir, "hard"), true},
		{ck, filepath.Join(dir, "soft"), true},
		{filepath.Join(dir, "new"), filepath.Join(dir, "linkdir", "new"), true}, // neither exists yet
		{ck, filepath.Join(dir, "best"), false},
		{ck, filepath.Join(dir, "sub", "ck"), false},
	} {
		err := Config{Checkpoint: tc.checkpoint, KeepBest: tc.keepBest}.Validate()
		var fe *FieldError
		if refused := errors.As(err, &fe) && fe.Field == "KeepBest" && fe.With == "Checkpoint"; refused != tc.refused || !tc.refused && err != nil {
			t.Errorf("Validate(Checkpoint %s, KeepBest %s) = %v; want refused %v", tc.checkpoint, tc.keepBest, err, tc.refused)
		}
	}
}

// TestConfigAgreement: every Config field is either agreed by the ranks at start (an agreement
// names it) or declared rank-local, once: a field added without either fails here.
func TestConfigAgreement(t *testing.T) {
	f := newFixture(t, 64)
	tr, err := New(context.Background(), smallMLP(t), f.dev, optim.SGD{LR: 0.1}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	as, err := tr.agreements(f.train)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	note := func(field, where string) {
		if prev, ok := seen[field]; ok {
			t.Errorf("Config.%s is covered twice: %s and %s", field, prev, where)
		}
		seen[field] = where
	}
	for _, a := range as {
		for _, field := range a.fields {
			note(field, "agreement "+a.what)
		}
	}
	for field := range rankLocalConfig {
		note(field, "rank-local")
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if _, ok := seen[name]; !ok {
			t.Errorf("Config.%s is neither agreed by the ranks at start (Trainer.agreements) nor in rankLocalConfig", name)
		}
		delete(seen, name)
	}
	for field, where := range seen {
		t.Errorf("%s names Config.%s, which does not exist", where, field)
	}
}

// TestDataParallelDisagree: ranks whose configurations differ in a setting that changes the
// weights are refused at start on both ranks, naming the setting and both values.
func TestDataParallelDisagree(t *testing.T) {
	imgs, labels := synthetic(64, 1)
	dir := t.TempDir()
	initA, initB := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	for i, path := range []string{initA, initB} {
		tr, err := New(context.Background(), smallMLP(t), openCPU(t), nil, Config{Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Export(context.Background(), path); err != nil {
			t.Fatal(err)
		}
		tr.Close()
	}
	for _, tc := range []struct {
		what       string
		zero, one  Config
		wantValues []string
	}{
		{"schedule", Config{Schedule: optim.Cosine(0)}, Config{Schedule: optim.Constant()}, []string{"rank 0 has x1 x0.5 ", "rank 1 has x1 x1 "}},
		{"schedule", Config{Schedule: optim.Cosine(0), Epochs: 2}, Config{Schedule: optim.Cosine(1), Epochs: 2}, []string{"rank 0 has x1 ", "rank 1 has x0.5 "}},
		{"init", Config{Init: initA}, Config{Init: initB}, []string{"sha256"}},
		{"freezing", Config{}, Config{FreezeBackbone: true}, []string{"backbone false", "backbone true"}},
		{"gradient buckets", Config{}, Config{BucketBytes: 64}, []string{"1 buckets", "3 buckets"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			groups := testGroups(t, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r, cfg := range []Config{tc.zero, tc.one} {
				dev := openCPU(t)
				cfg.Collective = groups[r]
				tr, err := New(context.Background(), smallMLP(t), dev, optim.SGD{LR: 0.05}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tr.Close() })
				data := newRankMem(t, dev, imgs, labels, 32, r, 2, true, 7)
				wg.Go(func() { _, errs[r] = tr.Fit(context.Background(), data, nil) })
			}
			wg.Wait()
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "ranks disagree on "+tc.what+": rank 0 has ") {
					t.Fatalf("rank %d: %v; want a refusal naming %s", r, err, tc.what)
				}
				for _, v := range tc.wantValues {
					if !strings.Contains(err.Error(), v) {
						t.Errorf("rank %d: %v; want %q in it", r, err, v)
					}
				}
			}
		})
	}
}

// TestLoadWeightsErrorBounded: a file of 200,000 stray tensors gives an error that lists a few of
// them and counts the others (it was a 1.69 MB line).
func TestLoadWeightsErrorBounded(t *testing.T) {
	var h strings.Builder
	h.WriteString("{")
	for i := range 200000 {
		if i > 0 {
			h.WriteString(",")
		}
		fmt.Fprintf(&h, `"stray.%06d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
	}
	h.WriteString("}")
	path := writeFile(t, stBytes(h.String(), nil))
	tr, err := New(context.Background(), smallMLP(t), openCPU(t), nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.LoadWeights(context.Background(), path, weights.Options{})
	if !errors.Is(err, ErrMismatch) || len(err.Error()) > 1000 ||
		!strings.Contains(err.Error(), "200000 unexpected (stray.000000, stray.000001,") || !strings.Contains(err.Error(), "stray.000009 and 199990 more)") {
		t.Fatalf("LoadWeights(200,000 stray tensors) = %.2000s (%d bytes); want ErrMismatch listing 10 and counting the rest", err, len(err.Error()))
	}
}

// TestLoadWeightsStemHint: torchvision's 7x7 conv1 loaded into a resnet of 32 px images, whose
// stem is the small-image 3x3 one, is refused with the reason and the way out.
func TestLoadWeightsStemHint(t *testing.T) {
	m, err := NewModel("resnet18", Shape{C: 3, H: 32, W: 32}, 10)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64*3*7*7*4)
	path := writeFile(t, stBytes(fmt.Sprintf(`{"conv1.weight":{"dtype":"F32","shape":[64,3,7,7],"data_offsets":[0,%d]}}`, len(data)), data))
	tr, err := New(context.Background(), m, openCPU(t), nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.LoadWeights(context.Background(), path, weights.Options{})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "conv1.weight: file [64 3 7 7], model [64 3 3 3]") ||
		!strings.Contains(err.Error(), "conv1: the model takes 32x32 images") || !strings.Contains(err.Error(), "larger than 32 px a side") {
		t.Fatalf("LoadWeights(7x7 conv1 into a 32 px resnet18) = %v; want the small-image stem explained", err)
	}
}
