package opcheck

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// example is one op's good call from the table of kernels/internal/opdef (examples_gen.go): its
// parameters' names, its arguments after the stream and its view operands.
type example struct {
	method   string
	names    []string
	args     []any
	operands []operand
}

// operand is a view argument of an example, as the table declares it.
type operand struct {
	arg   int // its index in the arguments
	name  string
	role  int  // in or out, with opt where the empty view is allowed
	sized bool // its length is checked against the op's dimensions
	mayBe []int
}

// Operand roles, as kernels' checks have them.
const (
	in  = 0
	out = 1
	opt = 2
)

// call is a call of the example's method with args (after the stream).
func (x example) call(args []any) func(o kernels.Ops, s gpu.Stream) error {
	return func(o kernels.Ops, s gpu.Stream) error {
		m := reflect.ValueOf(o).MethodByName(x.method)
		in := []reflect.Value{reflect.ValueOf(&s).Elem()} // a gpu.Stream, nil too
		for _, a := range args {
			in = append(in, reflect.ValueOf(a))
		}
		err, _ := m.Call(in)[0].Interface().(error)
		return err
	}
}

// bad derives from the example the calls every op's checks must refuse: no stream; each operand
// outside its buffer; each sized operand one element short (unless that makes an optional one
// empty); each output overlapping another operand it may not be; each signed integer argument,
// or field of one, negative.
func (x example) bad() []Bad {
	with := func(i int, v any) []any {
		a := slices.Clone(x.args)
		a[i] = v
		return a
	}
	good := x.call(x.args)
	bad := []Bad{{"nil stream", kernels.ErrArgument, func(o kernels.Ops, _ gpu.Stream) error { return good(o, nil) }}}
	for _, p := range x.operands {
		v := viewOf(x.args[p.arg])
		if v.n == 0 {
			continue
		}
		outside := v
		outside.off = v.buf.Len()/v.size - v.n + 1
		bad = append(bad, Bad{p.name + " outside its buffer", kernels.ErrShape, x.call(with(p.arg, outside.as(x.args[p.arg])))})
		if p.sized && !(p.role&opt != 0 && v.n == 1) {
			short := v
			short.n--
			bad = append(bad, Bad{p.name + " one element short", kernels.ErrShape, x.call(with(p.arg, short.as(x.args[p.arg])))})
		}
	}
	for i, o := range x.operands {
		for j, p := range x.operands {
			if o.role&out == 0 || i == j || (p.role&out != 0 && j < i) || slices.Contains(o.mayBe, p.arg) {
				continue
			}
			if args := x.overlapping(o, p); args != nil {
				bad = append(bad, Bad{o.name + " overlaps " + p.name, kernels.ErrArgument, x.call(args)})
			}
		}
	}
	for i, a := range x.args {
		v := reflect.ValueOf(a)
		switch {
		case v.CanInt():
			bad = append(bad, Bad{"negative " + x.names[i], kernels.ErrArgument, x.call(with(i, negative(v).Interface()))})
		case v.Kind() == reflect.Struct && !isView(a):
			for f := range v.NumField() {
				if v.Field(f).CanInt() {
					s := reflect.New(v.Type()).Elem()
					s.Set(v)
					s.Field(f).Set(negative(v.Field(f)))
					name := fmt.Sprintf("negative %s.%s", x.names[i], v.Type().Field(f).Name)
					bad = append(bad, Bad{name, kernels.ErrArgument, x.call(with(i, s.Interface()))})
				}
			}
		}
	}
	return bad
}

// negative is -1 of v's type.
func negative(v reflect.Value) reflect.Value {
	n := reflect.New(v.Type()).Elem()
	n.SetInt(-1)
	return n
}

// overlapping returns the example's arguments with operand p moved onto the memory of operand o
// (or o onto p's, whichever is the longer), same lengths: a call whose only fault is the
// overlap. It returns nil where either is empty.
func (x example) overlapping(o, p operand) []any {
	vo, vp := viewOf(x.args[o.arg]), viewOf(x.args[p.arg])
	if vo.n == 0 || vp.n == 0 {
		return nil
	}
	args := slices.Clone(x.args)
	onto := func(moved view, at view) view {
		moved.buf, moved.off = at.buf, at.off*at.size/moved.size
		return moved
	}
	if vp.n*vp.size <= vo.n*vo.size && vo.off*vo.size%vp.size == 0 {
		args[p.arg] = onto(vp, vo).as(x.args[p.arg])
	} else {
		args[o.arg] = onto(vo, vp).as(x.args[o.arg])
	}
	return args
}

// view is an F32, I32 or U8 argument.
type view struct {
	buf          gpu.Buffer
	off, n, size int
}

func isView(a any) bool {
	switch a.(type) {
	case kernels.F32, kernels.I32, kernels.U8:
		return true
	}
	return false
}

func viewOf(a any) view {
	switch v := a.(type) {
	case kernels.F32:
		return view{v.Buf, v.Off, v.Len, 4}
	case kernels.I32:
		return view{v.Buf, v.Off, v.Len, 4}
	case kernels.U8:
		return view{v.Buf, v.Off, v.Len, 1}
	}
	panic(fmt.Sprintf("opcheck: operand of type %T", a))
}

// as is v as a view of like's type.
func (v view) as(like any) any {
	switch like.(type) {
	case kernels.F32:
		return kernels.F32{Buf: v.buf, Off: v.off, Len: v.n}
	case kernels.I32:
		return kernels.I32{Buf: v.buf, Off: v.off, Len: v.n}
	}
	return kernels.U8{Buf: v.buf, Off: v.off, Len: v.n}
}
