//go:build !noasm

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWinogradAsmParity holds the AVX-512 transforms to the Go ones bit for bit (the same
// additions in the same order), with group counts that leave partial last groups of lanes.
func TestWinogradAsmParity(t *testing.T) {
	if !winoAVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(95, 96))
	same := func(name string, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s[%d]: asm %v, Go %v", name, i, a[i], b[i])
			}
		}
	}
	for _, g := range []ConvGeom{
		{N: 3, InC: 5, InH: 4, InW: 4, OutC: 7},
		{N: 2, InC: 9, InH: 10, InW: 6, OutC: 3},
		{N: 5, InC: 17, InH: 12, InW: 8, OutC: 33},
	} {
		g.KH, g.KW, g.Stride = 3, 3, 1
		_, _, per := winoTiles(g)
		p := g.N * per
		oc := g.OutC * g.InC
		su := winoStride(oc)
		w := randVec(r, oc*9)
		ua, ug := make([]float32, 16*su), make([]float32, 16*su)
		winoFiltersAsm(ua, su, w, 0, oc)
		winoFiltersGo(ug, su, w, 0, oc)
		same("U", ua, ug)

		x := randVec(r, g.N*g.InC*g.InH*g.InW)
		offs := make([]int32, 2*p)
		winoOffsets(offs[:p], offs[p:], g)
		for _, tiles := range [][2]int{{0, p}, {1, p - 1}} { // all, and a block inside the batch
			t0, t1 := tiles[0], tiles[1]
			n := t1 - t0
			sv, sm := winoStride(g.InC*n), winoStride(g.OutC*n)
			va, vg := make([]float32, 16*sv), make([]float32, 16*sv)
			winoInputAsm(va, sv, x, g, offs[t0:t1], 0, g.InC)
			winoInputGo(vg, sv, x, g, t0, t1, 0, g.InC)
			same("V", va, vg)

			m, b := randVec(r, 16*sm), randVec(r, g.OutC)
			for _, bias := range [][]float32{b, nil} {
				ya, yg := make([]float32, g.N*g.OutC*g.ColCols()), make([]float32, g.N*g.OutC*g.ColCols())
				winoOutputAsm(ya, m, sm, bias, g, offs[p+t0:p+t1], 0, g.OutC)
				winoOutputGo(yg, m, sm, bias, g, t0, t1, 0, g.OutC)
				same("y", ya, yg)
			}
		}
	}
}

// TestWinogradWithoutAVX512 runs Conv2D and Conv2DBackward as a CPU without AVX-512 does
// (Winograd by the Go transforms, for 128 channels or more, odd output sizes included): within
// 1e-4 of the plain convolution for y and dx, and y of the float64 one.
func TestWinogradWithoutAVX512(t *testing.T) {
	defer func(on bool) { winoAVX512 = on }(winoAVX512)
	winoAVX512 = false
	r := rand.New(rand.NewPCG(101, 102))
	for _, g := range []ConvGeom{
		{N: 2, InC: 128, InH: 5, InW: 4, OutC: 130, KH: 3, KW: 3, Stride: 1, Pad: 1},
		{N: 3, InC: 128, InH: 2, InW: 2, OutC: 128, KH: 3, KW: 3, Stride: 1, Pad: 1},
	} {
		if !winograd(g.padded()) {
			t.Fatalf("%+v: not by Winograd", g)
		}
		checkConvParity(t, r, g)
		x, w, b := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
		y, ws := make([]float32, g.N*g.OutC*g.ColCols()), make([]float32, g.WorkspaceLen())
		Conv2D(y, x, w, b, ws, g)
		closeTo(t, "y", y, conv64(to64(x), to64(w), to64(b), g), 1e-4)
	}
}
