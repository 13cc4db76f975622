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
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/weights"
)

// stBytes assembles a safetensors file from its JSON header and data, unchecked.
func stBytes(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func writeFile(t testing.TB, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadWeightsRoundTrip: weights exported by one trainer and loaded into a fresh one (another
// seed, which predicted before) predict bit for bit alike, and exporting them again writes the same file byte for byte
// (num_batches_tracked included).
func TestLoadWeightsRoundTrip(t *testing.T) {
	f := newFixture(t, 100)
	_, tr := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 1, Seed: 3})
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if err := tr.Export(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	want, err := tr.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := New(context.Background(), smallResNet(t), f.dev, nil, Config{Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	// A prediction before the load prepares the convolutions over tr2's own weights, which the
	// load must drop.
	if _, err := tr2.Predict(t.Context(), f.test); err != nil {
		t.Fatal(err)
	}
	rep, err := tr2.LoadWeights(context.Background(), first, weights.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Loaded) != len(tr2.m.tensors()) || len(rep.Missing)+len(rep.Unexpected)+len(rep.Mismatched) != 0 {
		t.Fatalf("report %+v", rep)
	}
	got, err := tr2.Predict(t.Context(), f.test)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Logits, want.Logits) {
		t.Fatal("logits after LoadWeights differ from the exporting trainer's")
	}
	if err := tr2.Export(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Fatalf("export after import differs from the imported file (%d and %d bytes)", len(a), len(b))
	}
}

// TestLoadWeightsStrict: a file for another head and with a stray tensor is refused with every
// problem listed and the weights untouched; Partial loads the rest; NewHead keeps the head fresh.
func TestLoadWeightsStrict(t *testing.T) {
	f := newFixture(t, 100)
	// The same layers with a 5-class head.
	other := smallResNetOf(t, 5)
	trOther, err := New(context.Background(), other, f.dev, nil, Config{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := trOther.Export(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	trOther.Close()

	tr, err := New(context.Background(), smallResNet(t), f.dev, nil, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := modelWeights(t, tr)
	_, err = tr.LoadWeights(context.Background(), path, weights.Options{})
	if !errors.Is(err, ErrMismatch) ||
		!strings.Contains(err.Error(), "2 mis-shaped (8.linear.weight: file [5 8], model [10 8], 8.linear.bias: file [5], model [10])") {
		t.Fatalf("strict load of a 5-class file into a 10-class model: %v", err)
	}
	if !slices.EqualFunc(modelWeights(t, tr), before, slices.Equal) {
		t.Fatal("a refused load changed the weights")
	}
	for _, tc := range []struct {
		opts     weights.Options
		loaded   int
		newHead  int
		mismatch int
	}{
		{weights.Options{Partial: true}, len(before) - 2, 0, 2},
		{weights.Options{NewHead: true}, len(before) - 2, 2, 0},
	} {
		tr, err := New(context.Background(), smallResNet(t), f.dev, nil, Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := tr.LoadWeights(context.Background(), path, tc.opts)
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		if len(rep.Loaded) != tc.loaded || len(rep.NewHead) != tc.newHead || len(rep.Mismatched) != tc.mismatch || len(rep.Missing)+len(rep.Unexpected) != 0 {
			t.Errorf("%+v: report %+v", tc.opts, rep)
		}
		got := modelWeights(t, tr)
		for i, p := range tr.m.tensors() {
			fromFile := !strings.HasPrefix(p.Name, "8.linear")
			if slices.Equal(got[i], before[i]) == fromFile && p.kind == kindWeight {
				t.Errorf("%+v: %s loaded from the file: %v; want %v", tc.opts, p.Name, !fromFile, fromFile)
			}
		}
		tr.Close()
	}

	// Missing and unexpected tensors are listed by name, every one at once.
	tr3, err := New(context.Background(), smallMLP(t), f.dev, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.Close()
	_, err = tr3.LoadWeights(context.Background(), path, weights.Options{})
	for _, want := range []string{
		"4 missing (1.linear.weight, 1.linear.bias, 4.linear.weight, 4.linear.bias)",
		"unexpected (0.conv2d.weight, 1.batchnorm.bias",
		"model small-mlp",
	} {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("load of a resnet's weights into an mlp: %v; want %q", err, want)
		}
	}
}

// TestLoadWeightsDTypes: F16 and BF16 tensors convert exactly (normals, subnormals, the largest
// half, infinities); other dtypes are refused naming the tensor.
func TestLoadWeightsDTypes(t *testing.T) {
	dev := openCPU(t)
	m, err := tSequential("lin", Shape{C: 1, H: 1, W: 3}, 2, tFlatten(), tLinear(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	halves := []uint16{0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x8000} // 1, -2, 2^-24, 65504, +Inf, -0
	wantW := []float32{1, -2, 1.0 / (1 << 24), 65504, float32(math.Inf(1)), float32(math.Copysign(0, -1))}
	bf := []uint16{0x3f80, 0xc0a0} // 1, -5
	wantB := []float32{1, -5}
	var data []byte
	for _, h := range append(halves, bf...) {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	header := `{"1.linear.weight":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"1.linear.bias":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}}`
	// The +Inf is allowed here to check its conversion (TestNonFiniteWeightsRefused: refused by default).
	if _, err := tr.LoadWeights(context.Background(), writeFile(t, stBytes(header, data)), weights.Options{AllowNonFinite: true}); err != nil {
		t.Fatal(err)
	}
	got := modelWeights(t, tr)
	for i, want := range [][]float32{wantW, wantB} {
		for j := range want {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[j]) {
				t.Errorf("%s[%d] = %v; want %v", tr.m.tensors()[i].Name, j, got[i][j], want[j])
			}
		}
	}
	header = `{"1.linear.weight":{"dtype":"F64","shape":[2,3],"data_offsets":[0,48]},"1.linear.bias":{"dtype":"F32","shape":[2],"data_offsets":[48,56]}}`
	if _, err := tr.LoadWeights(context.Background(), writeFile(t, stBytes(header, make([]byte, 56))), weights.Options{}); !errors.Is(err, ErrSafetensors) ||
		!strings.Contains(err.Error(), `"1.linear.weight": dtype F64`) {
		t.Errorf("F64 weights: %v; want ErrSafetensors naming the tensor", err)
	}
}

// ExampleTrainer_LoadWeights fine-tunes from a safetensors file: here one that Export wrote for
// another number of classes, so the head is left freshly initialized (NewHead), as torchvision
// fine-tuning replaces model.fc.
func ExampleTrainer_LoadWeights() {
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	path := filepath.Join(os.TempDir(), "stoke-example.safetensors")
	defer os.Remove(path)
	pre, _ := tSequential("tiny", Shape{C: 1, H: 8, W: 8}, 10, tFlatten(), tLinear(64, 32), tReLU(), tLinear(32, 10))
	trPre, _ := New(context.Background(), pre, dev, nil, Config{Seed: 1})
	trPre.Export(context.Background(), path) // a pretrained model's weights
	trPre.Close()

	m, _ := tSequential("tiny", Shape{C: 1, H: 8, W: 8}, 3, tFlatten(), tLinear(64, 32), tReLU(), tLinear(32, 3))
	tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.01, Momentum: 0.9}, Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	rep, err := tr.LoadWeights(context.Background(), path, weights.Options{NewHead: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("loaded:", rep.Loaded)
	fmt.Println("new head:", rep.NewHead)
	// Output:
	// loaded: [1.linear.weight 1.linear.bias]
	// new head: [3.linear.weight 3.linear.bias]
}
