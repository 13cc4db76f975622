//go:build cuda

package predict

import (
	"context"
	"math"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/gputest"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// TestCUDAPredictorMatchesCPU: a Predictor on CUDA gives the CPU's logits (same seeded weights,
// same PNG files, the default Eval transform) to 1e-4 of the largest logit, and the same top-1.
func TestCUDAPredictorMatchesCPU(t *testing.T) {
	gdev := gputest.CUDA(t)
	defer gdev.Close()
	cdev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cdev.Close()
	var inputs []transforms.Input
	for i := range 5 {
		px := make([]byte, 3*(20+i)*24)
		for k := range px {
			px[k] = byte(k*31 + i*7)
		}
		inputs = append(inputs, transforms.Input{Pixels: px, H: 24, W: 20 + i, C: 3})
	}
	logits := func(dev gpu.Device) []Prediction {
		m, err := train.Net("rgb", train.Shape{C: 3, H: 16, W: 16}, 4, nn.Sequential{nn.NewConv2d(3, 4, 3, nn.ConvOptions{Stride: 1, Padding: 1}, true),
			nn.Fn(nn.ReLU), nn.Fn(nn.Flatten), nn.NewLinear(4*16*16, 4, true)})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(context.Background(), m, dev, nil, train.Config{Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		p, err := New(tr, Config{Batch: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out, err := p.Predict(context.Background(), inputs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := logits(cdev), logits(gdev)
	for i := range want {
		var scale float64
		for _, v := range want[i].Logits {
			scale = max(scale, math.Abs(float64(v)))
		}
		for c, v := range got[i].Logits {
			if d := math.Abs(float64(v - want[i].Logits[c])); d > 1e-4*max(scale, 1) {
				t.Fatalf("image %d class %d: CUDA logit %v, CPU %v", i, c, v, want[i].Logits[c])
			}
		}
		if got[i].Top[0] != want[i].Top[0] {
			t.Fatalf("image %d: CUDA top-1 %d, CPU %d", i, got[i].Top[0], want[i].Top[0])
		}
	}
}
