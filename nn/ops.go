package nn

import (
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// The elementwise ops, with PyTorch's broadcasting: shapes are aligned at their last dimension
// and a dimension of size 1 (or a missing one) stretches to the other's.

// Add returns x + y.
func Add(x, y *Tensor) *Tensor { return binary(kernels.BinaryAdd, OpAdd, x, y) }

// Sub returns x − y.
func Sub(x, y *Tensor) *Tensor { return binary(kernels.BinarySub, OpSub, x, y) }

// Mul returns x · y elementwise.
func Mul(x, y *Tensor) *Tensor { return binary(kernels.BinaryMul, OpMul, x, y) }

// Div returns x / y elementwise.
func Div(x, y *Tensor) *Tensor { return binary(kernels.BinaryDiv, OpDiv, x, y) }

// binary runs f over the broadcast of x and y. Its VJP gives the gradients of x and y of the
// broadcast shape: Backward reduces them.
func binary(f kernels.BinaryFunc, op Op, x, y *Tensor) *Tensor {
	name := string(op)
	g := graphOf(name, x, y)
	if g == nil {
		return orphan(name)
	}
	shape := g.dims.take(max(len(x.shape), len(y.shape)))
	if err := broadcast(shape, x.shape, y.shape); err != nil {
		g.fail(fmt.Errorf("nn: %s: %w", name, err))
		return &Tensor{g: g}
	}
	z := g.newTensor(shape)
	xs, ys := stridesIn(g.dims.take(len(shape)), x.shape, shape), stridesIn(g.dims.take(len(shape)), y.shape, shape)
	g.run(func() error { return g.ops.Binary(g.s, f, z.data, x.data, y.data, shape, xs, ys) })
	g.record(z, op, nil, g.operands(x, y), func(dz *Tensor, dx []*Tensor) {
		switch f {
		case kernels.BinaryAdd:
			dx[0], dx[1] = dz, dz
		case kernels.BinarySub:
			dx[0], dx[1] = dz, Scale(dz, -1)
		case kernels.BinaryMul:
			dx[0], dx[1] = Mul(dz, y), Mul(dz, x)
		case kernels.BinaryDiv:
			dx[0] = Div(dz, y)
			dx[1] = Scale(Mul(dx[0], z), -1) // d(x/y)/dy = −x/y² = −z/y
		}
	})
	return z
}

// orphan is the result of an op none of whose operands belongs to a graph: there is no graph
// to keep the error, so the tensor carries none and the next op that meets it fails.
func orphan(name string) *Tensor {
	return &Tensor{g: &Graph{err: fmt.Errorf("nn: %s: no operand belongs to a graph (only parameters): %w", name, ErrGraph)}}
}

// Scale returns a·x.
func Scale(x *Tensor, a float32) *Tensor {
	g := x.g
	if g == nil {
		return orphan("scale")
	}
	y := g.newTensor(x.shape)
	g.run(func() error {
		if err := g.ops.Copy(g.s, y.data, x.data); err != nil {
			return err
		}
		return g.ops.Scale(g.s, y.data, a)
	})
	g.record(y, OpScale, func() Attr { return Attr{"alpha": a} }, g.operands(x), func(dy *Tensor, dx []*Tensor) { dx[0] = Scale(dy, a) })
	return y
}

// AddScalar returns x + a.
func AddScalar(x *Tensor, a float32) *Tensor {
	if x.g == nil {
		return orphan("add scalar")
	}
	return Add(x, x.g.Full(a, 1))
}

// The activations and other elementwise functions, each one kernel forward and one backward.

// Exp returns eˣ.
func Exp(x *Tensor) *Tensor { return unary(kernels.Exp, x) }

// Log returns ln x.
func Log(x *Tensor) *Tensor { return unary(kernels.Log, x) }

// Sqrt returns √x.
func Sqrt(x *Tensor) *Tensor { return unary(kernels.Sqrt, x) }

// Rsqrt returns 1/√x.
func Rsqrt(x *Tensor) *Tensor { return unary(kernels.Rsqrt, x) }

// Sigmoid returns 1/(1+e⁻ˣ).
func Sigmoid(x *Tensor) *Tensor { return unary(kernels.Sigmoid, x) }

// Tanh returns tanh x.
func Tanh(x *Tensor) *Tensor { return unary(kernels.Tanh, x) }

// GELU returns x·Φ(x) (PyTorch's gelu, approximate='none').
func GELU(x *Tensor) *Tensor { return unary(kernels.GELU, x) }

// GELUTanh returns PyTorch's gelu with approximate='tanh'.
func GELUTanh(x *Tensor) *Tensor { return unary(kernels.GELUTanh, x) }

// SiLU returns x·sigmoid(x) (swish).
func SiLU(x *Tensor) *Tensor { return unary(kernels.SiLU, x) }

// Hardswish returns x·ReLU6(x+3)/6.
func Hardswish(x *Tensor) *Tensor { return unary(kernels.Hardswish, x) }

// Hardsigmoid returns ReLU6(x+3)/6.
func Hardsigmoid(x *Tensor) *Tensor { return unary(kernels.Hardsigmoid, x) }

// ReLU6 returns min(max(x, 0), 6).
func ReLU6(x *Tensor) *Tensor { return unary(kernels.ReLU6, x) }

func unary(f kernels.UnaryFunc, x *Tensor) *Tensor {
	g := x.g
	if g == nil {
		return orphan(f.String())
	}
	y := g.newTensor(x.shape)
	g.run(func() error { return g.ops.Unary(g.s, f, y.data, x.data) })
	g.record(y, Op(f.String()), nil, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.newTensor(x.shape)
		g.run(func() error { return g.ops.UnaryGrad(g.s, f, dx[0].data, dy.data, x.data) })
	})
	return y
}

