package cpu

import (
	"math"
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

// AttnGeom is the shape of a scaled dot-product attention: Batch problems of queries [LQ][D] and
// keys and values [LK][D], packed one after another, scores scaled by Scale.
type AttnGeom struct {
	Batch, LQ, LK, D int
	Scale            float32
}

// The largest blocks of Attention and AttentionBackward: a query block's scores against one key
// block (at most [attnBQ][attnBK], 128 KiB, in L2) is all of the score matrix held at a time. A
// sequence is cut into equal blocks (blockOf), so that 197 tokens are not a block of 128 and one
// of 69, and each GEMM is as large as it can be. The sizes depend on the shape alone, so the order
// of every sum (and the result) is the same on every machine.
const (
	attnBQ = 128
	attnBK = 256
)

// blockOf is the size of the equal blocks, at most most, that cover n >= 1.
func blockOf(n, most int) int {
	parts := (n + most - 1) / most
	return (n + parts - 1) / parts
}

// attnScratch is one worker's blocks: the scores (then probabilities), their gradients, and the
// running maximum and sum of each query row (the forward pass) or each query's Σ dy·y (the
// backward pass).
type attnScratch struct {
	s, dp, m, l []float32
}

var attnScratches = sync.Pool{New: func() any { return new(attnScratch) }}

// Attention writes y = softmax(Scale·q·kᵀ)·v for each problem and lse, each query's log-sum-exp
// of its scaled scores, taking keys a block at a time with the online softmax of FlashAttention:
// a block's scores are exponentiated against the row's running maximum, and when a later block
// raises it, the partial output and sum are rescaled. Work is split over (problem, query block);
// each product is a GEMM of the block (kernels/internal/gemm).
func Attention(y, lse, q, k, v []float32, g AttnGeom) {
	if g.LQ == 0 {
		return
	}
	bq, bk := blockOf(g.LQ, attnBQ), blockOf(g.LK, attnBK)
	qb := (g.LQ + bq - 1) / bq
	For(g.Batch*qb, 4*bq*g.LK*g.D, func(lo, hi int) {
		ws := attnScratches.Get().(*attnScratch)
		defer attnScratches.Put(ws)
		ws.s = grow(ws.s, bq*bk)
		ws.m, ws.l = grow(ws.m, bq), grow(ws.l, bq)
		for t := lo; t < hi; t++ {
			attnForwardBlock(y, lse, q, k, v, g, t/qb, t%qb*bq, bq, bk, ws)
		}
	})
}

// attnForwardBlock computes the queries [i0, i0+bq) of problem b, keys bk at a time.
func attnForwardBlock(y, lse, q, k, v []float32, g AttnGeom, b, i0, bq, bk int, ws *attnScratch) {
	d := g.D
	nq := min(bq, g.LQ-i0)
	qs := q[(b*g.LQ+i0)*d:][:nq*d]
	ys := y[(b*g.LQ+i0)*d:][:nq*d]
	m, l := ws.m[:nq], ws.l[:nq]
	for r := range nq {
		m[r], l[r] = float32(math.Inf(-1)), 0
	}
	for j0 := 0; j0 < g.LK; j0 += bk {
		nk := min(bk, g.LK-j0)
		ks := k[(b*g.LK+j0)*d:][:nk*d]
		vs := v[(b*g.LK+j0)*d:][:nk*d]
		s := ws.s[:nq*nk]
		gemm.Sgemm(false, true, nq, nk, d, g.Scale, qs, d, ks, d, 0, s, nk)
		for r := range nq {
			row := s[r*nk : (r+1)*nk]
			mx := rowMax(row, m[r])
			l[r] = l[r]*expf(m[r]-mx) + expShift(row, mx)
			if j0 > 0 && mx != m[r] {
				scaleRow(ys[r*d:(r+1)*d], expf(m[r]-mx))
			}
			m[r] = mx
		}
		beta := float32(1)
		if j0 == 0 {
			beta = 0 // y's old contents are ignored
		}
		gemm.Sgemm(false, false, nq, d, nk, 1, s, nk, vs, d, beta, ys, d)
	}
	for r := range nq {
		scaleRow(ys[r*d:(r+1)*d], 1/l[r])
		lse[b*g.LQ+i0+r] = m[r] + float32(math.Log(float64(l[r])))
	}
}

// AttentionBackward writes dq, dk and dv of Attention from dy, its operands, its output y and
// the lse it saved (FlashAttention-2's backward pass): for each key block and then each query
// block the probabilities P = exp(Scale·q·kᵀ − lse) are recomputed, dv += Pᵀ·dy,
// dS = P·(dy·vᵀ − Σ dy·y)·Scale, dq += dS·k and dk += dSᵀ·q. Work is split over problems, each
// one's sums taken in block order.
func AttentionBackward(dq, dk, dv, dy, q, k, v, y, lse []float32, g AttnGeom) {
	if g.LQ == 0 { // no query: no gradient reaches the keys and values
		clear(dk)
		clear(dv)
		return
	}
	bq, bk := blockOf(g.LQ, attnBQ), blockOf(g.LK, attnBK)
	For(g.Batch, 8*g.LQ*g.LK*g.D, func(lo, hi int) {
		ws := attnScratches.Get().(*attnScratch)
		defer attnScratches.Put(ws)
		ws.s, ws.dp = grow(ws.s, bq*bk), grow(ws.dp, bq*bk)
		ws.l = grow(ws.l, g.LQ)
		for b := lo; b < hi; b++ {
			attnBackwardProblem(dq, dk, dv, dy, q, k, v, y, lse, g, b, bq, bk, ws)
		}
	})
}

// attnBackwardProblem computes the gradients of problem b in blocks of bq queries and bk keys.
func attnBackwardProblem(dq, dk, dv, dy, q, k, v, y, lse []float32, g AttnGeom, b, bq, bk int, ws *attnScratch) {
	d := g.D
	qo, ko := b*g.LQ*d, b*g.LK*d
	delta := ws.l[:g.LQ]
	for i := range delta {
		var s float32
		dys, ys := dy[qo+i*d:][:d], y[qo+i*d:][:d]
		for c, x := range dys {
			s += x * ys[c]
		}
		delta[i] = s
	}
	ls := lse[b*g.LQ:][:g.LQ]
	for j0 := 0; j0 < g.LK; j0 += bk {
		nk := min(bk, g.LK-j0)
		ks, vs := k[ko+j0*d:][:nk*d], v[ko+j0*d:][:nk*d]
		dks, dvs := dk[ko+j0*d:][:nk*d], dv[ko+j0*d:][:nk*d]
		for i0 := 0; i0 < g.LQ; i0 += bq {
			nq := min(bq, g.LQ-i0)
			qs, dys := q[qo+i0*d:][:nq*d], dy[qo+i0*d:][:nq*d]
			dqs := dq[qo+i0*d:][:nq*d]
			p, dp := ws.s[:nq*nk], ws.dp[:nq*nk]
			gemm.Sgemm(false, true, nq, nk, d, g.Scale, qs, d, ks, d, 0, p, nk)
			for r := range nq {
				expShift(p[r*nk:(r+1)*nk], ls[i0+r])
			}
			first := float32(1)
			if i0 == 0 {
				first = 0 // dk's and dv's old contents are ignored
			}
			gemm.Sgemm(true, false, nk, d, nq, 1, p, nk, dys, d, first, dvs, d)
			gemm.Sgemm(false, true, nq, nk, d, 1, dys, d, vs, d, 0, dp, nk)
			for r := range nq {
				pr, dpr := p[r*nk:(r+1)*nk], dp[r*nk:(r+1)*nk]
				dl := delta[i0+r]
				for j, x := range pr {
					dpr[j] = x * (dpr[j] - dl) * g.Scale
				}
			}
			beta := float32(1)
			if j0 == 0 {
				beta = 0 // dq's old contents are ignored
			}
			gemm.Sgemm(false, false, nq, d, nk, 1, dp, nk, ks, d, beta, dqs, d)
			gemm.Sgemm(true, false, nk, d, nq, 1, dp, nk, qs, d, first, dks, d)
		}
	}
}

// scaleRow multiplies x by a.
func scaleRow(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// expShift replaces each x of row by expf(x−shift) and returns their sum: the whole blocks of 8
// in 8 lanes (with AVX2, 8 at a time), the lanes added pairwise, then the rest in order. The
// arithmetic is the same with and without the assembly, so are the bits.
func expShift(row []float32, shift float32) float32 {
	var lanes [8]float32
	k := expShiftSIMD(row, shift, &lanes)
	for ; k+8 <= len(row); k += 8 {
		for i := range 8 {
			e := expf(row[k+i] - shift)
			row[k+i] = e
			lanes[i] += e
		}
	}
	s := ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))
	for j, x := range row[k:] {
		e := expf(x - shift)
		row[k+j] = e
		s += e
	}
	return s
}

