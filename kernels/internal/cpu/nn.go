package cpu

import "math"

// BNGeom is the shape of a batch normalization over NCHW data: statistics per channel over N and
// HW (H*W; 1 after a linear layer).
type BNGeom struct {
	N, C, HW int
}

// count is the number of values per channel.
func (g BNGeom) count() int { return g.N * g.HW }

// BatchNormTrain normalizes x with the batch's per-channel mean and biased variance:
// y = (x-mean)/sqrt(var+eps)*gamma + beta. It writes mean and 1/sqrt(var+eps) to saveMean and
// saveInvStd for the backward pass and moves the running statistics towards the batch's as
// PyTorch does: run = (1-momentum)*run + momentum*batch, with the unbiased variance (count/(count-1))
// for runVar. Sums are float64 (see sums).
func BatchNormTrain(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd []float32, g BNGeom, momentum, eps float32) {
	cnt := float64(g.count())
	For(g.C, 3*g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mean, ss := channelStats(x, g, c)
			bnApply(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, g, c, mean, ss, cnt, momentum, eps)
		}
	})
}

// channelStats returns channel c's mean and sum of squared deviations from it, in two passes.
func channelStats(x []float32, g BNGeom, c int) (mean, ss float64) {
	var s sums
	for n := range g.N {
		s.add(x[(n*g.C+c)*g.HW:][:g.HW])
	}
	mean = s.total() / float64(g.count())
	var sq sums
	for n := range g.N {
		sq.addSquares(x[(n*g.C+c)*g.HW:][:g.HW], mean)
	}
	return mean, sq.total()
}

// bnApply saves channel c's statistics (mean, ss the sum of squared deviations over cnt values),
// moves the running ones and normalizes the channel.
func bnApply(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd []float32, g BNGeom, c int, mean, ss, cnt float64, momentum, eps float32) {
	variance := ss / cnt
	inv := 1 / math.Sqrt(variance+float64(eps))
	saveMean[c], saveInvStd[c] = float32(mean), float32(inv)
	unbiased := variance
	if cnt > 1 {
		unbiased = ss / (cnt - 1)
	}
	runMean[c] = (1-momentum)*runMean[c] + momentum*float32(mean)
	runVar[c] = (1-momentum)*runVar[c] + momentum*float32(unbiased)
	normalize(y, x, g, c, float32(mean), float32(inv), gamma[c], beta[c])
}

// BatchNormStats writes one record of x's statistics to stats (2C+1 values): each channel's mean,
// then each channel's sum of squared deviations from it, then the count N*HW (all 0 without a
// value).
func BatchNormStats(stats, x []float32, g BNGeom) {
	if g.count() == 0 {
		clear(stats) // no value: mean, squared deviations and count 0
		return
	}
	For(g.C, 2*g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mean, ss := channelStats(x, g, c)
			stats[c], stats[g.C+c] = float32(mean), float32(ss)
		}
	})
	stats[2*g.C] = float32(g.count())
}

// BatchNormTrainStats is BatchNormTrain with the statistics combined from the records of
// BatchNormStats in stats ([W][2C+1]), in record order, in float64 (Chan et al.'s pairwise
// update: each record's mean and squared deviations join the running total's). A channel whose
// total count is 0 is left as it is.
func BatchNormTrainStats(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, stats []float32, g BNGeom, momentum, eps float32) {
	rec := 2*g.C + 1
	For(g.C, 2*g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var cnt, mean, ss float64
			for r := 0; r+rec <= len(stats); r += rec {
				k := float64(stats[r+2*g.C])
				if k == 0 {
					continue
				}
				d := float64(stats[r+c]) - mean
				t := cnt + k
				mean += d * k / t
				ss += float64(stats[r+g.C+c]) + d*d*cnt*k/t
				cnt = t
			}
			if cnt > 0 {
				bnApply(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd, g, c, mean, ss, cnt, momentum, eps)
			}
		}
	})
}

// normalize writes channel c of y = (x-mean)*inv*gamma + beta.
func normalize(y, x []float32, g BNGeom, c int, mean, inv, gamma, beta float32) {
	a := inv * gamma
	b := beta - mean*a
	for n := range g.N {
		off := (n*g.C + c) * g.HW
		scaleShift(y[off:off+g.HW], x[off:off+g.HW], a, b)
	}
}

// BatchNormEval normalizes x with the running statistics: y = (x-runMean)/sqrt(runVar+eps)*gamma +
// beta. y may alias x.
func BatchNormEval(y, x, gamma, beta, runMean, runVar []float32, g BNGeom, eps float32) {
	For(g.C, g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			inv := float32(1 / math.Sqrt(float64(runVar[c])+float64(eps)))
			normalize(y, x, g, c, runMean[c], inv, gamma[c], beta[c])
		}
	})
}

// BatchNormBackward computes, from dy and the statistics BatchNormTrain saved, dbeta = Σdy,
// dgamma = Σdy*xhat and dx = gamma*inv/m * (m*dy - dbeta - xhat*dgamma), with xhat = (x-mean)*inv
// and m the count per channel. dx may be nil (not computed).
func BatchNormBackward(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd []float32, g BNGeom) {
	m := float64(g.count())
	For(g.C, 3*g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			mean, inv := saveMean[c], saveInvStd[c]
			var sy, syx sums
			for n := range g.N {
				off := (n*g.C + c) * g.HW
				dys, xs := dy[off:off+g.HW], x[off:off+g.HW]
				sy.add(dys)
				syx.addProducts(dys, xs, mean, inv)
			}
			sdy, sdyx := sy.total(), syx.total()
			dbeta[c], dgamma[c] = float32(sdy), float32(sdyx)
			if dx != nil {
				channelDx(dx, dy, x, gamma, saveMean, saveInvStd, g, c, sdy, sdyx, m)
			}
		}
	})
}

