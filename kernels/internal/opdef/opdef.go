// Package opdef is the table of kernels.Ops: one entry per op, with its method, parameters, doc,
// argument checks and a good call. `go generate ./kernels` writes from it the Ops interface and
// the checked wrappers that put the checks in front of every backend (kernels/ops_gen.go), the
// method set of the kernels tests' recorder backend (kernels/recorder_gen_test.go) and the ops'
// good calls with what the generic bad calls are derived from (internal/opcheck/examples_gen.go);
// and, for the ops whose entries declare their dispatch (CPU, CUDA), the backends' methods: the
// CPU op set's (kernels/cpu_gen.go) and the CUDA op set's (gpu/cuda/ops_gen.go, build tag cuda),
// as PyTorch's native_functions.yaml declares `dispatch: CPU: fn, CUDA: fn`. A test of kernels (TestGeneratedFresh) regenerates them in memory and fails when a file on
// disk differs, so the table is the single source.
//
// The package imports nothing of kernels: it must build when the generated code does not.
package opdef

import "strings"

// Group is a run of related ops, written together in the interface; Doc, when not empty, is a
// comment paragraph about all of them, written before the first one's doc.
type Group struct {
	Doc string
	Ops []Op
}

// Op is one method of kernels.Ops.
type Op struct {
	// Method is the method's name ("Gemm"); Name the op's name in error messages ("gemm").
	Method, Name string
	// Sig is the parameters after the stream, as Go writes them ("y, x F32, rows, cols int"). A
	// parameter named c (the checked wrapper's call) is cv inside the wrapper.
	Sig string
	// Doc is the method's doc comment, without the comment marks.
	Doc string
	// Checks are the argument checks, in the order the wrapper makes them (the first failure is
	// the call's error).
	Checks []Check
	// Example is the arguments after the stream of a call that passes the checks, over the
	// operands internal/opcheck makes: f(n) a new float32 view of n zeros, i(v...) an int32 view
	// of v, u(n) a uint8 view of n zeros, none the empty F32; named kernels values are qualified
	// ("kernels.GELU"). The generic bad calls are derived from it (see internal/opcheck).
	Example string

	// CPU, when set, is the CPU op set's method (kernels/cpu_gen.go), for an op that is a plain
	// call of its kernel: the body of the host function the method enqueues on its stream s
	// (`cpu.Axpy(ys, alpha, xs)`). Before it, each view parameter x is resolved to its Go memory
	// xs (hostF32, hostI32 or hostU8 of kernels/cpu.go, naming the op by Name and the view by its
	// check's name; an empty view is nil, unchecked), and a buffer that is not CPU memory is the
	// method's error. The code sees the parameters, the views' xs, the receiver o (cpuOps:
	// o.operands rounds a product's operands under reduced precision), package kernels' names and
	// the packages cpu (kernels/internal/cpu), half and math; the generator appends
	// `return nil` unless the code ends with a return. Empty: the method is written by hand in
	// kernels/cpu.go, as an op that does more is (a label check, work done at enqueue on the
	// caller's slices, a precision branch).
	CPU string
	// CUDA, when set, is the CUDA op set's method (gpu/cuda/ops_gen.go), for an op that is a plain
	// launch: the method's last statements, returning its error (`return o.launchN(s, "axpy_f32",
	// y.Len, parg(yp), parg(xp), iarg(y.Len), farg(alpha))`). Before them, the method's stream gs
	// is resolved to the driver stream s (o.stream) and each view parameter x to its device
	// address xp (o.f32, o.i32 or o.u8, naming the op and the view as the CPU's do; an empty view
	// is 0, unchecked); a foreign stream or buffer is the method's error. The code sees the
	// parameters (views and scalars), gs, s, the views' xp, the receiver o (*cudaOps), package
	// cuda's names (launchN, parg, iarg, farg...) and the packages cmp, cu and math. Only the
	// cuda build compiles it: scripts/cuda-check.sh. Empty: the method is written by hand in
	// gpu/cuda, as an op that does more is (cuBLAS, several launches, staging for reduced
	// precision, a label check through launchChecked, a host slot, a special case).
	CUDA string
}

