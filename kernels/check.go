package kernels

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/stoke-ml/stoke/gpu"
)

// checked is the op set For and CPU hand out: it checks every call's arguments (a stream, the
// views inside their buffers, their lengths against the op's dimensions, the geometry and
// settings, the overlaps the Ops doc forbids) and only then calls the backend. The rules are
// stated here once for every backend, a user's registered one included; a backend checks only
// what it alone can know (whether a buffer is memory of its device, whether a stream is its own).
type checked struct{ b Ops }

var _ Ops = checked{}

// withChecks puts the argument checks in front of o (once).
func withChecks(o Ops) Ops {
	if _, ok := o.(checked); ok {
		return o
	}
	return checked{o}
}

// Operand roles: an output (written, possibly also read) must not overlap any other operand,
// unless it is exactly an input the op's doc says it may be.
const (
	in  = 0
	out = 1
	opt = 2 // an empty view is allowed ("none")
)

// anyLen: the operand's length is not constrained by the op's dimensions.
const anyLen = -1

// view is an operand of any element type: a buffer and a byte range.
type view struct {
	buf      gpu.Buffer
	off, len int // in elements
	size     int // bytes per element
}

func vf(v F32) view { return view{v.Buf, v.Off, v.Len, 4} }
func vi(v I32) view { return view{v.Buf, v.Off, v.Len, 4} }
func vu(v U8) view  { return view{v.Buf, v.Off, v.Len, 1} }

type operand struct {
	name   string
	v      view
	role   int
	mayBe  string // the output this input may be exactly, "" for none
	lo, hi int    // the byte range, set by view when the range is good
	cmp    bool   // the buffer can be compared with == (a backend's type need not be)
}

// call gathers one op call's checks; the first failure is its error.
type call struct {
	op  string
	err error
	ops [10]operand
	n   int
}

func newCall(op string, s gpu.Stream) call {
	c := call{op: op}
	if s == nil {
		c.err = fmt.Errorf("kernels: %w: %s: nil stream", ErrArgument, op)
	}
	return c
}

// arg fails the call with ErrArgument; the message follows the op's name. (Callers test the
// condition themselves: boxing the values for every good call would allocate.)
func (c *call) arg(format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("kernels: %w: %s: %s", ErrArgument, c.op, fmt.Sprintf(format, a...))
	}
}

// valid fails the call with err (a geometry's Validate).
func (c *call) valid(err error) {
	if c.err == nil {
		c.err = err
	}
}

// view adds an operand: its range must lie inside its buffer and, unless want is anyLen (or the
// view is empty and role has opt), its length must be want.
func (c *call) view(role int, name string, v view, want int) {
	c.ops[c.n] = operand{name: name, v: v, role: role}
	c.n++
	if c.err != nil {
		return
	}
	switch {
	case v.len == 0: // the empty view: no memory
	case v.buf == nil:
		c.err = fmt.Errorf("kernels: %w: %s: %s has no buffer", ErrArgument, c.op, name)
		return
	case v.off < 0 || v.len < 0 || v.len > v.buf.Len()/v.size-v.off: // no overflow
		c.err = fmt.Errorf("kernels: %w: %s: %s bytes [%d,%d) outside its buffer of %d bytes", ErrShape, c.op, name,
			v.off*v.size, (v.off+v.len)*v.size, v.buf.Len())
		return
	default:
		o := &c.ops[c.n-1]
		o.lo, o.hi, o.cmp = v.off*v.size, (v.off+v.len)*v.size, reflect.TypeOf(v.buf).Comparable()
	}
	if want != anyLen && v.len != want && !(role&opt != 0 && v.len == 0) {
		c.err = fmt.Errorf("kernels: %w: %s: %s has %d elements; want %d", ErrShape, c.op, name, v.len, want)
	}
}

// mayBe records that output may be exactly one of inputs (the op's doc says so).
func (c *call) mayBe(output string, inputs ...string) {
	for i := range c.n {
		if slices.Contains(inputs, c.ops[i].name) {
			c.ops[i].mayBe = output
		}
	}
}

