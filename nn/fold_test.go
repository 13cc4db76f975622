package nn_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/nn"
)

// TestConvBatchNormFolded: in a frozen graph's evaluation pass a batch norm with statistics and
// affine parameters of its own is folded into the convolution before it (plain with a bias,
// depthwise, in a Sequential and in a Dict), equal to the two ops within float32 rounding; a
// grouped convolution is left alone (the same bits); such a pass refuses a backward pass.
func TestConvBatchNormFolded(t *testing.T) {
	e := newEnv(t)
	ops, s, mem := e.ops, e.s, e.a
	bn := func(c int) *nn.BatchNorm2dLayer { b := nn.NewBatchNorm2d(c); b.Eps = 1e-3; return b }
	m := nn.Sequential{
		nn.NewConv2d(6, 8, 3, nn.ConvOptions{Padding: 1}, true), bn(8),
		nn.Fn(nn.ReLU),
		nn.NewConv2d(8, 8, 3, nn.ConvOptions{Padding: 1, Groups: 8}, false), bn(8), // depthwise
		nn.Dict{{Name: "conv", Module: nn.NewConv2d(8, 4, 1, nn.ConvOptions{Groups: 2}, false)}, {Name: "bn", Module: bn(4)}}, // grouped: not folded
		nn.Dict{{Name: "conv", Module: nn.NewConv2d(4, 5, 1, nn.ConvOptions{}, false)}, {Name: "bn", Module: bn(5)}},
	}
	if err := nn.Bind(m, mem, s, 9); err != nil {
		t.Fatal(err)
	}
	// Statistics and affine parameters far from the identity.
	named, err := nn.StateDict(m)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range named {
		v := n.Tensor.Data()
		host := make([]float32, v.Len)
		for i := range host {
			host[i] = float32(r.NormFloat64())
			if strings.HasSuffix(n.Name, "running_var") {
				host[i] = 0.2 + 2*r.Float32()
			}
		}
		if err := s.CopyH2D(v.Buf, 4*v.Off, unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host))); err != nil {
			t.Fatal(err)
		}
	}
	x, err := mem.F32(2 * 6 * 7 * 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Fill(s, x, 0.3); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(g *nn.Graph) ([]float32, *nn.Tensor) {
		t.Helper()
		for _, n := range named {
			g.Attach(n.Tensor)
		}
		y := m.Forward(g.Input(x, 2, 6, 7, 7))
		v, err := y.Host(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		return v, y
	}
	want, _ := run(nn.NewGraph(ops, s, mem, false, 1))
	frozen := nn.NewGraph(ops, s, mem, false, 1)
	frozen.Freeze()
	got, y := run(frozen)
	var scale, diff float64
	for i := range want {
		scale, diff = max(scale, math.Abs(float64(want[i]))), max(diff, math.Abs(float64(got[i]-want[i])))
	}
	if diff > 1e-5*max(scale, 1) || diff == 0 {
		t.Fatalf("folded: largest difference %g of %g; want rounding's, more than none (folded)", diff, scale)
	}
	if err := frozen.Backward(nn.Mean(y, nil, false), nil); !errors.Is(err, nn.ErrGraph) {
		t.Fatalf("backward of a folded pass: %v; want ErrGraph", err)
	}
	frozen.Thaw()
	frozen.Reset(false, 1)
	again, _ := run(frozen)
	for i := range want {
		if math.Float32bits(again[i]) != math.Float32bits(want[i]) {
			t.Fatalf("thawed: y[%d] = %v; want %v", i, again[i], want[i])
		}
	}
}