// channelDx writes channel c of dx from the sums of dy (sdy) and dy*xhat (sdyx) over m values.
func channelDx(dx, dy, x, gamma, saveMean, saveInvStd []float32, g BNGeom, c int, sdy, sdyx, m float64) {
	mean, inv := saveMean[c], saveInvStd[c]
	k := gamma[c] * inv
	bmean := float32(sdy / m)
	bx := float32(sdyx / m)
	for n := range g.N {
		off := (n*g.C + c) * g.HW
		bnDx(dx[off:off+g.HW], dy[off:off+g.HW], x[off:off+g.HW], k, bmean, mean, inv, bx)
	}
}

// BatchNormBackwardInput writes dx from sums (2C+1 values: Σdy*xhat per channel, Σdy per channel,
// the count) over every batch, as BatchNormBackward's dx does from one batch's.
func BatchNormBackwardInput(dx, dy, x, gamma, saveMean, saveInvStd, sums []float32, g BNGeom) {
	m := float64(sums[2*g.C])
	For(g.C, g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			channelDx(dx, dy, x, gamma, saveMean, saveInvStd, g, c, float64(sums[g.C+c]), float64(sums[c]), m)
		}
	})
}

// Add computes z = x + y; z may alias x or y.
func Add(z, x, y []float32) {
	For(len(z), 1, func(lo, hi int) {
		zs, xs, ys := z[lo:hi], x[lo:hi], y[lo:hi]
		for i := range zs {
			zs[i] = xs[i] + ys[i]
		}
	})
}

// GlobalAvgPool writes y[r] = the mean of x[r*inner:(r+1)*inner] for each of the len(y) rows,
// summed in float64 over 16 partial sums (sums): the one float32 chain of dependent additions it
// was took 8% of efficientnet_b0's inference (its squeeze-and-excitation gates).
func GlobalAvgPool(y, x []float32, inner int) {
	For(len(y), inner, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var s sums
			s.add(x[r*inner : (r+1)*inner])
			y[r] = float32(s.total() / float64(inner))
		}
	})
}

// GlobalAvgPoolBackward writes dx[r*inner+i] = dy[r]/inner.
func GlobalAvgPoolBackward(dx, dy []float32, inner int) {
	inv := 1 / float32(inner)
	For(len(dy), inner, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			v := dy[r] * inv
			Fill(dx[r*inner:(r+1)*inner], v)
		}
	})
}

// scaleShift writes y[i] = x[i]*a + b (y may be x).
func scaleShift(y, x []float32, a, b float32) {
	k := scaleShiftSIMD(y, x, a, b)
	ys := y[k:len(x)]
	for i, v := range x[k:] {
		ys[i] = float32(v*a) + b // the conversion rounds the product: no fused multiply-add
	}
}

// bnDx writes BatchNorm's input gradient dx[i] = k * (dy[i] - bmean - (x[i]-mean)*inv*bx).
func bnDx(dx, dy, x []float32, k, bmean, mean, inv, bx float32) {
	j := bnDxSIMD(dx, dy, x, k, bmean, mean, inv, bx)
	dxs, xs := dx[j:len(dy)], x[j:len(dy)]
	for i, d := range dy[j:] {
		dxs[i] = k * (d - bmean - float32(float32((xs[i]-mean)*inv)*bx))
	}
}

// sums is a float64 sum kept in 16 partial sums: element i of each run added goes to partial
// i%16, and total adds the partials in order. The result is the same on every run (and in the
// noasm build); the partial sums break the chain of dependent additions that one index-order
// float64 sum was (4 cycles an element: 6% of a ResNet step in BatchNormBackward), and with AVX2
// four vectors of 4 partials take 16 values an iteration.
type sums [16]float64

func (s *sums) total() float64 {
	var t float64
	for _, v := range s {
		t += v
	}
	return t
}

// add adds the values of xs.
func (s *sums) add(xs []float32) {
	for i := sumAddSIMD(s, xs); i < len(xs); i++ {
		s[i&15] += float64(xs[i])
	}
}

// addSquares adds (v-mean)^2 for the values v of xs.
func (s *sums) addSquares(xs []float32, mean float64) {
	for i := sumSquaresSIMD(s, xs, mean); i < len(xs); i++ {
		d := float64(xs[i]) - mean
		s[i&15] += float64(d * d) // rounded before the sum, as the assembly: no fused multiply-add
	}
}

// addProducts adds dy[i]*xhat[i], xhat = (x[i]-mean)*inv rounded to float32 as the backward pass
// uses it.
func (s *sums) addProducts(dy, x []float32, mean, inv float32) {
	x = x[:len(dy)]
	for i := sumProductsSIMD(s, dy, x, mean, inv); i < len(dy); i++ {
		s[i&15] += float64(float64(dy[i]) * float64(float32((x[i]-mean)*inv)))
	}
}