// ReLU returns max(x, 0).
func ReLU(x *Tensor) *Tensor {
	g := x.g
	if g == nil {
		return orphan("relu")
	}
	y := g.newTensor(x.shape)
	g.run(func() error { return g.ops.ReLU(g.s, y.data, x.data) })
	g.record(y, OpReLU, nil, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		dx[0] = g.newTensor(x.shape)
		g.run(func() error { return g.ops.ReLUGrad(g.s, dx[0].data, dy.data, y.data) })
	})
	return y
}

// Sum returns x summed over the given axes (negative ones count from the end); keepDim keeps
// them as dimensions of size 1.
func Sum(x *Tensor, axes []int, keepDim bool) *Tensor {
	g := x.g
	if g == nil {
		return orphan("sum")
	}
	keep := g.shape(x.shape)
	summed := make([]bool, len(x.shape))
	for _, a := range axes {
		if a < 0 {
			a += len(x.shape)
		}
		if a < 0 || a >= len(x.shape) {
			g.fail(fmt.Errorf("nn: sum over axis %d of a tensor of shape %v: %w", a, x.shape, ErrShape))
			return &Tensor{g: g}
		}
		keep[a], summed[a] = 1, true
	}
	y := x
	if !slices.Equal(keep, x.shape) {
		y = reduce(x, keep)
		g.record(y, OpSum, func() Attr { return Attr{"keep": slices.Clone(keep)} }, g.operands(x), func(dy *Tensor, dx []*Tensor) { dx[0] = expand(dy, x.shape) })
	}
	if keepDim {
		return y
	}
	var out []int
	for d, n := range keep {
		if !summed[d] {
			out = append(out, n)
		}
	}
	return y.Reshape(out...)
}

// Mean returns the mean of x over the given axes (see Sum).
func Mean(x *Tensor, axes []int, keepDim bool) *Tensor {
	s := Sum(x, axes, keepDim)
	if s.Len() == 0 {
		return s
	}
	return Scale(s, float32(s.Len())/float32(x.Len()))
}

// reduce sums x (packed, of its shape) to shape keep (same rank, 1 where summed), unrecorded.
func reduce(x *Tensor, keep []int) *Tensor {
	g := x.g
	y := g.newTensor(keep)
	g.run(func() error { return g.ops.SumTo(g.s, y.data, x.data, x.shape, keep) })
	return y
}

// sumTo reduces a gradient of a broadcast shape to the shape of the operand it belongs to.
func sumTo(gx *Tensor, shape []int) *Tensor {
	if slices.Equal(gx.shape, shape) {
		return gx
	}
	g := gx.g
	keep := g.dims.take(len(gx.shape))
	off := len(gx.shape) - len(shape)
	for d := range keep {
		keep[d] = 1
		if d >= off {
			keep[d] = shape[d-off]
		}
	}
	return g.tensor(shape, reduce(gx, keep).data)
}

