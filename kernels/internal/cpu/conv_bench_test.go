package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// resnetLayers are 3x3 stride-1 pad-1 layers of resnet18 at 64 px and 224 px (batch 32) and of
// the CIFAR resnets (batch 128).
var resnetLayers = []ConvGeom{
	{N: 32, InC: 64, InH: 16, InW: 16, OutC: 64},
	{N: 32, InC: 128, InH: 8, InW: 8, OutC: 128},
	{N: 32, InC: 256, InH: 4, InW: 4, OutC: 256},
	{N: 32, InC: 512, InH: 2, InW: 2, OutC: 512},
	{N: 128, InC: 16, InH: 28, InW: 28, OutC: 16},
	{N: 128, InC: 32, InH: 14, InW: 14, OutC: 32},
	{N: 128, InC: 64, InH: 7, InW: 7, OutC: 64},
	{N: 128, InC: 32, InH: 16, InW: 16, OutC: 32},
	{N: 128, InC: 64, InH: 8, InW: 8, OutC: 64},
	{N: 32, InC: 64, InH: 8, InW: 8, OutC: 128},
	{N: 32, InC: 256, InH: 14, InW: 14, OutC: 256}, // resnet18's at 224 px
	{N: 32, InC: 512, InH: 7, InW: 7, OutC: 512},
}

// BenchmarkConv2D times Conv2D (fwd) and Conv2DBackward with dx, dw and db (bwd) on
// resnetLayers, whatever paths they take.
func BenchmarkConv2D(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, g := range resnetLayers {
		g.KH, g.KW, g.Stride, g.Pad = 3, 3, 1, 1
		x, w, bias := randVec(r, g.N*g.InC*g.InH*g.InW), randVec(r, g.OutC*g.ColRows()), randVec(r, g.OutC)
		dy := randVec(r, g.N*g.OutC*g.ColCols())
		y, ws := make([]float32, len(dy)), make([]float32, g.WorkspaceLen())
		dx, dw, db := make([]float32, len(x)), make([]float32, len(w)), make([]float32, len(bias))
		name := fmt.Sprintf("N%d_C%d-%d_%dpx", g.N, g.InC, g.OutC, g.InH)
		b.Run(name+"/fwd", func(b *testing.B) {
			for b.Loop() {
				Conv2D(y, x, w, bias, ws, g)
			}
		})
		b.Run(name+"/bwd", func(b *testing.B) {
			Conv2D(y, x, w, bias, ws, g)
			for b.Loop() {
				Conv2DBackward(dx, dw, db, dy, w, ws, g)
			}
		})
	}
}
