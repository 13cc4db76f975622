package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

var depthwiseGeoms = []DepthwiseGeom{
	{N: 2, C: 3, H: 7, W: 9, K: 3, Stride: 1, Pad: 1},
	{N: 3, C: 4, H: 12, W: 10, K: 7, Stride: 1, Pad: 3}, // ConvNeXt's
	{N: 2, C: 5, H: 9, W: 8, K: 3, Stride: 2, Pad: 1},   // MobileNet's downsampling
	{N: 1, C: 2, H: 11, W: 6, K: 5, Stride: 2, Pad: 2},  // EfficientNet's
	{N: 2, C: 3, H: 5, W: 7, K: 3, Stride: 3, Pad: 0},
	{N: 1, C: 2, H: 4, W: 4, K: 1, Stride: 1, Pad: 0},
	{N: 1, C: 2, H: 5, W: 5, K: 5, Stride: 3, Pad: 5}, // outputs of padding only
	{N: 2, C: 1, H: 2, W: 3, K: 4, Stride: 1, Pad: 2}, // a kernel larger than the input
}

// depthwise64 is the definition in float64: y[n,c,oy,ox] = b[c] + Σ w[c,kh,kw]·x[n,c,iy,ix].
func depthwise64(x, w, b []float64, g DepthwiseGeom) []float64 {
	oh, ow := g.OutH(), g.OutW()
	y := make([]float64, g.N*g.C*oh*ow)
	for n := range g.N {
		for c := range g.C {
			for oy := range oh {
				for ox := range ow {
					s := 0.0
					if b != nil {
						s = b[c]
					}
					for kh := range g.K {
						for kw := range g.K {
							iy, ix := oy*g.Stride-g.Pad+kh, ox*g.Stride-g.Pad+kw
							if iy >= 0 && iy < g.H && ix >= 0 && ix < g.W {
								s += w[(c*g.K+kh)*g.K+kw] * x[((n*g.C+c)*g.H+iy)*g.W+ix]
							}
						}
					}
					y[((n*g.C+c)*oh+oy)*ow+ox] = s
				}
			}
		}
	}
	return y
}

// depthwiseOrder32 is the order DepthwiseConv2D documents (and the CUDA kernels follow), one
// output and one input at a time: the bias, then each tap's product added in float32, taps in
// row-major order; dx the same over the taps that read the input.
func depthwiseOrder32(x, w, b, dy []float32, g DepthwiseGeom) (y, dx []float32) {
	oh, ow := g.OutH(), g.OutW()
	y, dx = make([]float32, g.N*g.C*oh*ow), make([]float32, len(x))
	for p := range g.N * g.C {
		c := p % g.C
		for oy := range oh {
			for ox := range ow {
				var s float32
				if b != nil {
					s = b[c]
				}
				for kh := range g.K {
					for kw := range g.K {
						iy, ix := oy*g.Stride-g.Pad+kh, ox*g.Stride-g.Pad+kw
						if iy >= 0 && iy < g.H && ix >= 0 && ix < g.W {
							s += float32(w[(c*g.K+kh)*g.K+kw] * x[(p*g.H+iy)*g.W+ix])
						}
					}
				}
				y[(p*oh+oy)*ow+ox] = s
			}
		}
		for iy := range g.H {
			for ix := range g.W {
				var s float32
				for kh := range g.K {
					for kw := range g.K {
						ty, tx := iy+g.Pad-kh, ix+g.Pad-kw
						if ty >= 0 && tx >= 0 && ty%g.Stride == 0 && tx%g.Stride == 0 && ty/g.Stride < oh && tx/g.Stride < ow {
							s += float32(w[(c*g.K+kh)*g.K+kw] * dy[(p*oh+ty/g.Stride)*ow+tx/g.Stride])
						}
					}
				}
				dx[(p*g.H+iy)*g.W+ix] = s
			}
		}
	}
	return y, dx
}

func depthwiseRun(x, w, b, dy []float32, g DepthwiseGeom) (y, dx, dw, db []float32) {
	y, dx, dw, db = make([]float32, len(dy)), make([]float32, len(x)), make([]float32, len(w)), make([]float32, g.C)
	DepthwiseConv2D(y, x, w, b, g)
	DepthwiseConv2DBackward(dx, dw, db, dy, x, w, g)
	return y, dx, dw, db
}

// TestDepthwiseConv2D holds the kernels to the float64 definition, their gradients to central
// differences of it (the loss Σ dy·y), and y and dx bit for bit to the documented float32 order.
func TestDepthwiseConv2D(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for _, g := range depthwiseGeoms {
		t.Run(fmt.Sprintf("%+v", g), func(t *testing.T) {
			kk := g.K * g.K
			x, w, b := randVec(r, g.N*g.C*g.H*g.W), randVec(r, g.C*kk), randVec(r, g.C)
			dy := randVec(r, g.N*g.C*g.OutH()*g.OutW())
			y, dx, dw, db := depthwiseRun(x, w, b, dy, g)
			x64, w64, b64, dy64 := to64(x), to64(w), to64(b), to64(dy)
			closeTo(t, "y", y, depthwise64(x64, w64, b64, g), 1e-5)
			loss := func() float64 { return dot64(dy64, depthwise64(x64, w64, b64, g)) }
			closeTo(t, "dx", dx, numGrad(x64, func([]float64) float64 { return loss() }), 1e-4)
			closeTo(t, "dw", dw, numGrad(w64, func([]float64) float64 { return loss() }), 1e-4)
			closeTo(t, "dbias", db, numGrad(b64, func([]float64) float64 { return loss() }), 1e-4)

			y32, dx32 := depthwiseOrder32(x, w, b, dy, g)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(y32[i]) {
					t.Fatalf("y[%d] = %v; the documented order gives %v", i, y[i], y32[i])
				}
			}
			for i := range dx {
				if math.Float32bits(dx[i]) != math.Float32bits(dx32[i]) {
					t.Fatalf("dx[%d] = %v; the documented order gives %v", i, dx[i], dx32[i])
				}
			}

			// No bias is a bias of 0; no dx and no dbias leave dw as it was.
			yn := make([]float32, len(y))
			DepthwiseConv2D(yn, x, w, nil, g)
			closeTo(t, "y without bias", yn, depthwise64(x64, w64, nil, g), 1e-5)
			dw2 := randVec(r, len(w))
			DepthwiseConv2DBackward(nil, dw2, nil, dy, x, w, g)
			for i := range dw {
				if dw2[i] != dw[i] {
					t.Fatalf("dw[%d] = %v alone; %v with dx and dbias", i, dw2[i], dw[i])
				}
			}
		})
	}
}

