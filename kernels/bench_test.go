package kernels_test

import (
	"context"
	"testing"

	"github.com/stoke-ml/stoke/kernels"
)

// BenchmarkOps times the ops that dominate an MNIST training step on the CPU device, each followed
// by a stream Synchronize.
func BenchmarkOps(b *testing.B) {
	e := newEnv(b)
	f32 := func(n int) kernels.F32 {
		buf, err := e.dev.Alloc(4 * n)
		if err != nil {
			b.Fatal(err)
		}
		v := kernels.Float32s(buf)
		if err := e.ops.Fill(e.s, v, 0.5); err != nil {
			b.Fatal(err)
		}
		return v
	}
	conv := kernels.Conv2D{N: 32, InC: 32, InH: 14, InW: 14, OutC: 64, KH: 5, KW: 5, Pad: 2}
	cx, cy, cw, cb, cws := f32(conv.InLen()), f32(conv.OutLen()), f32(conv.WeightLen()), f32(conv.OutC), f32(conv.WorkspaceLen())
	cdx, cdw, cdb := f32(conv.InLen()), f32(conv.WeightLen()), f32(conv.OutC)
	a, w, c := f32(128*784), f32(512*784), f32(128*512)
	for _, bc := range []struct {
		name  string
		flops float64
		run   func() error
	}{
		{"gemm 128x784 by 784x512", 2 * 128 * 784 * 512, func() error {
			return e.ops.Gemm(e.s, false, true, 128, 512, 784, 1, a, w, 0, c)
		}},
		{"conv2d 32x32x14x14 5x5->64", float64(2 * conv.OutLen() * conv.InC * 25), func() error {
			return e.ops.Conv2D(e.s, cy, cx, cw, cb, cws, conv)
		}},
		{"conv2d backward", float64(4 * conv.OutLen() * conv.InC * 25), func() error {
			return e.ops.Conv2DBackward(e.s, cdx, cdw, cdb, cy, cw, cws, conv)
		}},
		{"sgd 100k", 0, func() error {
			return e.ops.SGDStep(e.s, w.Slice(0, 100_000), w.Slice(100_000, 200_000), w.Slice(200_000, 300_000), kernels.SGD{LR: 1e-9, Momentum: 0.9})
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.run(); err != nil {
					b.Fatal(err)
				}
				if err := e.s.Synchronize(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if bc.flops > 0 {
				b.ReportMetric(bc.flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			}
		})
	}
}
