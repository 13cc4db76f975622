// Package cpu holds the CPU arithmetic behind kernels' CPU backend: plain functions over Go slices,
// with no knowledge of devices or streams, so that each can be tested directly against a float64
// reference. Shapes are checked by the caller (package kernels); these functions assume them.
//
// # Determinism
//
// Work is split into a fixed number of parts that does not depend on the number of cores, and
// every reduction adds its terms in one fixed order, so a result is bit-for-bit the same on every
// run, and on every machine with the same kernels: the same GEMM and, for convolutions, the same
// direct kernel set (AVX-512, AVX2 or none: the direct kernels of conv_amd64.s compute the weight
// and input gradients of the shapes they take in another order than the GEMM and col2im, and
// each set takes its own shapes) and AVX-512 or not (Winograd, winograd.go, computes the outputs
// and input gradients of 3x3 stride-1 convolutions with 64 channels or more with AVX-512, with
// 128 or more without it, and all of them in the builds without assembly).
package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/stoke-ml/stoke/kernels/internal/par"
)

// negZero is the bias that adds nothing: x + -0 is x for every x, -0 included (+0 would turn -0
// into +0).
var negZero = float32(math.Copysign(0, -1))

// grow returns s resized to n, reallocated only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// parts is the fixed partition count of parallel loops: a constant, so that work boundaries (and
// so any order of floating-point additions) never depend on the machine.
const parts = 16

// minWork is the amount of work (roughly, element operations) below which a loop runs serially:
// handing ranges to other goroutines costs more than it saves.
const minWork = 1 << 15

// For runs body over [0,n) split into at most parts contiguous ranges, in parallel when n*cost
// (the approximate work per item) is large enough. body must only write state owned by its range.
// The ranges depend only on n; the caller and the workers of package par take them in turn, so
// the result never depends on which goroutine ran which range.
func For(n, cost int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p := min(parts, n)
	if n*cost < minWork || runtime.GOMAXPROCS(0) == 1 {
		// The same ranges as the parallel path.
		for i := range p {
			body(i*n/p, (i+1)*n/p)
		}
		return
	}
	j := jobs.Get().(*job)
	j.body, j.n, j.p = body, n, p
	par.Run(j, p)
	j.body = nil
	jobs.Put(j)
}

// job is one parallel For; jobs are reused so that a For allocates nothing.
type job struct {
	body func(lo, hi int)
	n, p int
}

var jobs = sync.Pool{New: func() any { return &job{} }}

// Part runs range i of the job's p.
func (j *job) Part(i int) { j.body(i*j.n/j.p, (i+1)*j.n/j.p) }

// Fill sets every element of x to v.
func Fill(x []float32, v float32) {
	if math.Float32bits(v) == 0 { // +0: the runtime's vectorized clear (-0 keeps its sign bit below)
		clear(x)
		return
	}
	for i := range x {
		x[i] = v
	}
}

// Axpy computes y += alpha*x.
func Axpy(y []float32, alpha float32, x []float32) {
	For(len(y), 2, func(lo, hi int) {
		xs, ys := x[lo:hi], y[lo:hi]
		for i, v := range xs {
			ys[i] += alpha * v
		}
	})
}

// Scale computes x *= alpha.
func Scale(x []float32, alpha float32) {
	For(len(x), 1, func(lo, hi int) {
		xs := x[lo:hi]
		for i := range xs {
			xs[i] *= alpha
		}
	})
}

// Mul computes z = x*y elementwise; z may alias x or y.
func Mul(z, x, y []float32) {
	For(len(z), 1, func(lo, hi int) {
		zs, xs, ys := z[lo:hi], x[lo:hi], y[lo:hi]
		for i := range zs {
			zs[i] = xs[i] * ys[i]
		}
	})
}

// BiasAdd adds bias[c] to x viewed as [outer][len(bias)][inner].
func BiasAdd(x, bias []float32, outer, inner int) {
	c := len(bias)
	if inner == 1 {
		// A linear layer's [outer][c]: the bias row added to every row.
		For(outer, c, func(lo, hi int) { addRows(x[lo*c:], bias, hi-lo, c, c, 0) })
		return
	}
	For(outer*c, inner, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			b := bias[r%c]
			row := x[r*inner : (r+1)*inner]
			for i := range row {
				row[i] += b
			}
		}
	})
}

// BiasGrad sets dbias[c] to the sum of dy viewed as [outer][len(dbias)][inner] over outer and
// inner, in float64 rounded once (sums over each channel's runs; with inner 1 a plain loop in
// index order, which is what sums gives there).
func BiasGrad(dbias, dy []float32, outer, inner int) {
	c := len(dbias)
	For(c, outer*inner, func(lo, hi int) {
		ch := lo
		if inner == 1 { // a Linear's: eight channels at a time, eight independent chains
			for ; ch+8 <= hi; ch += 8 {
				var s0, s1, s2, s3, s4, s5, s6, s7 float64
				for o := range outer {
					r := dy[o*c+ch:][:8]
					s0, s1, s2, s3 = s0+float64(r[0]), s1+float64(r[1]), s2+float64(r[2]), s3+float64(r[3])
					s4, s5, s6, s7 = s4+float64(r[4]), s5+float64(r[5]), s6+float64(r[6]), s7+float64(r[7])
				}
				d := dbias[ch:][:8]
				d[0], d[1], d[2], d[3] = float32(s0), float32(s1), float32(s2), float32(s3)
				d[4], d[5], d[6], d[7] = float32(s4), float32(s5), float32(s6), float32(s7)
			}
		}
		for ; ch < hi; ch++ {
			if inner == 1 {
				var s float64
				for o := range outer {
					s += float64(dy[o*c+ch])
				}
				dbias[ch] = float32(s)
				continue
			}
			var s sums
			for o := range outer {
				s.add(dy[(o*c+ch)*inner : (o*c+ch+1)*inner])
			}
			dbias[ch] = float32(s.total())
		}
	})
}

