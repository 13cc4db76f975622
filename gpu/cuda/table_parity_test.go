//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/internal/opcheck"
	"github.com/stoke-ml/stoke/kernels"
)

// TestCUDAParityTable: every op of the op table (kernels/internal/opdef), called as its entry's
// good call on operands of the same random values on each side, writes the same outputs on the
// CUDA op set as on the CPU one, within 1e-5 of the output's largest magnitude (NaN where the
// other has NaN: a random variance can be negative). A new op is checked here without a case of
// its own; TestCUDAParity's cases add the sizes that reach every kernel's tiles and tails. The
// workspace of a convolution is each backend's own and not compared, nor what is computed from it
// (unread: the outputs readsWorkspace names).
func TestCUDAParityTable(t *testing.T) {
	// The weight gradient reads the column matrix Conv2D left in the workspace, which the good
	// call's workspace of random values is not: TestCUDAParity's convolution cases run the two in
	// order.
	readsWorkspace := map[string]string{"Conv2DBackward": "dw"}
	gp, cpu := openSide(t, "cuda"), openSide(t, "cpu")
	calls := func(sd *side) []opcheck.Call {
		r := rand.New(rand.NewPCG(3, 4))
		return opcheck.Calls(func(n int) kernels.F32 { return sd.f32(t, randF32(r, n)) },
			func(v ...int32) kernels.I32 { return sd.i32(t, v) },
			func(n int) kernels.U8 { return sd.u8(t, randU8(r, n)) })
	}
	want, got := calls(cpu), calls(gp)
	for k, c := range want {
		g := got[k]
		if err := c.Run(cpu.ops, cpu.s); err != nil {
			t.Errorf("%s on the CPU op set: %v", c.Method, err)
			continue
		}
		if err := g.Run(gp.ops, gp.s); err != nil {
			t.Errorf("%s on the CUDA op set: %v", c.Method, err)
			continue
		}
		for _, o := range c.Outputs {
			if o.Name == "workspace" || readsWorkspace[c.Method] == o.Name || viewLen(c.Args[o.Arg]) == 0 {
				continue
			}
			w, v := cpu.read(t, c.Args[o.Arg])[0], gp.read(t, g.Args[o.Arg])[0]
			var scale, diff float64
			for i := range w {
				if math.IsNaN(w[i]) || math.IsNaN(v[i]) {
					if math.IsNaN(w[i]) != math.IsNaN(v[i]) {
						diff = math.Inf(1)
					}
					continue
				}
				scale, diff = max(scale, math.Abs(w[i])), max(diff, math.Abs(v[i]-w[i]))
			}
			if diff > 1e-5*max(scale, 1) {
				t.Errorf("%s: %s differs from the CPU op set's by %g (largest magnitude %g):\nCUDA %v\nCPU  %v", c.Method, o.Name, diff, scale, v, w)
			}
		}
	}
}

// viewLen is the length of an F32, I32 or U8 view.
func viewLen(v any) int {
	switch v := v.(type) {
	case kernels.F32:
		return v.Len
	case kernels.I32:
		return v.Len
	case kernels.U8:
		return v.Len
	}
	return 0
}