// Check is one argument check of an op; make it with In, Out, InOpt, OutOpt, Arg, Valid, Do, Let
// or MayBe.
type Check struct {
	kind    checkKind
	name    string   // the operand, the variable of Let, the geometry of Valid
	label   string   // the operand's name in messages, when not its parameter's
	role    string   // the operand's role: in, out, in|opt or out|opt
	factors []string // the operand's length as a product (overflow-checked); none: any length
	when    string   // the length applies only when this holds (the operand is unused otherwise)
	batch   string   // with stride: the operand holds batch matrices stride apart (GemmStrided)
	stride  string
	cond    string   // Arg: the failing condition
	msg     string   // Arg: the message format
	args    []string // Arg: its arguments; MayBe: the inputs the output may be
	call    string   // Do, Let: a method call of the check's state (see kernels/check.go)
}

type checkKind int

const (
	viewCheck checkKind = iota
	argCheck
	validCheck
	doCheck
	letCheck
	mayBeCheck
)

func view(role, name string, factors []string) Check {
	return Check{kind: viewCheck, name: name, role: role, factors: factors}
}

// In is an input operand whose length must be the product of factors (Go expressions over the
// parameters and earlier Lets); without factors its length is free.
func In(name string, factors ...string) Check { return view("in", name, factors) }

// Out is an output operand (written, possibly read too): it must not overlap any other operand
// unless a MayBe allows it to be exactly that one.
func Out(name string, factors ...string) Check { return view("out", name, factors) }

// InOpt is an input that may be the empty view ("none").
func InOpt(name string, factors ...string) Check { return view("in|opt", name, factors) }

// OutOpt is an output that may be the empty view (skipped).
func OutOpt(name string, factors ...string) Check { return view("out|opt", name, factors) }

// As names the operand label in error messages ("running mean" for runMean).
func (c Check) As(label string) Check { c.label = label; return c }

// When makes the operand's length apply only when cond holds: it is unused otherwise.
func (c Check) When(cond string) Check { c.when = cond; return c }

// Batched makes the operand batch matrices of the factors' size, stride elements apart: its
// length must be at least (batch-1)*stride + size.
func (c Check) Batched(batch, stride string) Check { c.batch, c.stride = batch, stride; return c }

// Arg fails the call with ErrArgument when cond holds; msg and args are the message's format and
// arguments.
func Arg(cond, msg string, args ...string) Check {
	return Check{kind: argCheck, cond: cond, msg: msg, args: args}
}

// Valid fails the call with the geometry parameter g's Validate error.
func Valid(g string) Check { return Check{kind: validCheck, name: g} }

// Do makes a check of kernels/check.go's, a method call of the call state ("classes(n, classes)"):
// what the table's kinds would express only contorted.
func Do(call string) Check { return Check{kind: doCheck, call: call} }

// Let is Do keeping the call's result in a variable for later checks ("n", "rowsCols(rows, cols)").
func Let(v, call string) Check { return Check{kind: letCheck, name: v, call: call} }

// MayBe allows output out to be exactly one of inputs (the op's doc says so).
func MayBe(out string, inputs ...string) Check {
	return Check{kind: mayBeCheck, name: out, args: inputs}
}

// operandName is a view check's name in messages.
func (c Check) operandName() string {
	if c.label != "" {
		return c.label
	}
	return c.name
}

// Ops lists the table's ops in order.
func Ops() []Op {
	var ops []Op
	for _, g := range Table {
		ops = append(ops, g.Ops...)
	}
	return ops
}

// lines splits a doc into its lines.
func lines(doc string) []string { return strings.Split(strings.TrimSpace(doc), "\n") }
