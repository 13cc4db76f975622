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
// for runVar. Sums are float64 (see sum4).
func BatchNormTrain(y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd []float32, g BNGeom, momentum, eps float32) {
	cnt := float64(g.count())
	For(g.C, 3*g.count(), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			var s sum4
			for n := range g.N {
				s.add(x[(n*g.C+c)*g.HW:][:g.HW])
			}
			mean := s.total() / cnt
			var ss sum4
			for n := range g.N {
				ss.addSquares(x[(n*g.C+c)*g.HW:][:g.HW], mean)
			}
			variance := ss.total() / cnt
			inv := 1 / math.Sqrt(variance+float64(eps))
			saveMean[c], saveInvStd[c] = float32(mean), float32(inv)
			unbiased := variance
			if cnt > 1 {
				unbiased = ss.total() / (cnt - 1)
			}
			runMean[c] = (1-momentum)*runMean[c] + momentum*float32(mean)
			runVar[c] = (1-momentum)*runVar[c] + momentum*float32(unbiased)
			normalize(y, x, g, c, float32(mean), float32(inv), gamma[c], beta[c])
		}
	})
}

// normalize writes channel c of y = (x-mean)*inv*gamma + beta.
func normalize(y, x []float32, g BNGeom, c int, mean, inv, gamma, beta float32) {
	a := inv * gamma
	b := beta - mean*a
	for n := range g.N {
		off := (n*g.C + c) * g.HW
		ys, xs := y[off:off+g.HW], x[off:off+g.HW]
		for i, v := range xs {
			ys[i] = v*a + b
		}
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
			var sy, syx sum4
			for n := range g.N {
				off := (n*g.C + c) * g.HW
				dys, xs := dy[off:off+g.HW], x[off:off+g.HW]
				sy.add(dys)
				syx.addProducts(dys, xs, mean, inv)
			}
			sdy, sdyx := sy.total(), syx.total()
			dbeta[c], dgamma[c] = float32(sdy), float32(sdyx)
			if dx == nil {
				continue
			}
			k := gamma[c] * inv
			bmean := float32(sdy / m)
			bx := float32(sdyx / m)
			for n := range g.N {
				off := (n*g.C + c) * g.HW
				dxs, dys, xs := dx[off:off+g.HW], dy[off:off+g.HW], x[off:off+g.HW]
				for i, d := range dys {
					dxs[i] = k * (d - bmean - (xs[i]-mean)*inv*bx)
				}
			}
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

// GlobalAvgPool writes y[r] = the mean of x[r*inner:(r+1)*inner] for each of the len(y) rows.
func GlobalAvgPool(y, x []float32, inner int) {
	inv := 1 / float32(inner)
	For(len(y), inner, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			var s float32
			for _, v := range x[r*inner : (r+1)*inner] {
				s += v
			}
			y[r] = s * inv
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

// sum4 is a float64 sum kept in four partial sums, element i going to sum i%4 of its run, added
// together at the end: the same result on every run, without the latency of one chain of
// dependent additions (one float64 sum in index order was 4 cycles an element, 6% of a ResNet
// step in BatchNormBackward).
type sum4 [4]float64

func (s *sum4) total() float64 { return (s[0] + s[1]) + (s[2] + s[3]) }

// add adds the values of xs.
func (s *sum4) add(xs []float32) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		v := xs[i : i+4 : i+4]
		s0 += float64(v[0])
		s1 += float64(v[1])
		s2 += float64(v[2])
		s3 += float64(v[3])
	}
	for j, v := range xs[i:] {
		switch j {
		case 0:
			s0 += float64(v)
		case 1:
			s1 += float64(v)
		default:
			s2 += float64(v)
		}
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}

// addSquares adds (v-mean)^2 for the values v of xs.
func (s *sum4) addSquares(xs []float32, mean float64) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		v := xs[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(v[0])-mean, float64(v[1])-mean, float64(v[2])-mean, float64(v[3])-mean
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for j, v := range xs[i:] {
		d := float64(v) - mean
		switch j {
		case 0:
			s0 += d * d
		case 1:
			s1 += d * d
		default:
			s2 += d * d
		}
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}

// addProducts adds dy[i]*xhat[i], xhat = (x[i]-mean)*inv rounded to float32 as the backward pass
// uses it.
func (s *sum4) addProducts(dy, x []float32, mean, inv float32) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	x = x[:len(dy)]
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		d, v := dy[i:i+4:i+4], x[i:i+4:i+4]
		s0 += float64(d[0]) * float64((v[0]-mean)*inv)
		s1 += float64(d[1]) * float64((v[1]-mean)*inv)
		s2 += float64(d[2]) * float64((v[2]-mean)*inv)
		s3 += float64(d[3]) * float64((v[3]-mean)*inv)
	}
	for j := i; j < len(dy); j++ {
		p := float64(dy[j]) * float64((x[j]-mean)*inv)
		switch j - i {
		case 0:
			s0 += p
		case 1:
			s1 += p
		default:
			s2 += p
		}
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}
