package opcheck

import (
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// Call is one op's good call from the table of kernels/internal/opdef: the method, its arguments
// after the stream and its outputs (the views it writes).
type Call struct {
	Method  string
	Args    []any
	Outputs []Output
}

// Output is a view a call writes: its name in the op's checks ("y", "workspace") and its index in
// the call's arguments.
type Output struct {
	Name string
	Arg  int
}

// Run calls the method of o on s with c's arguments.
func (c Call) Run(o kernels.Ops, s gpu.Stream) error {
	return example{method: c.Method, args: c.Args}.call(c.Args)(o, s)
}

// Calls returns every op's good call, in the table's order, over operands made by f (float32
// views of n elements), i (int32 views of the values given: labels, indices, counts) and u
// (uint8 views of n elements); a backend's parity test fills f's and u's views with the same
// values on each side and compares the outputs.
func Calls(f func(n int) kernels.F32, i func(v ...int32) kernels.I32, u func(n int) kernels.U8) []Call {
	var calls []Call
	for _, x := range examples(f, i, u) {
		c := Call{Method: x.method, Args: x.args}
		for _, p := range x.operands {
			if p.role&out != 0 {
				c.Outputs = append(c.Outputs, Output{p.name, p.arg})
			}
		}
		calls = append(calls, c)
	}
	return calls
}
