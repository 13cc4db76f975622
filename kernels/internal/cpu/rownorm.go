package cpu

import "math"

// Softmax writes y = softmax of each row of x [rows][cols] (y may alias x): the row maximum is
// subtracted, each exponential taken and summed in float64 in column order, and each quotient
// rounded once.
func Softmax(y, x []float32, rows, cols int) {
	For(rows, 8*cols, func(lo, hi int) {
		e := make([]float64, cols)
		for r := lo; r < hi; r++ {
			xs, ys := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			mx := xs[0]
			for _, v := range xs[1:] {
				if v > mx {
					mx = v
				}
			}
			var sum float64
			for j, v := range xs {
				e[j] = math.Exp(float64(v - mx))
				sum += e[j]
			}
			inv := 1 / sum
			for j := range ys {
				ys[j] = float32(e[j] * inv)
			}
		}
	})
}

// SoftmaxBackward writes dx = y*(dy - Σ_row dy*y) for [rows][cols] operands (dx may alias dy),
// the sum in float64 in column order.
func SoftmaxBackward(dx, dy, y []float32, rows, cols int) {
	For(rows, 3*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			dxs, dys, ys := dx[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			var dot float64
			for j, v := range ys {
				dot += float64(dys[j]) * float64(v)
			}
			for j, v := range ys {
				dxs[j] = float32(float64(v) * (float64(dys[j]) - dot))
			}
		}
	})
}

// LayerNorm normalizes each row of x [rows][cols] with its mean and biased variance (float64
// sums in column order, the variance's over the squared deviations from the mean):
// y = (x-mean)*rstd*gamma + beta, rstd = 1/sqrt(var+eps), in float32 from the rounded mean and
// rstd it saves; nil gamma is 1 and nil beta 0.
func LayerNorm(y, mean, rstd, x, gamma, beta []float32, rows, cols int, eps float32) {
	For(rows, 4*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, ys := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			var s float64
			for _, v := range xs {
				s += float64(v)
			}
			m := s / float64(cols)
			var ss float64
			for _, v := range xs {
				d := float64(v) - m
				ss += d * d
			}
			mu, rs := float32(m), float32(1/math.Sqrt(ss/float64(cols)+float64(eps)))
			mean[r], rstd[r] = mu, rs
			for j, v := range xs {
				h := (v - mu) * rs
				if gamma != nil {
					h *= gamma[j]
				}
				if beta != nil {
					h += beta[j]
				}
				ys[j] = h
			}
		}
	})
}

// LayerNormBackward writes, for a LayerNorm of x [rows][cols] with the saved mean and rstd and
// gamma (nil: 1), dx = rstd*(g - mean_row(g) - xhat*mean_row(g*xhat)) with g = dy*gamma and
// xhat = (x-mean)*rstd, dgamma = Σ_rows dy*xhat and dbeta = Σ_rows dy; a nil output is skipped.
// Every sum is float64, over columns in order for dx and over rows in order for dgamma and dbeta.
func LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd []float32, rows, cols int) {
	if dx != nil {
		For(rows, 6*cols, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				dys, xs, dxs := dy[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
				mu, rs := mean[r], rstd[r]
				var sg, sgh float64
				for j, v := range xs {
					g := dys[j]
					if gamma != nil {
						g *= gamma[j]
					}
					h := (v - mu) * rs
					sg += float64(g)
					sgh += float64(g) * float64(h)
				}
				mg, mgh := sg/float64(cols), sgh/float64(cols)
				for j, v := range xs {
					g := dys[j]
					if gamma != nil {
						g *= gamma[j]
					}
					h := (v - mu) * rs
					dxs[j] = float32(float64(rs) * (float64(g) - mg - float64(h)*mgh))
				}
			}
		})
	}
	if dgamma == nil && dbeta == nil {
		return
	}
	For(cols, 3*rows, func(lo, hi int) {
		sgam, sbeta := make([]float64, hi-lo), make([]float64, hi-lo)
		for r := range rows {
			dys, xs := dy[r*cols+lo:r*cols+hi], x[r*cols+lo:r*cols+hi]
			mu, rs := mean[r], rstd[r]
			for j, v := range dys {
				sbeta[j] += float64(v)
				sgam[j] += float64(v) * float64((xs[j]-mu)*rs)
			}
		}
		for j := range hi - lo {
			if dgamma != nil {
				dgamma[lo+j] = float32(sgam[j])
			}
			if dbeta != nil {
				dbeta[lo+j] = float32(sbeta[j])
			}
		}
	})
}

// GemmStrided runs batch Gemms, the i-th on a[i*strideA:], b[i*strideB:] and c[i*strideC:],
// several at once when they are small (each one's result does not depend on that).
func GemmStrided(transA, transB bool, batch, m, n, k int, alpha float32, a []float32, strideA int, b []float32, strideB int, beta float32, c []float32, strideC int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 { // a and b are empty and unread: c = beta*c
		strideA, strideB = 0, 0
	}
	For(batch, m*n*max(k, 1), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			Gemm(transA, transB, m, n, k, alpha, a[i*strideA:], b[i*strideB:], beta, c[i*strideC:])
		}
	})
}
