//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/opcheck"
	"github.com/stoke-ml/stoke/kernels"
)

// renderSide is a device of the render tests, whose streams may end with a sticky error.
func renderSide(t *testing.T, name string) (gpu.Device, kernels.Ops) {
	t.Helper()
	dev, err := gpu.Open(name)
	if err != nil {
		if name == "cuda" {
			t.Skipf("no CUDA device: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	ops, err := kernels.For(dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, ops
}

// TestCUDARenderRecords: the CUDA op set's RenderRecords writes the CPU op set's pixels (Render's,
// which are Apply's) byte for byte, on every batch of opcheck.RenderBatches: records of real
// JPEGs (every scale, sequential and progressive, gray, YCbCr and RGB, EXIF orientations,
// padded, flipped and turned outputs, the three filters) among the host's pixels, with a
// workspace of exactly the largest record's scratch (cuda-sim.sh's exact allocations fault a
// kernel that writes past it).
func TestCUDARenderRecords(t *testing.T) {
	gdev, gops := renderSide(t, "cuda")
	cdev, cops := renderSide(t, "cpu")
	for _, b := range opcheck.RenderBatches(t) {
		want, err := opcheck.RenderOn(t, cdev, cops, b, b.Slot)
		if err != nil {
			t.Fatalf("%s on the CPU op set: %v", b.Name, err)
		}
		got, err := opcheck.RenderOn(t, gdev, gops, b, b.Slot)
		if err != nil {
			t.Fatalf("%s on the CUDA op set: %v", b.Name, err)
		}
		diff, worst, first := 0, 0, -1
		for i := range got {
			if d := int(got[i]) - int(want[i]); d != 0 {
				diff, worst = diff+1, max(worst, d, -d)
				if first < 0 {
					first = i
				}
			}
		}
		if diff > 0 {
			size := b.C * b.H * b.W
			t.Errorf("%s: %d of %d bytes differ from the CPU op set's (by at most %d), the first in sample %d (kind %d) at byte %d: %d, CPU %d",
				b.Name, diff, len(got), worst, first/size, b.Offsets[2*(first/size)+1], first%size, got[first], want[first])
		}
	}
}

// TestCUDARenderRecordsBadSamples: each bad sample of opcheck.RenderBadCalls makes the CUDA
// stream's error wrap the sentinel of the CPU op set's and name the sample.
func TestCUDARenderRecordsBadSamples(t *testing.T) {
	dev, ops := renderSide(t, "cuda")
	for _, tc := range opcheck.RenderBadCalls(t, opcheck.RenderBatches(t)) {
		_, err := opcheck.RenderOn(t, dev, ops, tc.Batch, tc.Slot)
		if !errors.Is(err, tc.Want) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("sample %d:", tc.Sample)) {
			t.Errorf("%s: the stream's error is %v; want %v naming sample %d", tc.Name, err, tc.Want, tc.Sample)
		}
	}
}

// renderParityCase is TestCUDAParity's case of RenderRecords: the batch of RandomResizedCrop(24)
// of opcheck.RenderBatches, whose records take every scale (TestCUDARenderRecords runs them all).
func renderParityCase() parityCase {
	var batch *opcheck.RenderBatch
	return parityCase{"render records", 0, func(t *testing.T, sd *side, r *rand.Rand) []any {
		if batch == nil {
			for _, b := range opcheck.RenderBatches(t) {
				if b.Name == "RandomResizedCrop(24)+flip, seed 0, 3 channels" {
					batch = &b
				}
			}
		}
		b := batch
		dst := sd.u8(t, make([]byte, b.N*b.C*b.H*b.W))
		ws := sd.u8(t, make([]byte, b.N*b.Slot))
		check(t, sd.ops.RenderRecords(sd.s, dst, sd.u8(t, b.Src), sd.i32(t, b.Offsets), ws, b.N, b.C, b.H, b.W))
		return []any{dst}
	}}
}