// done checks the overlaps and returns the call's first error.
func (c *call) done() error {
	if c.err != nil {
		return c.err
	}
	for i := range c.n {
		a := &c.ops[i]
		if a.role&out == 0 || a.lo == a.hi {
			continue
		}
		for j := range c.n {
			b := &c.ops[j]
			if j == i || (b.role&out != 0 && j < i) || b.lo >= a.hi || a.lo >= b.hi || !(a.cmp && b.cmp && a.v.buf == b.v.buf) {
				continue // the same operand, a pair already seen, or no shared byte
			}
			if a.v == b.v && b.mayBe == a.name {
				continue
			}
			return fmt.Errorf("kernels: %w: %s: %s overlaps %s", ErrArgument, c.op, a.name, b.name)
		}
	}
	return nil
}

// mul returns a*b, two dimensions >= 0, failing the call when the product overflows an int: a
// wrapped length could match a small (or empty) view while the backend walks the dimensions.
func (c *call) mul(a, b int) int {
	if a > 0 && b > math.MaxInt/a {
		c.arg("dimensions %d x %d overflow an int", a, b)
		return 0
	}
	return a * b
}

// classes checks the dimensions of [n][classes] logits.
func (c *call) classes(n, classes int) {
	if n < 0 || classes <= 0 {
		c.arg("n = %d, classes = %d", n, classes)
	}
}

func (o checked) Backend() string { return o.b.Backend() }

// usedIf is n where an operand is used, anyLen where it is not (an optimizer's state without the
// setting that needs it).
func usedIf(used bool, n int) int {
	if used {
		return n
	}
	return anyLen
}

// bnRecord is the length of one record of BatchNormStats (and of BatchNormBackwardInput's sums).
func bnRecord(g BatchNorm) int { return 2*g.C + 1 }

// records checks that stats, of n elements, holds whole records of BatchNormStats, at least one.
func (c *call) records(n int, g BatchNorm) {
	if c.err == nil && g.C > 0 && (n == 0 || n%bnRecord(g) != 0) {
		c.err = fmt.Errorf("kernels: %w: %s: stats has %d elements; want records of 2C+1 = %d", ErrShape, c.op, n, bnRecord(g))
	}
}

// kept checks keep, the shape SumTo sums shape (checked) to, and returns its number of elements.
func (c *call) kept(shape, keep []int) int {
	if c.err == nil && len(keep) != len(shape) {
		c.arg("keep %v for shape %v: ranks differ", keep, shape)
	}
	if c.err != nil {
		return 0
	}
	kept := 1
	for d := range keep {
		if keep[d] != shape[d] && keep[d] != 1 {
			c.arg("keep %v for shape %v: dim %d is neither %d nor 1", keep, shape, d, shape[d])
			break
		}
		kept *= keep[d] // at most the shape's count: no overflow
	}
	return kept
}

// normalize checks NormalizeU8's settings for a dst of n elements: [N][channels][inner], one
// mean and std per channel or one for all (or none), every std > 0.
func (c *call) normalize(n, channels, inner int, mean, std []float32) {
	if channels <= 0 || inner <= 0 {
		c.arg("%d elements are not [N][%d][%d]", n, channels, inner)
	} else if ci := c.mul(channels, inner); ci == 0 || n%ci != 0 {
		c.arg("%d elements are not [N][%d][%d]", n, channels, inner)
	}
	perChannel := func(k int) bool { return k == 0 || k == 1 || k == channels }
	if !perChannel(len(mean)) || !perChannel(len(std)) {
		c.arg("%d means and %d stds for %d channels", len(mean), len(std), channels)
	}
	for _, v := range std {
		if !(v > 0) {
			c.arg("std %v; want > 0", v)
		}
	}
}

