package cpu

import "math"

// MaxRank is the most dimensions a Layout holds (kernels.MaxRank).
const MaxRank = 8

// maxOperands is the most operands a Layout holds strides for.
const maxOperands = 3

// Layout is an index space, row-major (the last dim varies fastest), and the element strides of
// up to three operands over it, simplified without changing which element an index addresses in
// any operand or the row-major order of the indices: dims of size 1 are dropped and neighbours
// merged where every operand's strides allow (the outer stride is the inner one times the inner
// size). It is a value: a Layout made at enqueue keeps no slice of the caller's.
type Layout struct {
	rank    int
	shape   [MaxRank]int
	strides [maxOperands][MaxRank]int
}

// NewLayout simplifies shape (rank 1..MaxRank, dims >= 1) with one stride list per operand
// (1..3 of them, each of shape's rank).
func NewLayout(shape []int, strides ...[]int) Layout {
	var l Layout
	for d, n := range shape {
		if n == 1 {
			continue
		}
		if r := l.rank - 1; r >= 0 && l.mergeable(r, d, n, strides) {
			l.shape[r] *= n
			for k, st := range strides {
				l.strides[k][r] = st[d]
			}
			continue
		}
		l.shape[l.rank] = n
		for k, st := range strides {
			l.strides[k][l.rank] = st[d]
		}
		l.rank++
	}
	if l.rank == 0 { // a single element
		l.rank, l.shape[0] = 1, 1
	}
	return l
}

// mergeable reports whether dim d of size n (strides given) continues l's dim r.
func (l *Layout) mergeable(r, d, n int, strides [][]int) bool {
	for k, st := range strides {
		if l.strides[k][r] != st[d]*n {
			return false
		}
	}
	return true
}

// Packed returns the row-major strides of a packed tensor of shape.
func Packed(shape []int) []int {
	st := make([]int, len(shape))
	p := 1
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = p
		p *= shape[d]
	}
	return st
}

// inner is the size of the last dim; rows the number of indices of the others.
func (l *Layout) inner() int { return l.shape[l.rank-1] }

func (l *Layout) rows() int {
	r := 1
	for _, n := range l.shape[:l.rank-1] {
		r *= n
	}
	return r
}

// rowStart returns the index over every dim but the last of row r, and the first n operands'
// offsets of it.
func (l *Layout) rowStart(r, n int) (idx [MaxRank]int, off [maxOperands]int) {
	for d := l.rank - 2; d >= 0; d-- {
		idx[d] = r % l.shape[d]
		r /= l.shape[d]
		for k := range n {
			off[k] += idx[d] * l.strides[k][d]
		}
	}
	return idx, off
}

// BinaryOp is a function of Binary.
type BinaryOp uint8

// The functions of Binary.
const (
	BinAdd BinaryOp = iota + 1
	BinSub
	BinMul
	BinDiv
)

// runs calls body for every run of consecutive indices of l's last dim, in parallel when the
// indices are many (a single run of a packed tensor is split too): off holds the first nops
// operands' offsets of the run's first index, n its length. Each part divides once to find its
// first row, then steps from row to row (the runs of permuted heads are a few floats long).
func (l *Layout) runs(nops, cost int, body func(off [maxOperands]int, n int)) {
	inner, last := l.inner(), l.rank-1
	For(l.rows()*inner, cost, func(lo, hi int) {
		idx, row := l.rowStart(lo/inner, nops)
		c := lo % inner
		for j := lo; j < hi; {
			n := min(inner-c, hi-j)
			off := row
			for k := range nops {
				off[k] += c * l.strides[k][last]
			}
			body(off, n)
			j, c = j+n, 0
			l.nextRows(&idx, &row, nops, 1)
		}
	})
}

// rowBlocks calls body for every block of consecutive rows (indices over every dim but the
// last) that differ in the next-to-last dim alone, in parallel when the rows are many: off holds
// the first nops operands' offsets of the block's first row, n its number of rows. l's rank is
// at least 2.
func (l *Layout) rowBlocks(nops, cost int, body func(off [maxOperands]int, n int)) {
	size := l.shape[l.rank-2]
	For(l.rows(), cost, func(lo, hi int) {
		idx, row := l.rowStart(lo, nops)
		for r := lo; r < hi; {
			n := min(size-idx[l.rank-2], hi-r)
			body(row, n)
			r += n
			l.nextRows(&idx, &row, nops, n)
		}
	})
}

// nextRows moves idx, a row's index, and row, its offsets, n rows on: n is at most what is
// left of the next-to-last dim.
func (l *Layout) nextRows(idx *[MaxRank]int, row *[maxOperands]int, nops, n int) {
	for d := l.rank - 2; d >= 0; d, n = d-1, 1 {
		for k := range nops {
			row[k] += n * l.strides[k][d]
		}
		if idx[d] += n; idx[d] < l.shape[d] {
			return
		}
		for k := range nops {
			row[k] -= l.shape[d] * l.strides[k][d]
		}
		idx[d] = 0
	}
}

