//go:build cuda

package train

import (
	"math"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/gputest"
	"github.com/stoke-ml/stoke/optim"
)

// TestCUDALoop runs the loop around the step on the CUDA op set (on the stand-in in CI) next to
// the CPU's: accumulated batches, clipping (the sums of squares in parts), an EMA and the plateau
// schedule give the same weights, EMA and scores within float32 rounding of the CPU's.
func TestCUDALoop(t *testing.T) {
	run := func(dev gpu.Device) ([][]float32, [][]float32, Result) {
		imgs, labels := synthetic(160, 1)
		timgs, tlabels := synthetic(100, 2)
		data := newMemData(dev, imgs, labels, img8, 16, true, 7)
		test := newMemData(dev, timgs, tlabels, img8, 50, false, 0)
		t.Cleanup(func() { data.close(); test.close() })
		cfg := Config{Epochs: 2, Seed: 3, Accumulate: 3, ClipGradNorm: 0.5, EMA: 0.8, Plateau: &Plateau{Factor: 0.5}}
		per, ema, res := stepWeights(t, dev, smallCNN(t), data, test, optim.SGD{LR: 0.05, Momentum: 0.9}, cfg)
		return per[len(per)-1], ema, res
	}
	cuda := gputest.CUDA(t)
	t.Cleanup(func() { cuda.Close() })
	w, ema, res := run(cuda)
	wc, emac, resc := run(openCPU(t))
	d := max(relDiff(w, wc), relDiff(ema, emac)) // measured on the stand-in: 7.8e-8
	t.Logf("CUDA vs CPU: weights and EMA within %.2g of the largest; accuracy %v vs %v, top-5 %v vs %v", d, res.TestAcc, resc.TestAcc,
		res.TestTop5, resc.TestTop5)
	if d > 1e-4 {
		t.Errorf("CUDA's weights or EMA differ from the CPU's by %.2g of the largest; want < 1e-4", d)
	}
	if math.Abs(res.TestAcc-resc.TestAcc) > 0.011 || math.Abs(res.EMAAcc-resc.EMAAcc) > 0.011 || math.Abs(res.TestTop5-resc.TestTop5) > 0.011 {
		t.Errorf("CUDA scores %v %v %v; the CPU's %v %v %v", res.TestAcc, res.EMAAcc, res.TestTop5, resc.TestAcc, resc.EMAAcc, resc.TestTop5)
	}
}