// shape checks an index space of rank 1..MaxRank with every dim >= 1, and the stride lists named
// by names (one per stride list): each of the shape's rank, every stride >= 0. It returns the
// number of indices (0 after a failure).
func (c *call) shape(shape []int, names []string, strides ...[]int) int {
	if len(shape) < 1 || len(shape) > MaxRank {
		c.arg("rank %d; want 1..%d", len(shape), MaxRank)
		return 0
	}
	n := 1
	for d, v := range shape {
		if v < 1 {
			c.arg("shape %v: dim %d is %d; want >= 1", shape, d, v)
			return 0
		}
		n = c.mul(n, v)
	}
	for i, st := range strides {
		if len(st) != len(shape) {
			c.arg("%d %s for rank %d", len(st), names[i], len(shape))
			return 0
		}
		for d, v := range st {
			if v < 0 {
				c.arg("%s %v: %d on dim %d; want >= 0", names[i], st, v, d)
				return 0
			}
		}
	}
	if c.err != nil {
		return 0
	}
	return n
}

// reach checks that every element v's strides address over shape lies inside v (an operand
// already added): the last one, Σ (shape[d]-1)·strides[d], must be below v.len, without overflow.
func (c *call) reach(name string, v view, shape, strides []int) {
	if c.err != nil {
		return
	}
	last := 0
	for d, st := range strides {
		t := c.mul(shape[d]-1, st)
		if c.err != nil {
			return
		}
		if last > math.MaxInt-t {
			c.arg("%s strides %v over shape %v overflow an int", name, strides, shape)
			return
		}
		last += t
	}
	if last >= v.len {
		c.err = fmt.Errorf("kernels: %w: %s: %s strides %v over shape %v reach element %d of its %d", ErrShape, c.op, name,
			strides, shape, last, v.len)
	}
}

// unary checks a UnaryFunc.
func (c *call) unary(f UnaryFunc) {
	if !f.valid() {
		c.arg("unknown %v", f)
	}
}

// distinct checks, after the checks so far passed, that strides (which reach passed: no sum overflows) address distinct elements
// over shape: taken by increasing stride, each dim of size > 1 steps past every element the
// smaller ones reach.
func (c *call) distinct(shape, strides []int) {
	if c.err != nil {
		return
	}
	var dims [MaxRank]int
	k := 0
	for d, n := range shape {
		if n > 1 {
			dims[k] = d
			k++
		}
	}
	sorted := dims[:k]
	slices.SortFunc(sorted, func(a, b int) int { return strides[a] - strides[b] })
	last := 0 // the largest offset the dims so far reach
	for _, d := range sorted {
		if strides[d] <= last {
			c.arg("dst strides %v over shape %v: dim %d steps onto the positions of smaller strides (taken by increasing stride, "+
				"each must step past all of them)", strides, shape, d)
			return
		}
		last += strides[d] * (shape[d] - 1)
	}
}

// rowsCols checks a [rows][cols] operand's dimensions and returns rows*cols.
func (c *call) rowsCols(rows, cols int) int {
	if rows < 0 || cols < 1 {
		c.arg("rows = %d, cols = %d", rows, cols)
		return 0
	}
	return c.mul(rows, cols)
}

// batched checks that v holds batch matrices of size elements stride apart (stride >= 0): its
// length is at least (batch-1)*stride + size when batch and size are not 0.
func (c *call) batched(role int, name string, v view, batch, stride, size int) {
	c.view(role, name, v, anyLen)
	if c.err != nil || batch == 0 || size == 0 {
		return
	}
	last := c.mul(batch-1, stride)
	if c.err == nil && last > math.MaxInt-size {
		c.arg("%s: %d matrices of %d elements %d apart overflow an int", name, batch, size, stride)
	}
	if c.err == nil && v.len < last+size {
		c.err = fmt.Errorf("kernels: %w: %s: %s has %d elements; want %d matrices of %d elements %d apart (%d)", ErrShape, c.op,
			name, v.len, batch, size, stride, last+size)
	}
}