// Binary computes z = f(x, y) over l, whose operands are z (packed), x and y.
func Binary(f BinaryOp, z, x, y []float32, l Layout) {
	sz, sx, sy := l.strides[0][l.rank-1], l.strides[1][l.rank-1], l.strides[2][l.rank-1]
	l.runs(3, 1, func(off [maxOperands]int, n int) {
		binaryRow(f, z[off[0]:], x[off[1]:], y[off[2]:], n, sz, sx, sy)
	})
}

// binaryRow computes z[i*sz] = f(x[i*sx], y[i*sy]) for i < n.
func binaryRow(f BinaryOp, z, x, y []float32, n, sz, sx, sy int) {
	if sz == 1 {
		done := binarySIMD(f, z, x, y, n, sx, sy)
		z, x, y, n = z[done:], x[done*sx:], y[done*sy:], n-done
	}
	if sz == 1 && sx == 1 && sy == 1 {
		z, x, y = z[:n], x[:n], y[:n]
		switch f {
		case BinAdd:
			for i := range z {
				z[i] = x[i] + y[i]
			}
		case BinSub:
			for i := range z {
				z[i] = x[i] - y[i]
			}
		case BinMul:
			for i := range z {
				z[i] = x[i] * y[i]
			}
		case BinDiv:
			for i := range z {
				z[i] = x[i] / y[i]
			}
		}
		return
	}
	switch f {
	case BinAdd:
		for i := range n {
			z[i*sz] = x[i*sx] + y[i*sy]
		}
	case BinSub:
		for i := range n {
			z[i*sz] = x[i*sx] - y[i*sy]
		}
	case BinMul:
		for i := range n {
			z[i*sz] = x[i*sx] * y[i*sy]
		}
	case BinDiv:
		for i := range n {
			z[i*sz] = x[i*sx] / y[i*sy]
		}
	}
}

// CopyStrided copies src to dst over l, whose operands are dst and src.
func CopyStrided(dst, src []float32, l Layout) {
	last := l.rank - 1
	sd, ss := l.strides[0][last], l.strides[1][last]
	if l.rank >= 2 && sd == 1 && ss == 1 && l.inner() < 64 && l.strides[0][last-1] >= 0 && l.strides[1][last-1] >= 0 {
		// Short runs (attention's heads): a block of rows in one copyRows call.
		w, dr, sr := l.inner(), l.strides[0][last-1], l.strides[1][last-1]
		l.rowBlocks(2, w, func(off [maxOperands]int, n int) {
			copyRows(dst[off[0]:], src[off[1]:], n, w, dr, sr)
		})
		return
	}
	l.runs(2, 1, func(off [maxOperands]int, n int) {
		d, s := dst[off[0]:], src[off[1]:]
		if sd == 1 && ss == 1 {
			copy(d[:n], s[:n])
			return
		}
		for i := range n {
			d[i*sd] = s[i*ss]
		}
	})
}

// SumTo writes to y the sums of x over the dims where y's stride is 0, for l whose operands
// are x (packed) and y (packed of the kept dims, stride 0 on the summed ones). Each element of
// y is a float64 sum rounded once, over the summed indices in row-major order: the same order
// whatever the split of the work.
func SumTo(y, x []float32, l Layout) {
	var kept, summed []int // dims of l
	for d := range l.rank {
		if l.strides[1][d] != 0 {
			kept = append(kept, d)
		} else if l.shape[d] > 1 {
			summed = append(summed, d)
		}
	}
	if len(summed) == 0 {
		copy(y, x)
		return
	}
	last := l.rank - 1
	if l.strides[1][last] == 0 {
		// The last dim is summed: each output adds contiguous runs of x.
		n := l.shape[last]
		runs := offsets(&l, summed[:len(summed)-1])
		For(len(y), len(runs)*n, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				base := flatOffset(&l, kept, j)
				var s float64
				for _, r := range runs {
					for _, v := range x[base+r : base+r+n] {
						s += float64(v)
					}
				}
				y[j] = float32(s)
			}
		})
		return
	}
	// The last dim is kept: outputs come in blocks of n contiguous in x and y; each block adds
	// rows of x, one per summed index.
	n := l.shape[last]
	rows := offsets(&l, summed)
	outer := kept[:len(kept)-1]
	For(len(y), len(rows), func(lo, hi int) {
		acc := make([]float64, min(hi-lo, n))
		for j := lo; j < hi; {
			b, c0 := j/n, j%n
			c1 := min(n, c0+hi-j)
			base := flatOffset(&l, outer, b) + c0
			a := acc[:c1-c0]
			clear(a)
			for _, r := range rows {
				for i, v := range x[base+r : base+r+len(a)] {
					a[i] += float64(v)
				}
			}
			for i, v := range a {
				y[j+i] = float32(v)
			}
			j += len(a)
		}
	})
}

// offsets lists operand 0's offsets of every index over dims (of l), in row-major order.
func offsets(l *Layout, dims []int) []int {
	n := 1
	for _, d := range dims {
		n *= l.shape[d]
	}
	out := make([]int, n)
	for i := range out {
		out[i] = flatOffset(l, dims, i)
	}
	return out
}

