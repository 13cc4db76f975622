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

// maxPoolRef is MaxPool2D by the window loop, plane by plane.
func maxPoolRef(y []float32, arg []int32, x []float32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	for p := range g.N * g.C {
		maxPoolPlaneRef(y[p*oh*ow:(p+1)*oh*ow], arg[p*oh*ow:(p+1)*oh*ow], x[p*g.H*g.W:(p+1)*g.H*g.W], g, oh, ow)
	}
}

// maxPoolPlaneRef is MaxPool2D over one plane by the window loop: each value compared in turn,
// in row order, with the maximum so far (ordered greater-than).
func maxPoolPlaneRef(yp []float32, ap []int32, plane []float32, g PoolGeom, oh, ow int) {
	for oy := range oh {
		y0 := oy*g.Stride - g.Pad
		ky0, ky1 := max(0, -y0), min(g.K, g.H-y0)
		for ox := range ow {
			x0 := ox*g.Stride - g.Pad
			kx0, kx1 := max(0, -x0), min(g.K, g.W-x0)
			best := (y0+ky0)*g.W + x0 + kx0
			for ky := ky0; ky < ky1; ky++ {
				r := (y0+ky)*g.W + x0
				for kx := kx0; kx < kx1; kx++ {
					if plane[r+kx] > plane[best] {
						best = r + kx
					}
				}
			}
			yp[oy*ow+ox] = plane[best]
			ap[oy*ow+ox] = int32(best)
		}
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

// TestMaxPoolPlaneParity holds maxPoolPlane (rows reduced first, by masks) to the window loop,
// maxima and argmax positions bit for bit, on windows full of ties, both zeros, infinities and
// NaN, for overlapping, padded and strided windows of several sizes, on every path (the 3-wide
// stride-2 windows' SIMD rows, at widths that leave every tail of a block of 8, and the Go loop).
func TestMaxPoolPlaneParity(t *testing.T) {
	geoms := []PoolGeom{
		{N: 1, C: 1, H: 112, W: 112, K: 3, Stride: 2, Pad: 1}, // resnet's stem
		{N: 1, C: 1, H: 7, W: 6, K: 3, Stride: 2},
		{N: 1, C: 1, H: 9, W: 11, K: 3, Stride: 1, Pad: 1},
		{N: 1, C: 1, H: 3, W: 4, K: 2, Stride: 1, Pad: 1},
		{N: 1, C: 1, H: 13, W: 10, K: 5, Stride: 3, Pad: 2},
		{N: 1, C: 1, H: 1, W: 1, K: 1, Stride: 1},
	}
	for w := 15; w <= 41; w++ {
		geoms = append(geoms, PoolGeom{N: 1, C: 1, H: 5 + w%4, W: w, K: 3, Stride: 2, Pad: w % 2})
	}
	for _, path := range poolPaths(t) {
		t.Run(path.name, func(t *testing.T) {
			path.set()
			r := rand.New(rand.NewPCG(17, 18))
			for _, g := range geoms {
				oh, ow := g.OutH(), g.OutW()
				for trial := range 20 {
					// The plane ends its slice's array, so that a read past it faults.
					plane := tieValues(r, make([]float32, g.H*g.W))
					y, arg := make([]float32, oh*ow), make([]int32, oh*ow)
					wantY, wantArg := make([]float32, oh*ow), make([]int32, oh*ow)
					maxPoolPlane(y, arg, plane, g, oh, ow)
					maxPoolPlaneRef(wantY, wantArg, plane, g, oh, ow)
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(wantY[i]) || arg[i] != wantArg[i] {
							t.Fatalf("%+v trial %d output %d: %v at %d; want %v at %d", g, trial, i, y[i], arg[i], wantY[i], wantArg[i])
						}
					}
				}
			}
		})
	}
}