// expand broadcasts x to shape (x's dimensions aligned at the end), unrecorded: a copy.
func expand(x *Tensor, shape []int) *Tensor {
	g := x.g
	y := g.newTensor(shape)
	dst, src := packedStrides(g.dims.take(len(shape)), shape), stridesIn(g.dims.take(len(shape)), x.shape, shape)
	g.run(func() error { return g.ops.CopyStrided(g.s, y.data, dst, x.data, src, shape) })
	return y
}

// Reshape returns a view of x with another shape of the same element count; one dimension may be
// -1, inferred from the others.
func (x *Tensor) Reshape(shape ...int) *Tensor {
	g := x.g
	if g == nil {
		return orphan("reshape")
	}
	to := g.shape(shape) // a copy: the caller's slice does not escape
	if i := slices.Index(to, -1); i >= 0 {
		rest := 1
		for j, d := range to {
			if j != i {
				rest *= d
			}
		}
		if rest > 0 {
			to[i] = x.Len() / rest
		}
	}
	if !fits(to) || prod(to) != x.Len() {
		g.fail(fmt.Errorf("nn: reshape %v to %v: %w", x.shape, to, ErrShape))
		return &Tensor{g: g}
	}
	y := g.tensor(to, x.data)
	g.record(y, OpReshape, nil, g.operands(x), func(dy *Tensor, dx []*Tensor) { dx[0] = dy.Reshape(x.shape...) })
	return y
}

// Flatten returns x as [x.Dim(0), the rest] (x itself when it has that shape).
func Flatten(x *Tensor) *Tensor {
	if len(x.shape) == 2 {
		return x
	}
	if len(x.shape) == 0 {
		return x.Reshape(1, 1)
	}
	return x.Reshape(x.shape[0], -1)
}

// Permute returns x with its dimensions reordered: dimension d of the result is dimension
// perm[d] of x (torch.permute). It copies.
func Permute(x *Tensor, perm ...int) *Tensor {
	g := x.g
	if g == nil {
		return orphan("permute")
	}
	if len(perm) != len(x.shape) || !isPerm(perm) {
		g.fail(fmt.Errorf("nn: permute %v of a tensor of shape %v: %w", perm, x.shape, ErrShape))
		return &Tensor{g: g}
	}
	shape := g.dims.take(len(perm))
	src := packedStrides(g.dims.take(len(perm)), x.shape)
	srcStrides := g.dims.take(len(perm))
	for d, p := range perm {
		shape[d], srcStrides[d] = x.shape[p], src[p]
	}
	y := g.newTensor(shape)
	dstStrides := packedStrides(g.dims.take(len(shape)), shape)
	g.run(func() error { return g.ops.CopyStrided(g.s, y.data, dstStrides, x.data, srcStrides, shape) })
	perm = g.shape(perm)
	g.record(y, OpPermute, func() Attr { return Attr{"perm": slices.Clone(perm)} }, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		inv := g.dims.take(len(perm))
		for d, p := range perm {
			inv[p] = d
		}
		dx[0] = Permute(dy, inv...)
	})
	return y
}

// Transpose swaps dimensions a and b (negative ones count from the end).
func Transpose(x *Tensor, a, b int) *Tensor {
	perm := make([]int, len(x.shape))
	for d := range perm {
		perm[d] = d
	}
	if a < 0 {
		a += len(perm)
	}
	if b < 0 {
		b += len(perm)
	}
	if a >= 0 && a < len(perm) && b >= 0 && b < len(perm) {
		perm[a], perm[b] = perm[b], perm[a]
	}
	return Permute(x, perm...)
}