// ReLU computes y = max(x, 0); y may alias x. NaN and -0 give +0 (y = x only where x > 0).
func ReLU(y, x []float32) {
	For(len(y), 1, func(lo, hi int) {
		ys, xs := y[lo:hi], x[lo:hi]
		k := reluSIMD(ys, xs)
		ys, xs = ys[k:len(xs)], xs[k:]
		for i, v := range xs {
			b := math.Float32bits(v)
			ys[i] = math.Float32frombits(b & positive(b))
		}
	})
}

// ReLUGrad computes dx = dy where y > 0, else 0; dx may alias dy.
func ReLUGrad(dx, dy, y []float32) {
	For(len(dx), 1, func(lo, hi int) {
		dxs, dys, yv := dx[lo:hi], dy[lo:hi], y[lo:hi]
		k := reluGradSIMD(dxs, dys, yv)
		dxs, dys, yv = dxs[k:len(yv)], dys[k:len(yv)], yv[k:]
		for i, v := range yv {
			dxs[i] = math.Float32frombits(math.Float32bits(dys[i]) & positive(math.Float32bits(v)))
		}
	})
}

// positive returns all ones when the float32 with bits b is > 0 (a positive number or +Inf, not
// +0 and not NaN), else 0, without a branch: the activations' signs are as good as random, and a
// mispredicted branch per element made ReLU and its gradient cost 9% and 8% of a CNN step.
// b-1 wraps +0 to 0xffffffff; the positive numbers map to [0, 0x7f800000), everything else above.
func positive(b uint32) uint32 {
	return uint32((int64(b-1) - 0x7f800000) >> 63)
}

// SoftmaxCrossEntropy computes, for logits [n][classes] and labels in [0,classes), the mean
// cross-entropy loss (in float64) against the target q = (1-smoothing)*onehot + smoothing/classes
// (label smoothing; 0 for plain one-hot targets) and writes dlogits = (softmax - q)/n. It uses the
// max-subtracted log-sum-exp, so large logits neither overflow nor lose the loss. It returns the
// index of the first sample whose label is out of range (and leaves dlogits partly written) or -1.
func SoftmaxCrossEntropy(dlogits, logits []float32, labels []int32, n, classes int, smoothing float32) (loss float64, bad int) {
	for i := range n {
		if l := labels[i]; l < 0 || int(l) >= classes {
			return 0, i
		}
	}
	losses := make([]float64, n)
	inv := 1 / float64(n)
	eps := float64(smoothing)
	uni := eps / float64(classes)
	For(n, 4*classes, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := logits[i*classes : (i+1)*classes]
			drow := dlogits[i*classes : (i+1)*classes]
			mx := row[0]
			for _, v := range row[1:] {
				if v > mx {
					mx = v
				}
			}
			var sum float64
			for _, v := range row {
				sum += math.Exp(float64(v - mx))
			}
			lse := math.Log(sum)
			for j, v := range row {
				drow[j] = float32(math.Exp(float64(v-mx)-lse) * inv)
			}
			l := labels[i]
			drow[l] -= float32(inv * (1 - eps))
			losses[i] = lse - (1-eps)*float64(row[l]-mx)
			if eps != 0 {
				var mean float64
				for j, v := range row {
					drow[j] -= float32(inv * uni)
					mean += float64(v - mx)
				}
				losses[i] -= eps * mean / float64(classes)
			}
		}
	})
	for _, v := range losses {
		loss += v
	}
	return loss * inv, -1
}

// Argmax writes the index of the largest logit of each row (the lowest index on ties) to dst.
func Argmax(dst []int32, logits []float32, n, classes int) {
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		dst[i] = int32(best)
	}
}

// Correct counts the rows whose argmax equals the label.
func Correct(logits []float32, labels []int32, n, classes int) int32 {
	var c int32
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int32(best) == labels[i] {
			c++
		}
	}
	return c
}

// NormalizeU8 writes dst[n][c][i] = (src[n][c][i]/255 - mean[c]) / std[c] for src viewed as
// [len(dst)/(channels*inner)][channels][inner]. mean and std have one value per channel or one
// value for all; nil mean is 0 and nil std is 1.
func NormalizeU8(dst []float32, src []uint8, channels, inner int, mean, std []float32) {
	rows := len(dst) / inner
	For(rows, inner, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c := r % channels
			m, s := float32(0), float32(1)
			if len(mean) > 0 {
				m = mean[c%len(mean)]
			}
			if len(std) > 0 {
				s = std[c%len(std)]
			}
			mul := 1 / (255 * s)
			add := -m / s
			normalizeRow(dst[r*inner:(r+1)*inner], src[r*inner:(r+1)*inner], mul, add)
		}
	})
}

// NonFinite is the number of elements of x that are ±Inf or NaN.
func NonFinite(x []float32) int32 {
	var n int32
	for _, v := range x {
		if v-v != 0 { // Inf - Inf and NaN - NaN are NaN
			n++
		}
	}
	return n
}
