package loaders

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/transforms"
)

// vectorDataset has n 1x1 samples with Target {i, -i}; sample bad has a target of the wrong length.
func vectorDataset(n, bad int) *Memory {
	var samples []Sample
	for i := range n {
		tgt := []float32{float32(i), -float32(i)}
		if i == bad {
			tgt = tgt[:1]
		}
		samples = append(samples, Sample{Input: transforms.Input{Pixels: []byte{byte(i)}, H: 1, W: 1, C: 1}, Target: tgt, Key: fmt.Sprint("v", i)})
	}
	return NewMemory(Info{Name: "vectors", Shape: transforms.Shape{C: 1, H: 1, W: 1}}, samples)
}

func floats(t *testing.T, b *Batch, per int) [][]float32 {
	t.Helper()
	raw, ok := gpu.HostBytes(b.Labels)
	if !ok {
		t.Fatal("not a CPU-backend buffer")
	}
	var out [][]float32
	for k := range b.N {
		row := make([]float32, per)
		for c := range row {
			row[c] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(k*per+c):]))
		}
		out = append(out, row)
	}
	return out
}

// TestVectorTarget: float targets travel with their samples, also when the Skip policy compacts a
// batch around a bad one; under FailFast the bad sample is named.
func TestVectorTarget(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := vectorDataset(10, 5)
	l := newLoader(t, ds, Config{Batch: 4, Workers: 3, Target: Vector(2), OnError: Skip})
	n := 0
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		for k, row := range floats(t, b, 2) {
			i := b.Indices[k]
			if i == 5 || row[0] != float32(i) || row[1] != -float32(i) {
				t.Errorf("sample %d: target %v; want [%d %d]", i, row, i, -i)
			}
		}
		n += b.N
		b.Release()
	}
	if n != 9 {
		t.Errorf("%d samples; want 9 (one skipped)", n)
	}
	l = newLoader(t, ds, Config{Batch: 4, Workers: 3, Target: Vector(2)})
	var se *SampleError
	for b, err := range l.Epoch(context.Background(), 0) {
		if b != nil {
			b.Release()
		}
		if err != nil && (!errors.As(err, &se) || se.Index != 5 || se.Key != "v5" || !errors.Is(err, ErrLabel)) {
			t.Errorf("bad target: %v; want a SampleError for sample 5 (v5) wrapping ErrLabel", err)
		}
	}
	if se == nil {
		t.Error("the bad target went through")
	}
}

func TestMultiHotRejects(t *testing.T) {
	dst := make([]byte, 12)
	if err := MultiHot(3).Put(dst, Sample{Labels: []int{1, 3}}); !errors.Is(err, ErrLabel) {
		t.Errorf("label 3 of 3 classes: %v; want ErrLabel", err)
	}
	if err := Vector(1).Put(dst, Sample{Target: []float32{float32(math.NaN())}}); !errors.Is(err, ErrLabel) {
		t.Errorf("NaN target: %v; want ErrLabel", err)
	}
	if err := Class(3).Put(dst, Sample{Label: 3}); !errors.Is(err, ErrLabel) {
		t.Errorf("class 3 of 3: %v; want ErrLabel", err)
	}
}

// TestCollate: the hook sees each complete batch in host memory, in order, and what it writes is
// what reaches the device; its error ends the epoch naming the batch.
func TestCollate(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(10, 1, 2, 1)
	var seqs []int
	collate := func(b *HostBatch) error {
		seqs = append(seqs, b.Seq)
		if len(b.Images) != 2*b.N || len(b.Targets) != 4*b.N || len(b.Indices) != b.N {
			return fmt.Errorf("host batch of %d: %d image bytes, %d target bytes", b.N, len(b.Images), len(b.Targets))
		}
		for k := range b.N {
			b.Images[2*k] = 255 - b.Images[2*k]
			binary.LittleEndian.PutUint32(b.Targets[4*k:], uint32(100+b.Indices[k]))
		}
		return nil
	}
	l := newLoader(t, ds, Config{Batch: 4, Workers: 3, Collate: collate})
	for _, b := range epoch(t, l, 0, -1) {
		for k, i := range b.indices {
			s, _ := ds.Sample(context.Background(), i)
			if b.images[2*k] != 255-s.Input.Pixels[0] || b.images[2*k+1] != s.Input.Pixels[1] || b.labels[k] != int32(100+i) {
				t.Errorf("sample %d: pixels %v label %d; want the collate hook's", i, b.images[2*k:2*k+2], b.labels[k])
			}
		}
	}
	if !slices.Equal(seqs, []int{0, 1, 2}) {
		t.Errorf("collate saw batches %v; want 0, 1, 2 in order", seqs)
	}
	boom := errors.New("boom")
	l = newLoader(t, ds, Config{Batch: 4, Workers: 3, Collate: func(b *HostBatch) error {
		if b.Seq == 1 {
			return boom
		}
		return nil
	}})
	var last error
	for b, err := range l.Epoch(context.Background(), 0) {
		if b != nil {
			b.Release()
		}
		last = err
	}
	if !errors.Is(last, boom) {
		t.Errorf("collate error: %v; want boom", last)
	}
}