// flatOffset returns operand 0's offset of index i over dims (of l), row-major.
func flatOffset(l *Layout, dims []int, i int) int {
	off := 0
	for k := len(dims) - 1; k >= 0; k-- {
		d := dims[k]
		off += i % l.shape[d] * l.strides[0][d]
		i /= l.shape[d]
	}
	return off
}

// UnaryOp is a function of Unary and UnaryGrad.
type UnaryOp uint8

// The functions of Unary and UnaryGrad, as kernels.UnaryFunc's.
const (
	FExp UnaryOp = iota + 1
	FLog
	FSqrt
	FRsqrt
	FSigmoid
	FTanh
	FGELU
	FGELUTanh
	FSiLU
	FHardswish
	FHardsigmoid
	FReLU6
)

// Unary computes y = f(x) elementwise, each in float64 rounded once except GELU, Sigmoid and
// SiLU, which are computed in float32 (gelu within 5e-7·(1+x²) relative, sigmoid and silu within
// 4e-7); y may alias x.
func Unary(f UnaryOp, y, x []float32) {
	if k, _ := float32Unary(f); k != nil {
		For(len(y), 16, func(lo, hi int) { k(y[lo:hi], x[lo:hi]) })
		return
	}
	For(len(y), 16, func(lo, hi int) {
		ys, xs := y[lo:hi], x[lo:hi]
		for i, v := range xs {
			ys[i] = float32(unary(f, float64(v)))
		}
	})
}

// UnaryGrad computes dx = dy*f'(x) elementwise, each in float64 rounded once except GELU's,
// Sigmoid's and SiLU's, in float32 (geluGrad, sigmoidGrad, siluGrad); dx may alias dy.
func UnaryGrad(f UnaryOp, dx, dy, x []float32) {
	if _, k := float32Unary(f); k != nil {
		For(len(dx), 16, func(lo, hi int) { k(dx[lo:hi], dy[lo:hi], x[lo:hi]) })
		return
	}
	For(len(dx), 16, func(lo, hi int) {
		dxs, dys, xs := dx[lo:hi], dy[lo:hi], x[lo:hi]
		for i, v := range xs {
			dxs[i] = float32(float64(dys[i]) * unaryGrad(f, float64(v)))
		}
	})
}

// float32Unary returns the float32 kernels of f and of its gradient, where f has them: the
// functions whose float64 exp or erf took most of a model's activation time (a SiLU network's
// step spent a fifth of its time in math.Exp).
func float32Unary(f UnaryOp) (func(y, x []float32), func(dx, dy, x []float32)) {
	switch f {
	case FGELU:
		return gelu, geluGrad
	case FSigmoid:
		return sigmoid, sigmoidGrad
	case FSiLU:
		return silu, siluGrad
	}
	return nil, nil
}

const (
	sqrt2Pi    = 0.7978845608028654 // √(2/π), GELUTanh's
	geluCubic  = 0.044715           // GELUTanh's
	invSqrt2Pi = 0.3989422804014327 // 1/√(2π)
)

func unary(f UnaryOp, v float64) float64 {
	switch f {
	case FExp:
		return math.Exp(v)
	case FLog:
		return math.Log(v)
	case FSqrt:
		return math.Sqrt(v)
	case FRsqrt:
		return 1 / math.Sqrt(v)
	case FTanh:
		return math.Tanh(v)
	case FGELUTanh:
		return 0.5 * v * (1 + math.Tanh(sqrt2Pi*(v+geluCubic*v*v*v)))
	case FHardswish:
		return v * relu6(v+3) / 6
	case FHardsigmoid:
		return relu6(v+3) / 6
	case FReLU6:
		return relu6(v)
	}
	return math.NaN()
}

// relu6 is min(max(v,0),6), NaN kept.
func relu6(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 6:
		return 6
	}
	return v
}

// unaryGrad is f'(v); at the kinks of the piecewise functions, PyTorch's choice (its
// hardswish_backward, hardsigmoid_backward and hardtanh_backward).
func unaryGrad(f UnaryOp, v float64) float64 {
	switch f {
	case FExp:
		return math.Exp(v)
	case FLog:
		return 1 / v
	case FSqrt:
		return 0.5 / math.Sqrt(v)
	case FRsqrt:
		r := 1 / math.Sqrt(v)
		return -0.5 * r * r * r
	case FTanh:
		t := math.Tanh(v)
		return 1 - t*t
	case FGELUTanh:
		t := math.Tanh(sqrt2Pi * (v + geluCubic*v*v*v))
		return 0.5*(1+t) + 0.5*v*(1-t*t)*sqrt2Pi*(1+3*geluCubic*v*v)
	case FHardswish:
		switch {
		case v < -3:
			return 0
		case v <= 3:
			return v/3 + 0.5
		}
		return 1
	case FHardsigmoid:
		if v > -3 && v < 3 {
			return 1.0 / 6
		}
		return 0
	case FReLU6:
		if v <= 0 || v >= 6 {
			return 0
		}
		return 1
	}
	return math.NaN()
}
