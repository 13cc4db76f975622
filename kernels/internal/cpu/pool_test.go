package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// tieValues fills v from a few values, so that windows hold many exact ties, both zeros, both
// infinities and NaN.
func tieValues(r *rand.Rand, v []float32) []float32 {
	set := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2, -3, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range v {
		v[i] = set[r.IntN(len(set))]
	}
	return v
}

// poolShapes are 2x2 stride-2 poolings of every width 1..40 and of the CNN's planes, over heights
// odd and even and several planes.
func poolShapes() []PoolGeom {
	var gs []PoolGeom
	for w := 2; w <= 41; w++ {
		for _, h := range []int{2, 3, 5, 6} {
			gs = append(gs, PoolGeom{N: 1 + w%3, C: 1 + h%2, H: h, W: w, K: 2, Stride: 2})
		}
	}
	for _, s := range []int{7, 14, 15, 28} {
		gs = append(gs, PoolGeom{N: 3, C: 2, H: s, W: s, K: 2, Stride: 2})
	}
	return gs
}

// maxPoolRef is MaxPool2D by the general window loop, plane by plane.
func maxPoolRef(y []float32, arg []int32, x []float32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	for p := range g.N * g.C {
		maxPoolPlane(y[p*oh*ow:(p+1)*oh*ow], arg[p*oh*ow:(p+1)*oh*ow], x[p*g.H*g.W:(p+1)*g.H*g.W], g, oh, ow)
	}
}

// maxPoolBackRef is MaxPool2DBackward by clearing dx and adding each dy at its arg.
func maxPoolBackRef(dx, dy []float32, arg []int32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	for p := range g.N * g.C {
		plane := dx[p*g.H*g.W : (p+1)*g.H*g.W]
		clear(plane)
		for i, a := range arg[p*oh*ow : (p+1)*oh*ow] {
			plane[a] += dy[p*oh*ow+i]
		}
	}
}

// poolPath is one way through the pooling code: set selects it.
type poolPath struct {
	name string
	set  func()
}

func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v (%#x); want %v (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestMaxPool2x2Paths holds every path of the 2x2 stride-2 pooling (each SIMD kernel this CPU
// runs, and the Go loop) to the general window loop bit for bit, maxima, argmax positions and
// gradients, on data full of ties, signed zeros, infinities and NaN; dx starts dirty, so that
// an input the backward pass leaves unwritten shows.
func TestMaxPool2x2Paths(t *testing.T) {
	for _, path := range poolPaths(t) {
		t.Run(path.name, func(t *testing.T) {
			path.set()
			r := rand.New(rand.NewPCG(16, 17))
			for _, g := range poolShapes() {
				t.Run(fmt.Sprintf("%dx%dx%dx%d", g.N, g.C, g.H, g.W), func(t *testing.T) {
					n, in := g.N*g.C*g.OutH()*g.OutW(), g.N*g.C*g.H*g.W
					for range 4 {
						x := tieValues(r, make([]float32, in))
						// Each output ends where 16 sentinels begin, which no path may write.
						yb, argb := make([]float32, n+16), make([]int32, n+16)
						for i := n; i < n+16; i++ {
							yb[i], argb[i] = 7, 7
						}
						y, arg := yb[:n], argb[:n]
						wantY, wantArg := make([]float32, n), make([]int32, n)
						MaxPool2D(y, arg, x, g)
						sameBits(t, "y's sentinels", yb[n:], []float32{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
						maxPoolRef(wantY, wantArg, x, g)
						sameBits(t, "y", y, wantY)
						for i, a := range argb[n:] {
							if a != 7 {
								t.Fatalf("arg's sentinel %d = %d; want 7", i, a)
							}
						}
						for i := range wantArg {
							if arg[i] != wantArg[i] {
								t.Fatalf("arg[%d] = %d; want %d", i, arg[i], wantArg[i])
							}
						}
						dy := tieValues(r, make([]float32, n))
						dxb, wantDx := tieValues(r, make([]float32, in+16)), make([]float32, in)
						tail := append([]float32(nil), dxb[in:]...)
						dx := dxb[:in]
						MaxPool2DBackward(dx, dy, arg, g)
						sameBits(t, "dx's sentinels", dxb[in:], tail)
						maxPoolBackRef(wantDx, dy, wantArg, g)
						sameBits(t, "dx", dx, wantDx)
					}
				})
			}
		})
	}
}
