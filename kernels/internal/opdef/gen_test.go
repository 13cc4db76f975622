package opdef

import (
	"strings"
	"testing"
)

// TestDispatchRefused: the generator refuses a backend's code it would write wrong: a view whose
// resolved name is a parameter's (Conv2D's w resolves to ws, the workspace's name), a parameter
// named as the method's own variables, and CUDA code that does not end with the method's return.
func TestDispatchRefused(t *testing.T) {
	for _, c := range []struct {
		op   Op
		gen  func(Op) error
		want string
	}{
		{Op{Method: "Conv", Sig: "w, ws F32", CPU: "f(ws, wss)"}, cpuOf, "view w resolves to ws, a parameter's name"},
		{Op{Method: "Odd", Sig: "s F32", CPU: "f(ss)"}, cpuOf, "parameter s is the method's own name"},
		{Op{Method: "Odd", Sig: "e1 F32", CPU: "f(e1s)"}, cpuOf, "parameter e1 is an error's name"},
		{Op{Method: "Odd", Sig: "gs F32", CUDA: "return nil"}, cudaOf, "parameter gs is the method's own name"},
		{Op{Method: "Fill", Sig: "x F32", CUDA: "o.launchN(s, \"fill_f32\", x.Len, parg(xp))"}, cudaOf, "CUDA must end with the method's return"},
	} {
		err := c.gen(c.op)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v; want %q", c.op.Method, c.op.Sig, err, c.want)
		}
	}
}

func cpuOf(op Op) error  { return cpuBackend.write(&strings.Builder{}, op, map[string]bool{}) }
func cudaOf(op Op) error { return cudaBackend.write(&strings.Builder{}, op, map[string]bool{}) }