// Narrow returns elements [start, start+n) of x along dimension dim (torch.narrow): a view when
// dim is the first non-1 dimension, a copy otherwise.
func Narrow(x *Tensor, dim, start, n int) *Tensor {
	g := x.g
	if g == nil {
		return orphan("narrow")
	}
	if dim < 0 {
		dim += len(x.shape)
	}
	if dim < 0 || dim >= len(x.shape) || start < 0 || n < 0 || start+n > x.shape[dim] {
		g.fail(fmt.Errorf("nn: narrow dim %d [%d, %d) of a tensor of shape %v: %w", dim, start, start+n, x.shape, ErrShape))
		return &Tensor{g: g}
	}
	shape := g.shape(x.shape)
	shape[dim] = n
	var y *Tensor
	if prod(x.shape[:dim]) == 1 {
		inner := prod(x.shape[dim+1:])
		y = g.tensor(shape, kernels.F32{})
		if !g.meta && g.err == nil {
			y.data = x.data.Slice(start*inner, (start+n)*inner)
		}
	} else {
		y = g.newTensor(shape)
		strides := packedStrides(g.dims.take(len(x.shape)), x.shape)
		dstStrides := packedStrides(g.dims.take(len(shape)), shape)
		if prod(shape) > 0 { // an empty slice copies nothing (and may start past x's end)
			src := x.data
			if !g.meta && g.err == nil {
				src = x.data.Slice(start*strides[dim], x.data.Len)
			}
			g.run(func() error { return g.ops.CopyStrided(g.s, y.data, dstStrides, src, strides, shape) })
		}
	}
	attr := func() Attr { return Attr{"dim": dim, "start": start, "length": n} }
	g.record(y, OpNarrow, attr, g.operands(x), func(dy *Tensor, dx []*Tensor) {
		if x.p == nil && x.id > 0 {
			if x.grad {
				g.pieces[x.id-1] = append(g.pieces[x.id-1], piece{dy, dim, start})
			}
			return // gather places it into x's gradient with the other slices' gradients
		}
		dx[0] = g.Full(0, x.shape...)
		place(dx[0], dy, dim, start)
	})
	return y
}

// Split cuts x along dim into parts of the given sizes (torch.split with a list).
func Split(x *Tensor, dim int, sizes ...int) []*Tensor {
	out := make([]*Tensor, len(sizes))
	at := 0
	for i, n := range sizes {
		out[i] = Narrow(x, dim, at, n)
		at += n
	}
	if x.g != nil && at != x.Dim(dim) && x.g.err == nil {
		x.g.fail(fmt.Errorf("nn: split sizes %v of dimension %d of size %d: %w", sizes, dim, x.Dim(dim), ErrShape))
	}
	return out
}

// Concat joins tensors of equal shapes but along dim (torch.cat).
func Concat(dim int, xs ...*Tensor) *Tensor {
	g := graphOf("concat", xs...)
	if g == nil || len(xs) == 0 {
		return orphan("concat")
	}
	if g.err != nil {
		return &Tensor{g: g}
	}
	first := xs[0].shape
	if dim < 0 {
		dim += len(first)
	}
	if dim < 0 || dim >= len(first) {
		g.fail(fmt.Errorf("nn: concat along %d of shape %v: %w", dim, first, ErrShape))
		return &Tensor{g: g}
	}
	shape := g.shape(first)
	shape[dim] = 0
	for _, x := range xs {
		same := len(x.shape) == len(first)
		for d := range first {
			same = same && (d == dim || x.shape[d] == first[d])
		}
		if !same {
			g.fail(fmt.Errorf("nn: concat along %d of shapes %v and %v: %w", dim, first, x.shape, ErrShape))
			return &Tensor{g: g}
		}
		shape[dim] += x.shape[dim]
	}
	y := g.newTensor(shape)
	at := 0
	for _, x := range xs {
		place(y, x, dim, at)
		at += x.shape[dim]
	}
	xs = g.operands(xs...)
	g.record(y, OpConcat, func() Attr { return Attr{"dim": dim} }, xs, func(dy *Tensor, dxs []*Tensor) {
		at := 0
		for i, x := range xs {
			dxs[i] = Narrow(dy, dim, at, x.shape[dim])
			at += x.shape[dim]
		}
	})
	return y
}

// place copies x into y at offset at along dim (y's other dimensions equal x's), unrecorded.
func place(y, x *Tensor, dim, at int) {
	g := y.g
	if x.Len() == 0 {
		return
	}
	strides := packedStrides(g.dims.take(len(y.shape)), y.shape)
	src := packedStrides(g.dims.take(len(x.shape)), x.shape)
	g.run(func() error {
		dst := y.data.Slice(at*strides[dim], y.data.Len)
		return g.ops.CopyStrided(g.s, dst, strides, x.data, src, x.shape)
	})
}

