package nn

import (
	"fmt"
	"slices"

	"github.com/stoke-ml/stoke/kernels"
)

// The elementwise ops, with PyTorch's broadcasting: shapes are aligned at their last dimension
// and a dimension of size 1 (or a missing one) stretches to the other's.

// Add returns x + y.
func Add(x, y *Tensor) *Tensor {
	return binary(kernels.BinaryAdd, "add", x, y, func(z, dz *Tensor) (*Tensor, *Tensor) { return dz, dz })
}

// Sub returns x − y.
func Sub(x, y *Tensor) *Tensor {
	return binary(kernels.BinarySub, "sub", x, y, func(z, dz *Tensor) (*Tensor, *Tensor) { return dz, Scale(dz, -1) })
}

// Mul returns x · y elementwise.
func Mul(x, y *Tensor) *Tensor {
	return binary(kernels.BinaryMul, "mul", x, y, func(z, dz *Tensor) (*Tensor, *Tensor) { return Mul(dz, y), Mul(dz, x) })
}

// Div returns x / y elementwise.
func Div(x, y *Tensor) *Tensor {
	return binary(kernels.BinaryDiv, "div", x, y, func(z, dz *Tensor) (*Tensor, *Tensor) {
		dx := Div(dz, y)
		return dx, Scale(Mul(dx, z), -1) // d(x/y)/dy = −x/y² = −z/y
	})
}

// binary runs f over the broadcast of x and y; vjp returns the gradients of x and y (of the
// broadcast shape: Backward reduces them).
func binary(f kernels.BinaryFunc, name string, x, y *Tensor, vjp func(z, dz *Tensor) (*Tensor, *Tensor)) *Tensor {
	g := graphOf(x, y)
	if g == nil {
		return orphan(name)
	}
	shape, err := broadcast(x.shape, y.shape)
	if err != nil {
		g.fail(fmt.Errorf("nn: %s: %w", name, err))
		return &Tensor{g: g}
	}
	z := g.newTensor(shape)
	xs, ys := stridesIn(x.shape, shape), stridesIn(y.shape, shape)
	g.run(func() error { return g.ops.Binary(g.s, f, z.data, x.data, y.data, shape, xs, ys) })
	g.record(z, name, nil, []*Tensor{x, y}, func(dz *Tensor) []*Tensor {
		dx, dy := vjp(z, dz)
		return []*Tensor{dx, dy}
	})
	return z
}

// orphan is the result of an op none of whose operands belongs to a graph: there is no graph
// to keep the error, so the tensor carries none and the next op that meets it fails.
func orphan(name string) *Tensor {
	return &Tensor{g: &Graph{err: fmt.Errorf("nn: %s: no operand belongs to a graph (only parameters)", name)}}
}

// Scale returns a·x.
func Scale(x *Tensor, a float32) *Tensor {
	g := x.g
	if g == nil {
		return orphan("scale")
	}
	y := g.newTensor(slices.Clone(x.shape))
	g.run(func() error {
		if err := g.ops.Copy(g.s, y.data, x.data); err != nil {
			return err
		}
		return g.ops.Scale(g.s, y.data, a)
	})
	g.record(y, "scale", Attr{"alpha": a}, []*Tensor{x}, func(dy *Tensor) []*Tensor { return []*Tensor{Scale(dy, a)} })
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
	y := g.newTensor(slices.Clone(x.shape))
	g.run(func() error { return g.ops.Unary(g.s, f, y.data, x.data) })
	g.record(y, f.String(), nil, []*Tensor{x}, func(dy *Tensor) []*Tensor {
		dx := g.newTensor(slices.Clone(x.shape))
		g.run(func() error { return g.ops.UnaryGrad(g.s, f, dx.data, dy.data, x.data) })
		return []*Tensor{dx}
	})
	return y
}

