package nn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
)

// convCounter counts the convolution kernels a graph runs.
type convCounter struct {
	kernels.Ops
	conv, depthwise, depthwiseBackward int
}

func (c *convCounter) Conv2D(s gpu.Stream, y, x, w, bias, ws kernels.F32, g kernels.Conv2D) error {
	c.conv++
	return c.Ops.Conv2D(s, y, x, w, bias, ws, g)
}

func (c *convCounter) DepthwiseConv2D(s gpu.Stream, y, x, w, bias kernels.F32, g kernels.Depthwise2D) error {
	c.depthwise++
	return c.Ops.DepthwiseConv2D(s, y, x, w, bias, g)
}

func (c *convCounter) DepthwiseConv2DBackward(s gpu.Stream, dx, dw, dbias, dy, x, w kernels.F32, g kernels.Depthwise2D) error {
	c.depthwiseBackward++
	return c.Ops.DepthwiseConv2DBackward(s, dx, dw, dbias, dy, x, w, g)
}

// depthwisePass runs y = f(x, w, b) and its backward pass from dy on a graph over ops, and
// returns y and the gradients of x, w and b.
func depthwisePass(t *testing.T, e *env, ops kernels.Ops, vals [4][]float32, shapes [4][]int,
	f func(x, w, b *nn.Tensor) *nn.Tensor) [4][]float32 {
	t.Helper()
	g := nn.NewGraph(ops, e.s, e.a, true, 7)
	var in [3]*nn.Tensor
	for i := range in {
		in[i] = g.Input(g.Constant(vals[i], shapes[i]...).Data(), shapes[i]...)
	}
	y := f(in[0], in[1], in[2])
	if err := g.Backward(y, g.Constant(vals[3], shapes[3]...)); err != nil {
		t.Fatal(err)
	}
	var out [4][]float32
	for i, v := range []*nn.Tensor{y, g.Grad(in[0]), g.Grad(in[1]), g.Grad(in[2])} {
		if v == nil {
			t.Fatalf("output %d missing", i)
		}
		var err error
		if out[i], err = v.Host(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestConv2dDepthwise: a convolution with groups = channels runs the depthwise kernels, once
// forward and once backward (no Conv2D), and gives what the per-group composition gives.
func TestConv2dDepthwise(t *testing.T) {
	e := newEnv(t)
	const n, c, h, w, k = 2, 6, 9, 8, 3
	o := nn.ConvOptions{Stride: 2, Padding: 1, Groups: c}
	oh, ow := (h+2-k)/2+1, (w+2-k)/2+1
	shapes := [4][]int{{n, c, h, w}, {c, 1, k, k}, {c}, {n, c, oh, ow}}
	r := rand.New(rand.NewPCG(3, 4))
	var vals [4][]float32
	for i, sh := range shapes {
		vals[i] = make([]float32, prod(sh))
		for j := range vals[i] {
			vals[i][j] = float32(2*r.Float64() - 1)
		}
	}
	count := &convCounter{Ops: e.ops}
	got := depthwisePass(t, e, count, vals, shapes, func(x, wt, b *nn.Tensor) *nn.Tensor { return nn.Conv2d(x, wt, b, o) })
	if count.depthwise != 1 || count.depthwiseBackward != 1 || count.conv != 0 {
		t.Errorf("kernels run: %d depthwise, %d depthwise backward, %d conv2d; want 1, 1, 0", count.depthwise, count.depthwiseBackward, count.conv)
	}
	want := depthwisePass(t, e, e.ops, vals, shapes, func(x, wt, b *nn.Tensor) *nn.Tensor {
		ys := make([]*nn.Tensor, c)
		for i := range ys {
			ys[i] = nn.Conv2d(nn.Narrow(x, 1, i, 1), nn.Narrow(wt, 0, i, 1), nn.Narrow(b, 0, i, 1), nn.ConvOptions{Stride: 2, Padding: 1})
		}
		return nn.Concat(1, ys...)
	})
	for i, name := range []string{"y", "dx", "dw", "dbias"} {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: %d elements; the composition has %d", name, len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			if d := math.Abs(float64(got[i][j] - want[i][j])); d > 1e-5*(1+math.Abs(float64(want[i][j]))) {
				t.Fatalf("%s[%d] = %v; the per-group composition gives %v", name, j, got[i][j], want[i][j])
			}
		}
	}
}

// BenchmarkConv2dDepthwise times a depthwise convolution's forward and backward passes (input,
// weight and bias gradients) at ConvNeXt's and MobileNet's sizes on the CPU op set: the
// depthwise kernels (fused) against the per-group composition Conv2d ran before them (groups: a
// Narrow, a Conv2D and its backward pass per channel, and a Concat).
func BenchmarkConv2dDepthwise(b *testing.B) {
	for _, c := range []struct {
		name             string
		n, ch, hw, k, st int
	}{
		{"convnext 7x7 16x96x16x16", 16, 96, 16, 7, 1},
		{"mobilenet 3x3 16x144x16x16", 16, 144, 16, 3, 1},
		{"mobilenet 3x3 stride 2 16x144x32x32", 16, 144, 32, 3, 2},
	} {
		o := nn.ConvOptions{Stride: c.st, Padding: c.k / 2}
		oh := (c.hw+2*o.Padding-c.k)/c.st + 1
		shapes := [4][]int{{c.n, c.ch, c.hw, c.hw}, {c.ch, 1, c.k, c.k}, {c.ch}, {c.n, c.ch, oh, oh}}
		for _, fused := range []bool{true, false} {
			name := c.name + " groups"
			if fused {
				name = c.name + " fused"
			}
			b.Run(name, func(b *testing.B) {
				e := newEnv(b)
				r := rand.New(rand.NewPCG(5, 6))
				setup := e.graph(true)
				var data [4]kernels.F32
				for i, sh := range shapes {
					v := make([]float32, prod(sh))
					for j := range v {
						v[j] = float32(2*r.Float64() - 1)
					}
					data[i] = setup.Constant(v, sh...).Data()
				}
				g := e.graph(true)
				for b.Loop() {
					g.Reset(true, 7)
					x, w, bias := g.Input(data[0], shapes[0]...), g.Input(data[1], shapes[1]...), g.Input(data[2], shapes[2]...)
					var y *nn.Tensor
					if fused {
						oc := o
						oc.Groups = c.ch
						y = nn.Conv2d(x, w, bias, oc)
					} else {
						ys := make([]*nn.Tensor, c.ch)
						for i := range ys {
							ys[i] = nn.Conv2d(nn.Narrow(x, 1, i, 1), nn.Narrow(w, 0, i, 1), nn.Narrow(bias, 0, i, 1), o)
						}
						y = nn.Concat(1, ys...)
					}
					if err := g.Backward(y, g.Input(data[3], shapes[3]...)); err != nil {
						b.Fatal(err)
					}
					if err := e.s.Synchronize(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
