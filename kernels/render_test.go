package kernels_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/opcheck"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/transforms"
)

// renderEnv is a CPU device whose streams may end with a sticky error (the bad records' tests).
func renderEnv(t testing.TB) (gpu.Device, kernels.Ops) {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, ops
}

// TestRenderRecords: the CPU op set's RenderRecords writes Render's pixels (which are Apply's) for
// every record and copies the host's pixels, in mixed batches of real JPEGs, with a workspace
// of exactly the largest record's scratch.
func TestRenderRecords(t *testing.T) {
	dev, ops := renderEnv(t)
	for _, b := range opcheck.RenderBatches(t) {
		got, err := opcheck.RenderOn(t, dev, ops, b, b.Slot)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if i := firstDiff(got, b.Want); i >= 0 {
			size := b.C * b.H * b.W
			t.Errorf("%s: sample %d of %d (kind %d) differs from Apply at byte %d: %d, want %d", b.Name, i/size, b.N,
				b.Offsets[2*(i/size)+1], i%size, got[i], b.Want[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestRenderRecordsBadSamples: each bad sample of opcheck.RenderBadCalls makes the stream's error
// wrap the sentinel the op's doc gives and name the sample.
func TestRenderRecordsBadSamples(t *testing.T) {
	dev, ops := renderEnv(t)
	for _, tc := range opcheck.RenderBadCalls(t, opcheck.RenderBatches(t)) {
		_, err := opcheck.RenderOn(t, dev, ops, tc.Batch, tc.Slot)
		if !errors.Is(err, tc.Want) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("sample %d:", tc.Sample)) {
			t.Errorf("%s: the stream's error is %v; want %v naming sample %d", tc.Name, err, tc.Want, tc.Sample)
		}
	}
}

// BenchmarkRenderRecords times the CPU op set's RenderRecords per record (op: the batch of
// RandomResizedCrop(224)+flip of opcheck.RenderBatches, its parts in parallel, its host pixels
// copied) against transforms.Worker.Render of the same records one after the other (render).
func BenchmarkRenderRecords(b *testing.B) {
	dev, ops := renderEnv(b)
	batch := opcheck.RenderBatches(b)[0]
	records := 0
	for i := range batch.N {
		records += int(batch.Offsets[2*i+1])
	}
	b.Run("op", func(b *testing.B) {
		s, err := dev.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		size := batch.C * batch.H * batch.W
		dst := kernels.Bytes(opcheck.Upload(b, dev, s, make([]byte, batch.N*size)))
		src := kernels.Bytes(opcheck.Upload(b, dev, s, batch.Src))
		offs := kernels.Int32s(opcheck.Upload(b, dev, s, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(batch.Offsets))), 4*len(batch.Offsets))))
		ws := kernels.Bytes(opcheck.Upload(b, dev, s, make([]byte, batch.N*batch.Slot)))
		for b.Loop() {
			if err := ops.RenderRecords(s, dst, src, offs, ws, batch.N, batch.C, batch.H, batch.W); err != nil {
				b.Fatal(err)
			}
			if err := s.Synchronize(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
	b.Run("render", func(b *testing.B) {
		w, dst := transforms.Compose().NewWorker(), make([]byte, batch.C*batch.H*batch.W)
		for b.Loop() {
			for i := range batch.N {
				if batch.Offsets[2*i+1] == 1 {
					if err := w.Render(dst, batch.Src[batch.Offsets[2*i]:]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
}