// ReLU returns max(x, 0).
func ReLU(x *Tensor) *Tensor {
	g := x.g
	if g == nil {
		return orphan("relu")
	}
	y := g.newTensor(slices.Clone(x.shape))
	g.run(func() error { return g.ops.ReLU(g.s, y.data, x.data) })
	g.record(y, "relu", nil, []*Tensor{x}, func(dy *Tensor) []*Tensor {
		dx := g.newTensor(slices.Clone(x.shape))
		g.run(func() error { return g.ops.ReLUGrad(g.s, dx.data, dy.data, y.data) })
		return []*Tensor{dx}
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
	keep := slices.Clone(x.shape)
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
		g.record(y, "sum", Attr{"keep": slices.Clone(keep)}, []*Tensor{x}, func(dy *Tensor) []*Tensor { return []*Tensor{expand(dy, x.shape)} })
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
	keep := make([]int, len(gx.shape))
	off := len(gx.shape) - len(shape)
	for d := range keep {
		keep[d] = 1
		if d >= off {
			keep[d] = shape[d-off]
		}
	}
	return &Tensor{shape: slices.Clone(shape), data: reduce(gx, keep).data, g: gx.g}
}

// expand broadcasts x to shape (x's dimensions aligned at the end), unrecorded: a copy.
func expand(x *Tensor, shape []int) *Tensor {
	g := x.g
	y := g.newTensor(slices.Clone(shape))
	g.run(func() error {
		return g.ops.CopyStrided(g.s, y.data, packedStrides(shape), x.data, stridesIn(x.shape, shape), shape)
	})
	return y
}

// Reshape returns a view of x with another shape of the same element count; one dimension may be
// -1, inferred from the others.
func (x *Tensor) Reshape(shape ...int) *Tensor {
	g := x.g
	if g == nil {
		return orphan("reshape")
	}
	shape = slices.Clone(shape)
	if i := slices.Index(shape, -1); i >= 0 {
		rest := 1
		for j, d := range shape {
			if j != i {
				rest *= d
			}
		}
		if rest > 0 {
			shape[i] = x.Len() / rest
		}
	}
	if !fits(shape) || prod(shape) != x.Len() {
		g.fail(fmt.Errorf("nn: reshape %v to %v: %w", x.shape, shape, ErrShape))
		return &Tensor{g: g}
	}
	y := &Tensor{shape: shape, data: x.data, g: g}
	g.record(y, "reshape", nil, []*Tensor{x}, func(dy *Tensor) []*Tensor { return []*Tensor{dy.Reshape(x.shape...)} })
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
	shape := make([]int, len(perm))
	src := packedStrides(x.shape)
	srcStrides := make([]int, len(perm))
	for d, p := range perm {
		shape[d], srcStrides[d] = x.shape[p], src[p]
	}
	y := g.newTensor(shape)
	g.run(func() error { return g.ops.CopyStrided(g.s, y.data, packedStrides(shape), x.data, srcStrides, shape) })
	g.record(y, "permute", Attr{"perm": slices.Clone(perm)}, []*Tensor{x}, func(dy *Tensor) []*Tensor {
		inv := make([]int, len(perm))
		for d, p := range perm {
			inv[p] = d
		}
		return []*Tensor{Permute(dy, inv...)}
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
	shape := slices.Clone(x.shape)
	shape[dim] = n
	var y *Tensor
	if prod(x.shape[:dim]) == 1 {
		inner := prod(x.shape[dim+1:])
		y = &Tensor{shape: shape, g: g}
		if !g.meta && g.err == nil {
			y.data = x.data.Slice(start*inner, (start+n)*inner)
		}
	} else {
		y = g.newTensor(shape)
		strides := packedStrides(x.shape)
		src := x.data
		if !g.meta && g.err == nil {
			src = x.data.Slice(start*strides[dim], x.data.Len)
		}
		g.run(func() error { return g.ops.CopyStrided(g.s, y.data, packedStrides(shape), src, strides, shape) })
	}
	g.record(y, "narrow", Attr{"dim": dim, "start": start, "length": n}, []*Tensor{x}, func(dy *Tensor) []*Tensor {
		dx := g.Full(0, x.shape...)
		place(dx, dy, dim, start)
		return []*Tensor{dx}
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
	g := graphOf(xs...)
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
	shape := slices.Clone(first)
	shape[dim] = 0
	for _, x := range xs {
		same := len(x.shape) == len(first)
		for d := range first {
			same = same && (d == dim || x.shape[d] == first[d])
		}
		if dim < 0 || dim >= len(first) || !same {
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
	g.record(y, "concat", Attr{"dim": dim}, xs, func(dy *Tensor) []*Tensor {
		dxs := make([]*Tensor, len(xs))
		at := 0
		for i, x := range xs {
			dxs[i] = Narrow(dy, dim, at, x.shape[dim])
			at += x.shape[dim]
		}
		return dxs
	})
	return y
}

// place copies x into y at offset at along dim (y's other dimensions equal x's), unrecorded.
func place(y, x *Tensor, dim, at int) {
	g := y.g
	strides := packedStrides(y.shape)
	g.run(func() error {
		dst := y.data.Slice(at*strides[dim], y.data.Len)
		return g.ops.CopyStrided(g.s, dst, strides, x.data, packedStrides(x.shape), x.shape)
	})
}

// MatMul returns the matrix product of a [..., m, k] and b [..., k, n] (torch.matmul): the
// leading (batch) dimensions must be equal, or one operand is a plain matrix shared by all.
func MatMul(a, b *Tensor) *Tensor {
	g := graphOf(a, b)
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
	shape := append(slices.Clone(batchShape), m, n)
	c := g.newTensor(shape)
	gemm(g, false, false, a, b, c, m, n, k, 0)
	g.record(c, "matmul", nil, []*Tensor{a, b}, func(dc *Tensor) []*Tensor {
		// The gradients over c's batch; Backward sums a shared operand's over it.
		da := g.newTensor(append(slices.Clone(batchShape), m, k))
		db := g.newTensor(append(slices.Clone(batchShape), k, n))
		gemm(g, false, true, dc, b, da, m, k, n, 0) // da = dc·bᵀ
		gemm(g, true, false, a, dc, db, k, n, m, 0) // db = aᵀ·dc
		return []*Tensor{da, db}
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

// broadcast is the shape of x and y broadcast together.
func broadcast(x, y []int) ([]int, error) {
	n := max(len(x), len(y))
	if n > kernels.MaxRank {
		return nil, fmt.Errorf("shapes %v and %v: more than %d dimensions: %w", x, y, kernels.MaxRank, ErrShape)
	}
	out := make([]int, n)
	for i := range n {
		a, b := dimFromEnd(x, n-1-i), dimFromEnd(y, n-1-i)
		switch {
		case a == b || b == 1:
			out[i] = a
		case a == 1:
			out[i] = b
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast: %w", x, y, ErrShape)
		}
	}
	return out, nil
}

func dimFromEnd(s []int, i int) int {
	if i < len(s) {
		return s[len(s)-1-i]
	}
	return 1
}

// packedStrides are the strides of a packed row-major tensor of shape.
func packedStrides(shape []int) []int {
	st := make([]int, len(shape))
	acc := 1
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= shape[d]
	}
	return st
}

// stridesIn are the strides with which a packed tensor of shape is read over the index space out
// (shape aligned at the end, broadcast dimensions 0).
func stridesIn(shape, out []int) []int {
	st := make([]int, len(out))
	packed := packedStrides(shape)
	off := len(out) - len(shape)
	for d := range out {
		if d >= off && shape[d-off] != 1 {
			st[d] = packed[d-off]
		}
	}
	return st
}