// MatMul returns the matrix product of a [..., m, k] and b [..., k, n] (torch.matmul): the
// leading (batch) dimensions must be equal, or one operand is a plain matrix shared by all.
func MatMul(a, b *Tensor) *Tensor {
	g := graphOf("matmul", a, b)
	if g == nil {
		return orphan("matmul")
	}
	ra, rb := len(a.shape), len(b.shape)
	if ra < 2 || rb < 2 || a.shape[ra-1] != b.shape[rb-2] || (ra > 2 && rb > 2 && !slices.Equal(a.shape[:ra-2], b.shape[:rb-2])) {
		g.fail(fmt.Errorf("nn: matmul of shapes %v and %v: %w", a.shape, b.shape, ErrShape))
		return &Tensor{g: g}
	}
	m, k, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	batchShape := a.shape[:ra-2]
	if rb > ra {
		batchShape = b.shape[:rb-2]
	}
	c := g.newTensor(g.shape(batchShape, m, n))
	gemm(g, false, false, a, b, c, m, n, k, 0)
	g.record(c, OpMatMul, nil, g.operands(a, b), func(dc *Tensor, dx []*Tensor) {
		// The gradients over c's batch; Backward sums a shared operand's over it.
		da := g.newTensor(g.shape(batchShape, m, k))
		db := g.newTensor(g.shape(batchShape, k, n))
		gemm(g, false, true, dc, b, da, m, k, n, 0) // da = dc·bᵀ
		gemm(g, true, false, a, dc, db, k, n, m, 0) // db = aᵀ·dc
		dx[0], dx[1] = da, db
	})
	return c
}

// gemm computes c = op(a)·op(b) + beta·c over the batch dimensions of c: an operand that is a
// plain matrix is shared by the batch (stride 0).
func gemm(g *Graph, transA, transB bool, a, b, c *Tensor, m, n, k int, beta float32) {
	batch := func(t *Tensor) int { return prod(t.shape[:len(t.shape)-2]) }
	ba, bb, bc := batch(a), batch(b), batch(c)
	g.run(func() error {
		switch {
		case bc == 1:
			return g.ops.Gemm(g.s, transA, transB, m, n, k, 1, a.data, b.data, beta, c.data)
		case ba == bc && bb == 1 && !transA:
			// A shared right operand: one product of the stacked rows.
			return g.ops.Gemm(g.s, false, transB, bc*m, n, k, 1, a.data, b.data, beta, c.data)
		}
		sa, sb := m*k, k*n
		if ba == 1 {
			sa = 0
		}
		if bb == 1 {
			sb = 0
		}
		return g.ops.GemmStrided(g.s, transA, transB, bc, m, n, k, 1, a.data, sa, b.data, sb, beta, c.data, m*n)
	})
}

func isPerm(p []int) bool {
	seen := make([]bool, len(p))
	for _, v := range p {
		if v < 0 || v >= len(p) || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

// broadcast writes the shape of x and y broadcast together to out, of the longer one's rank.
func broadcast(out, x, y []int) error {
	n := len(out)
	if n > kernels.MaxRank {
		return fmt.Errorf("shapes %v and %v: more than %d dimensions: %w", x, y, kernels.MaxRank, ErrShape)
	}
	for i := range n {
		a, b := dimFromEnd(x, n-1-i), dimFromEnd(y, n-1-i)
		switch {
		case a == b || b == 1:
			out[i] = a
		case a == 1:
			out[i] = b
		default:
			return fmt.Errorf("shapes %v and %v do not broadcast: %w", x, y, ErrShape)
		}
	}
	return nil
}

func dimFromEnd(s []int, i int) int {
	if i < len(s) {
		return s[len(s)-1-i]
	}
	return 1
}

// packedStrides writes to st (of shape's length) and returns the strides of a packed row-major
// tensor of shape.
func packedStrides(st, shape []int) []int {
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= shape[d]
	}
	return st
}

// stridesIn writes to st (of out's length, zeros) and returns the strides with which a packed
// tensor of shape is read over the index space out (shape aligned at the end, broadcast
// dimensions 0).
func stridesIn(st, shape, out []int) []int {
	clear(st)
	off := len(out) - len(shape)
	acc := 1
	for d := len(out) - 1; d >= off; d-- {
		if shape[d-off] != 1 {
			st[d] = acc
		}
		acc *= shape[d-off]
	}
	return st
}