// rowMax is the largest of mx and the values of row; a NaN among them is passed over.
func rowMax(row []float32, mx float32) float32 {
	mx, k := maxSIMD(row, mx)
	for _, x := range row[k:] {
		if x > mx {
			mx = x
		}
	}
	return mx
}

// The constants of expf (Cephes' expf), also in exp_amd64.s.
const (
	expLo    = -87.33 // below: 0 (the subnormal results are left out)
	expHi    = 88.72  // above: as at expHi, +Inf
	expLog2e = 1.44269504088896341
	expC1    = 0.693359375 // ln 2 = expC1 + expC2, expC1 exact in few bits
	expC2    = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
)

// expf is e^x in float32, within 2 ulp (Cephes' expf: x = n·ln2 + r, |r| <= ln2/2, a degree-7
// polynomial of r times 2^n), several times faster than math.Exp, in which the softmax would
// otherwise spend most of its time. Below expLo it is 0; +Inf stays +Inf, NaN NaN. Every
// product is rounded before the sum (no fused multiply-add), as exp_amd64.s computes it.
func expf(x float32) float32 {
	if x < expLo {
		return 0
	}
	x = min(x, expHi)
	n := float32(math.RoundToEven(float64(float32(x * expLog2e))))
	x -= float32(n * expC1)
	x -= float32(n * expC2)
	p := float32(expP0*x) + expP1
	p = float32(p*x) + expP2
	p = float32(p*x) + expP3
	p = float32(p*x) + expP4
	p = float32(p*x) + expP5
	p = float32(p*float32(x*x)) + x + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
