//go:build cuda

package train

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/gputest"
	"github.com/stoke-ml/stoke/optim"
)

// TestCUDAFP16LossScaling runs TestFP16SkippedStepKeepsAdamWStep's steps on the CUDA op set (on
// the stand-in in CI) next to the CPU emulation: the non-finite count of the scaled gradients
// is made and read back on the device, a step whose gradients overflow fp16 leaves every weight
// as it was, and the next step, applied and unscaled, moves the weights as the CPU's fp16 step
// does.
func TestCUDAFP16LossScaling(t *testing.T) {
	ctx := context.Background()
	run := func(dev gpu.Device) (before, after [][]float32, l lossScale) {
		imgs, labels := synthetic(96, 1)
		d := newMemData(dev, imgs, labels, img8, 32, true, 7)
		defer d.close()
		mean, std := d.Normalization()
		tr, err := New(context.Background(), smallCNN(t), dev, optim.AdamW{LR: 0.01}, Config{Precision: FP16, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		for b, err := range d.Batches(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			keep := b
			keep.Release = nil
			w0 := modelWeights(t, tr)
			tr.scaler.scale = 1 << 40
			if _, err := tr.trainStep(ctx, keep, mean, std, 0, 0); err != nil {
				t.Fatal(err)
			}
			before = modelWeights(t, tr)
			for j := range w0 {
				if !slices.Equal(w0[j], before[j]) {
					t.Fatalf("%s: the skipped step changed parameter %d", dev.Info(), j)
				}
			}
			tr.scaler.scale = 1024
			if _, err := tr.trainStep(ctx, b, mean, std, 0, 0); err != nil {
				t.Fatal(err)
			}
			after = modelWeights(t, tr)
			break
		}
		return before, after, *tr.scaler
	}
	cdev := gputest.CUDA(t)
	defer cdev.Close()
	gb, ga, gl := run(cdev)
	cb, ca, cl := run(openCPU(t))
	if gl != cl || gl.skipped != 1 || gl.good != 1 {
		t.Fatalf("loss scale on cuda %+v, on cpu %+v; want one skipped and one good step on both", gl, cl)
	}
	var diff, size float64
	for j := range gb {
		for k := range gb[j] {
			dg, dc := float64(ga[j][k]-gb[j][k]), float64(ca[j][k]-cb[j][k])
			diff, size = math.Max(diff, math.Abs(dg-dc)), math.Max(size, math.Abs(dc))
		}
	}
	t.Logf("applied fp16 step after a skipped one: cuda vs cpu emulation, largest difference %g, largest update %g", diff, size)
	if !(size > 0 && diff <= 0.01*size) {
		t.Fatalf("cuda fp16 update differs from the cpu emulation's by %g (largest update %g)", diff, size)
	}
}
