package cpu

import (
	"math"

	"github.com/stoke-ml/stoke/internal/rng"
)

// SGD applies one step of stochastic gradient descent with momentum, PyTorch's formulation:
// g' = g + wd*w; v = momentum*v + g'; step = nesterov ? g' + momentum*v : v; w -= lr*step.
// With momentum 0, v is untouched (and may be nil).
func SGD(w, g, v []float32, lr, momentum, wd float32, nesterov bool) {
	For(len(w), 4, func(lo, hi int) {
		var vs []float32
		if momentum != 0 {
			vs = v[lo:hi]
		}
		lo += sgdSIMD(w[lo:hi], g[lo:hi], vs, lr, momentum, wd, nesterov)
		for i := lo; i < hi; i++ {
			d := g[i] + wd*w[i]
			if momentum != 0 {
				v[i] = momentum*v[i] + d
				if nesterov {
					d += momentum * v[i]
				} else {
					d = v[i]
				}
			}
			w[i] -= lr * d
		}
	})
}

// AdamW applies one step (step counts from 1) of torch.optim.AdamW, in torch's order of
// operations: w *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²; with vmax (AMSGrad; nil
// without) vmax = max(vmax, v) and d = sqrt(vmax)/sqrt(c2) + eps, otherwise d = sqrt(v)/sqrt(c2) +
// eps; w -= (lr/c1)*m/d, where c1 = 1-b1^step and c2 = 1-b2^step. b1, b2, 1-b1, 1-b2, 1-lr*wd,
// lr/c1 and sqrt(c2) are rounded to float32 from float64, as torch's scalars.
func AdamW(w, g, m, v, vmax []float32, lr float32, b1, b2 float64, eps, wd float32, step int) {
	keep := float32(1 - float64(lr)*float64(wd))
	a1, c1 := float32(b1), float32(1-b1)
	a2, c2 := float32(b2), float32(1-b2)
	size := float32(float64(lr) / (1 - math.Pow(b1, float64(step))))
	root := float32(math.Sqrt(1 - math.Pow(b2, float64(step))))
	For(len(w), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			mi := a1*m[i] + c1*g[i]
			vi := a2*v[i] + c2*g[i]*g[i]
			m[i], v[i] = mi, vi
			if vmax != nil {
				vi = max(vmax[i], vi) // NaN propagates, as torch.maximum's
				vmax[i] = vi
			}
			d := float32(math.Sqrt(float64(vi)))/root + eps
			w[i] = w[i]*keep - size*mi/d
		}
	})
}

// RMSprop applies one step of RMSprop, torch.optim.RMSprop's formulation: g' = g + wd*w;
// sq = alpha*sq + (1-alpha)*g'²; centered: ga = alpha*ga + (1-alpha)*g', d = sqrt(sq - ga²) + eps,
// otherwise d = sqrt(sq) + eps; with momentum, b = momentum*b + g'/d and w -= lr*b, otherwise
// w -= lr*g'/d. b is untouched (and may be nil) with momentum 0, ga unless centered. alpha and
// 1-alpha are rounded to float32 from float64, as torch's scalars.
func RMSprop(w, g, sq, b, ga []float32, lr float32, alpha float64, eps, wd, momentum float32, centered bool) {
	a, c := float32(alpha), float32(1-alpha)
	For(len(w), 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := g[i] + wd*w[i]
			s := a*sq[i] + c*d*d
			sq[i] = s
			if centered {
				m := a*ga[i] + c*d
				ga[i] = m
				s -= m * m
			}
			u := d / (float32(math.Sqrt(float64(s))) + eps)
			if momentum != 0 {
				u += momentum * b[i]
				b[i] = u
			}
			w[i] -= lr * u
		}
	})
}

// DropoutKeep reports whether element i survives dropout with probability p under seed: a
// counter-based hash, so any backend and any partition of the work give the same mask.
func DropoutKeep(seed uint64, i int, p float32) bool {
	u := float32(rng.Mix(seed, uint64(i))>>40) / (1 << 24) // uniform in [0,1) with 24 bits
	return u >= p
}

// Dropout writes mask[i] = 1/(1-p) for kept elements and 0 for dropped ones, and y = x*mask;
// y may alias x. p must be in [0,1).
func Dropout(y, mask, x []float32, p float32, seed uint64) {
	scale := 1 / (1 - p)
	For(len(y), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if DropoutKeep(seed, i, p) {
				mask[i] = scale
			} else {
				mask[i] = 0
			}
			y[i] = x[i] * mask[i]
		}
	})
}
