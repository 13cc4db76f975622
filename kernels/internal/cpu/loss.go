package cpu

import "math"

// The kinds of FloatLoss, kernels.LossKind's values.
const (
	SoftCrossEntropy = 1
	BCEWithLogits    = 2
	MSE              = 3
	SmoothL1         = 4
)

// softplus is log(1 + e^x), without overflow.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// FloatLoss writes d, the gradient of the mean loss of predictions x against float targets t
// ([n][dim] each), and returns that mean: per sample for SoftCrossEntropy, per element for the
// others (PyTorch's reduction="mean"). pw, if not empty, is BCEWithLogits' pos_weight per column;
// beta is SmoothL1's. Rows are summed in order in float64.
func FloatLoss(d, x, t, pw []float32, n, dim, kind int, beta float32) float64 {
	if n == 0 {
		return 0
	}
	losses := make([]float64, n)
	inv := 1 / float64(n*dim)
	if kind == SoftCrossEntropy {
		inv = 1 / float64(n)
	}
	b := float64(beta)
	For(n, 8*dim, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xs, ts, ds := x[i*dim:(i+1)*dim], t[i*dim:(i+1)*dim], d[i*dim:(i+1)*dim]
			var l float64
			switch kind {
			case SoftCrossEntropy:
				mx := xs[0]
				for _, v := range xs[1:] {
					mx = max(mx, v)
				}
				var sum, tsum float64
				for j, v := range xs {
					sum += math.Exp(float64(v - mx))
					tsum += float64(ts[j])
				}
				lse := math.Log(sum)
				for j, v := range xs {
					z := float64(v-mx) - lse // log softmax
					l -= float64(ts[j]) * z
					ds[j] = float32((math.Exp(z)*tsum - float64(ts[j])) * inv)
				}
			case BCEWithLogits:
				for j, v := range xs {
					xv, tv, w := float64(v), float64(ts[j]), 1.0
					if len(pw) > 0 {
						w = float64(pw[j])
					}
					l += w*tv*softplus(-xv) + (1-tv)*softplus(xv)
					sig := 1 / (1 + math.Exp(-xv))
					ds[j] = float32((sig*(w*tv+1-tv) - w*tv) * inv)
				}
			case MSE:
				for j, v := range xs {
					e := float64(v) - float64(ts[j])
					l += e * e
					ds[j] = float32(2 * e * inv)
				}
			case SmoothL1:
				for j, v := range xs {
					e := float64(v) - float64(ts[j])
					a := math.Abs(e)
					if a < b {
						l += 0.5 * e * e / b
						ds[j] = float32(e / b * inv)
						continue
					}
					l += a - 0.5*b
					g := 0.0
					if e > 0 {
						g = 1
					} else if e < 0 {
						g = -1
					}
					ds[j] = float32(g * inv)
				}
			}
			losses[i] = l
		}
	})
	var total float64
	for _, l := range losses {
		total += l
	}
	return total * inv
}
