//go:build cuda

package models_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/gputest"
	"github.com/stoke-ml/stoke/train"
)

// TestFamiliesCUDA: the small model of every family of the zoo (torchvisionCases, their randomness
// turned off as TestFamiliesEverywhere turns it off) takes its first steps on the CUDA backend as on
// the CPU, from the same weights on the same images: the first loss (the forward pass of every op
// of the family) within 1e-5 of the CPU's (the ResNet's measured 8e-7), the second within 5e-3, and
// the weights after the first step within 0.1 of each tensor's largest (or 1e-3). The backends sum
// in different orders, and the gradients that a later batch norm all but cancels (the biases of
// the batch norms before a ResNet's next convolution) are their float noise: measured up to 1.7e-3
// for the second loss and 0.055 for those biases (resnet at 1x1 maps of 8 values), 1.4e-4 for
// mobilenet_v2's weights, under 3e-5 for the other families'; a wrong gradient moves them by its
// whole size. Where the steps lead, a training run of each family checks (scripts/cuda-sim.sh
// --train).
func TestFamiliesCUDA(t *testing.T) {
	gputest.CUDA(t).Close()
	const batch, steps = 8, 2
	for _, c := range torchvisionCases {
		spec, random := deterministic(c.spec)
		name, _, _ := strings.Cut(spec, "(")
		t.Run(name, func(t *testing.T) {
			if random {
				t.Skip("keeps a dropout its builder has no argument for")
			}
			in := train.Shape{C: 3, H: c.size, W: c.size}
			samples := randomSamples(batch*steps, c.size)
			cpu := familyRun(t, "cpu", spec, in, samples, batch, "", 1)[0]
			cuda := familyRun(t, "cuda", spec, in, samples, batch, "", 1)[0]
			for s, tol := range []float64{1e-5, 5e-3} {
				if a, b := cpu.losses[s], cuda.losses[s]; !(math.Abs(a-b) <= tol*a) {
					t.Errorf("step %d's loss %.7f; the CPU's %.7f (tolerance %.0e of it)", s+1, b, a, tol)
				}
			}
			if d := relDiffAll(cpu.weights[0], cuda.weights[0]); !(d <= 0.1) {
				t.Errorf("after step 1 the weights are %.2g (of the largest) from the CPU's; want <= 0.1", d)
			}
			t.Logf("loss %.7f, %.7f on the CPU; after step 1 the weights %.2g apart", cuda.losses[1], cpu.losses[1], relDiffAll(cpu.weights[0], cuda.weights[0]))
		})
	}
}