// TestDepthwiseMatchesGrouped: the depthwise kernels agree with the composition they replace, a
// Conv2D per channel (one input channel, one output channel) over the channel's planes.
func TestDepthwiseMatchesGrouped(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	for _, g := range depthwiseGeoms {
		x, w, b := randVec(r, g.N*g.C*g.H*g.W), randVec(r, g.C*g.K*g.K), randVec(r, g.C)
		oh, ow := g.OutH(), g.OutW()
		dy := randVec(r, g.N*g.C*oh*ow)
		y, dx, dw, db := depthwiseRun(x, w, b, dy, g)
		cg := ConvGeom{N: g.N, InC: 1, InH: g.H, InW: g.W, OutC: 1, KH: g.K, KW: g.K, Stride: g.Stride, Pad: g.Pad}
		hw, ohw, kk := g.H*g.W, oh*ow, g.K*g.K
		for c := range g.C {
			xc, dyc := make([]float32, g.N*hw), make([]float32, g.N*ohw)
			for n := range g.N {
				copy(xc[n*hw:], x[(n*g.C+c)*hw:][:hw])
				copy(dyc[n*ohw:], dy[(n*g.C+c)*ohw:][:ohw])
			}
			yc, ws := make([]float32, len(dyc)), make([]float32, cg.WorkspaceLen())
			dxc, dwc, dbc := make([]float32, len(xc)), make([]float32, kk), make([]float32, 1)
			Conv2D(yc, xc, w[c*kk:(c+1)*kk], b[c:c+1], ws, cg)
			Conv2DBackward(dxc, dwc, dbc, dyc, w[c*kk:(c+1)*kk], ws, cg)
			yd, dxd := make([]float32, 0, len(yc)), make([]float32, 0, len(xc))
			for n := range g.N {
				yd = append(yd, y[(n*g.C+c)*ohw:][:ohw]...)
				dxd = append(dxd, dx[(n*g.C+c)*hw:][:hw]...)
			}
			name := fmt.Sprintf("%+v channel %d", g, c)
			closeTo(t, name+" y", yd, to64(yc), 1e-5)
			closeTo(t, name+" dx", dxd, to64(dxc), 1e-5)
			closeTo(t, name+" dw", dw[c*kk:(c+1)*kk], to64(dwc), 1e-5)
			closeTo(t, name+" dbias", db[c:c+1], to64(dbc), 1e-5)
		}
	}
}

// TestDepthwiseSameBitsAnyCores: the results do not depend on the number of cores.
func TestDepthwiseSameBitsAnyCores(t *testing.T) {
	r := rand.New(rand.NewPCG(85, 86))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, g := range []DepthwiseGeom{
		{N: 4, C: 40, H: 14, W: 14, K: 7, Stride: 1, Pad: 3},
		{N: 4, C: 24, H: 15, W: 16, K: 3, Stride: 2, Pad: 1},
	} {
		x, w, b := randVec(r, g.N*g.C*g.H*g.W), randVec(r, g.C*g.K*g.K), randVec(r, g.C)
		dy := randVec(r, g.N*g.C*g.OutH()*g.OutW())
		var out [2][4][]float32
		for i, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			y, dx, dw, db := depthwiseRun(x, w, b, dy, g)
			out[i] = [4][]float32{y, dx, dw, db}
		}
		for k, name := range []string{"y", "dx", "dw", "db"} {
			for j, v := range out[0][k] {
				if math.Float32bits(v) != math.Float32bits(out[1][k][j]) {
					t.Fatalf("%+v: %s[%d] = %v on 1 core, %v on 4", g, name, j, v, out[1][k][j])
				}
			}
		}
	}
}

// TestDepthwiseEmptyBatch: no samples write no output and zero weight and bias gradients.
func TestDepthwiseEmptyBatch(t *testing.T) {
	g := DepthwiseGeom{C: 3, H: 5, W: 5, K: 3, Stride: 1, Pad: 1}
	w := randVec(rand.New(rand.NewPCG(1, 2)), g.C*g.K*g.K)
	dw, db := make([]float32, len(w)), []float32{1, 2, 3}
	for i := range dw {
		dw[i] = 1
	}
	DepthwiseConv2D(nil, nil, w, db, g)
	DepthwiseConv2DBackward(nil, dw, db, nil, nil, w, g)
	for i, v := range append(dw, db...) {
		if v != 0 {
			t.Fatalf("gradient %d = %v; want 0", i, v)
		}
	}
}
