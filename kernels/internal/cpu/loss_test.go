package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFloatLossFiniteDifferences: every loss's gradient matches central differences of its value,
// with pos_weight for BCEWithLogits, soft targets that do not sum to 1 for SoftCrossEntropy, and
// logits large enough that a naive sigmoid would overflow.
func TestFloatLossFiniteDifferences(t *testing.T) {
	const n, dim = 5, 7
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		kind  int
		beta  float32
		pw    bool
		scale float64
	}{
		{"soft cross-entropy", SoftCrossEntropy, 0, false, 3},
		{"bce", BCEWithLogits, 0, false, 3},
		{"bce pos_weight", BCEWithLogits, 0, true, 3},
		{"bce large logits", BCEWithLogits, 0, true, 60},
		{"mse", MSE, 0, false, 3},
		{"smooth l1", SmoothL1, 0.7, false, 3},
		{"l1", SmoothL1, 0, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, tg, d := make([]float32, n*dim), make([]float32, n*dim), make([]float32, n*dim)
			for i := range x {
				x[i] = float32((2*r.Float64() - 1) * tc.scale)
				tg[i] = float32(r.Float64())
				if tc.kind == BCEWithLogits {
					tg[i] = float32(r.IntN(2))
				}
			}
			var pw []float32
			if tc.pw {
				pw = make([]float32, dim)
				for j := range pw {
					pw[j] = float32(0.5 + 2*r.Float64())
				}
			}
			FloatLoss(d, x, tg, pw, n, dim, tc.kind, tc.beta)
			scratch := make([]float32, n*dim)
			for i := range x {
				h := float32(1e-3)
				if e := math.Abs(float64(x[i] - tg[i])); (tc.kind == SmoothL1) && (math.Abs(e-float64(tc.beta)) < 2e-3 || e < 2e-3) {
					continue // at a kink
				}
				old := x[i]
				x[i] = old + h
				up := FloatLoss(scratch, x, tg, pw, n, dim, tc.kind, tc.beta)
				x[i] = old - h
				down := FloatLoss(scratch, x, tg, pw, n, dim, tc.kind, tc.beta)
				x[i] = old
				num := (up - down) / float64((old+h)-(old-h))
				if diff := math.Abs(num - float64(d[i])); diff > 1e-4+1e-3*math.Abs(num) {
					t.Errorf("d[%d] = %g; central difference %g", i, d[i], num)
				}
			}
		})
	}
}

// TestFloatLossValues checks each loss against its formula at points worked by hand.
func TestFloatLossValues(t *testing.T) {
	d := make([]float32, 2)
	for _, tc := range []struct {
		name      string
		kind      int
		beta      float32
		x, tg, pw []float32
		want      float64
		wantD0    float64
	}{
		// log 2 for a logit of 0 whatever the target; pos_weight 3 triples the positive term.
		{"bce", BCEWithLogits, 0, []float32{0, 0}, []float32{1, 0}, []float32{3, 3}, (3*math.Ln2 + math.Ln2) / 2, (0.5*3 - 3) / 2},
		// A logit of 1000: no overflow, loss 1000 for target 0, 0 for target 1.
		{"bce saturated", BCEWithLogits, 0, []float32{1000, 1000}, []float32{0, 1}, nil, 500, 0.5},
		{"mse", MSE, 0, []float32{3, 1}, []float32{1, 1}, nil, 2, 2},
		{"smooth l1", SmoothL1, 1, []float32{3, 1.5}, []float32{1, 1}, nil, (1.5 + 0.125) / 2, 0.5},
		// One sample of two classes, uniform logits, target (0.25, 0.75): -ln(1/2).
		{"soft ce", SoftCrossEntropy, 0, []float32{2, 2}, []float32{0.25, 0.75}, nil, math.Ln2, 0.25},
	} {
		n, dim := 1, 2
		if tc.kind != SoftCrossEntropy {
			n, dim = 2, 1
			if tc.pw != nil {
				tc.pw = tc.pw[:1]
			}
		}
		got := FloatLoss(d, tc.x, tc.tg, tc.pw, n, dim, tc.kind, tc.beta)
		if math.Abs(got-tc.want) > 1e-6 || math.Abs(float64(d[0])-tc.wantD0) > 1e-6 {
			t.Errorf("%s: loss %v, d[0] %v; want %v and %v", tc.name, got, d[0], tc.want, tc.wantD0)
		}
	}
}
