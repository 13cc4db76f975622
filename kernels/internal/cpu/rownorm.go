package cpu

import "math"

// Softmax writes y = softmax of each row of x [rows][cols] (y may alias x): the row maximum is
// subtracted, each exponential taken in float32 (expf) and summed in float32 as expShift sums
// (eight lanes, then their tree), and each multiplied by the sum's reciprocal: within a few ulp
// of the float64 softmax, several times faster than math.Exp (a Swin's window attention spent
// a twentieth of its step in it).
func Softmax(y, x []float32, rows, cols int) {
	For(rows, 8*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, ys := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			mx := rowMax(xs[1:], xs[0])
			copy(ys, xs)
			inv := 1 / expShift(ys, mx)
			for j := range ys {
				ys[j] *= inv
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
// sums, kept as sums keeps them, the variance's over the squared deviations from the mean):
// y = (x-mean)*rstd*gamma + beta, rstd = 1/sqrt(var+eps), in float32 from the rounded mean and
// rstd it saves; nil gamma is 1 and nil beta 0.
func LayerNorm(y, mean, rstd, x, gamma, beta []float32, rows, cols int, eps float32) {
	For(rows, 4*cols, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs, ys := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
			var s, q sums
			s.add(xs)
			m := s.total() / float64(cols)
			q.addSquares(xs, m)
			mu, rs := float32(m), float32(1/math.Sqrt(q.total()/float64(cols)+float64(eps)))
			mean[r], rstd[r] = mu, rs
			if gamma != nil && beta != nil {
				gs, bs := gamma[:cols], beta[:cols]
				for j, v := range xs {
					h := (v - mu) * rs
					h *= gs[j]
					ys[j] = h + bs[j]
				}
				continue
			}
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

// lnColumns is the most columns of LayerNormBackward's dgamma and dbeta one part of the work
// sums: the rows are read a block of columns at a time, not a column or two.
const lnColumns = 256

// LayerNormBackward writes, for a LayerNorm of x [rows][cols] with the saved mean and rstd and
// gamma (nil: 1), dx = rstd*(g - mean_row(g) - xhat*mean_row(g*xhat)) with g = dy*gamma and
// xhat = (x-mean)*rstd, dgamma = Σ_rows dy*xhat and dbeta = Σ_rows dy; a nil output is skipped.
// Every sum is float64, kept as sums keeps them for dx and over rows in order for dgamma and
// dbeta.
func LayerNormBackward(dx, dgamma, dbeta, dy, x, gamma, mean, rstd []float32, rows, cols int) {
	if dx != nil {
		For(rows, 6*cols, func(lo, hi int) {
			var gs []float32 // g of a row, where gamma is given
			if gamma != nil {
				gs = make([]float32, cols)
			}
			for r := lo; r < hi; r++ {
				dys, xs, dxs := dy[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], dx[r*cols:(r+1)*cols]
				mu, rs := mean[r], rstd[r]
				g := dys
				if gamma != nil {
					binaryRow(BinMul, gs, dys, gamma, cols, 1, 1, 1)
					g = gs
				}
				var sg, sgh sums
				sg.add(g)
				sgh.addProducts(g, xs, mu, rs)
				mg, mgh := sg.total()/float64(cols), sgh.total()/float64(cols)
				for j, v := range xs {
					h := (v - mu) * rs
					dxs[j] = float32(float64(rs) * (float64(g[j]) - mg - float64(h)*mgh))
				}
			}
		})
	}
	if dgamma == nil && dbeta == nil {
		return
	}
	blocks := (cols + lnColumns - 1) / lnColumns
	For(blocks, 3*rows*min(cols, lnColumns), func(lo, hi int) {
		for b := lo; b < hi; b++ {
			c0, c1 := b*lnColumns, min(cols, (b+1)*lnColumns)
			sgam, sbeta := make([]float64, c1-c0), make([]float64, c1-c0)
			for r := range rows {
				dys, xs := dy[r*cols+c0:r*cols+c1], x[r*cols+c0:r*cols+c1]
				mu, rs := mean[r], rstd[r]
				for j, v := range dys {
					sbeta[j] += float64(v)
					sgam[j] += float64(v) * float64((xs[j]-mu)*rs)
				}
			}
			for j := range c1 - c0 {
				if dgamma != nil {
					dgamma[c0+j] = float32(sgam[j])
				}
				if dbeta != nil {
					dbeta[c0+j] = float32(sbeta[j])
				}
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
