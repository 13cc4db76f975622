package cpu

import (
	"math/rand/v2"
	"testing"
)

// The CNN's two poolings (train's "cnn" model at batch 128): 32 planes of 28x28 and 64 of 14x14;
// and a ResNet's stem at 224 px.
var cnnPools = []struct {
	name string
	g    PoolGeom
}{
	{"28x28", PoolGeom{N: 128, C: 32, H: 28, W: 28, K: 2, Stride: 2}},
	{"14x14", PoolGeom{N: 128, C: 64, H: 14, W: 14, K: 2, Stride: 2}},
	{"stem", PoolGeom{N: 1, C: 64, H: 112, W: 112, K: 3, Stride: 2, Pad: 1}}, // resnet's, one image
}

func BenchmarkMaxPool2D(b *testing.B) {
	for _, c := range cnnPools {
		b.Run(c.name, func(b *testing.B) {
			g := c.g
			x := randVec(rand.New(rand.NewPCG(1, 2)), g.N*g.C*g.H*g.W)
			n := g.N * g.C * g.OutH() * g.OutW()
			y, arg := make([]float32, n), make([]int32, n)
			b.SetBytes(int64(4 * (len(x) + 2*n)))
			for b.Loop() {
				MaxPool2D(y, arg, x, g)
			}
		})
	}
}

func BenchmarkMaxPool2DBackward(b *testing.B) {
	for _, c := range cnnPools {
		b.Run(c.name, func(b *testing.B) {
			g := c.g
			r := rand.New(rand.NewPCG(1, 2))
			x := randVec(r, g.N*g.C*g.H*g.W)
			n := g.N * g.C * g.OutH() * g.OutW()
			y, arg := make([]float32, n), make([]int32, n)
			MaxPool2D(y, arg, x, g)
			dy, dx := randVec(r, n), make([]float32, len(x))
			b.SetBytes(int64(4 * (len(x) + 2*n)))
			for b.Loop() {
				MaxPool2DBackward(dx, dy, arg, g)
			}
		})
	}
}
