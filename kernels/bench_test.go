package kernels_test

import (
	"context"
	"fmt"
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

// BenchmarkAttention times one forward and backward pass of attention over 48 problems (4 images
// of 12 heads) of head dimension 64 at the sequence lengths of a ViT on 28 px (65 with 4 px
// patches) and 224 px images (197), and over the 256 problems of BenchmarkTrainStep's ViT (batch
// 64, 4 heads of 8 features, 17 tokens), fused (Attention, AttentionBackward) and composed as the ops
// a model would otherwise chain: batched GEMMs around a row softmax and its backward, which hold
// the whole score matrix.
func BenchmarkAttention(b *testing.B) {
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
	for _, sz := range []struct{ batch, l, d int }{{48, 65, 64}, {48, 197, 64}, {256, 17, 8}} {
		batch, l, d := sz.batch, sz.l, sz.d
		g := kernels.Attention{Batch: batch, LQ: l, LK: l, D: d, Scale: 0.125}
		q, k, v, y, dy := f32(g.QLen()), f32(g.KLen()), f32(g.KLen()), f32(g.QLen()), f32(g.QLen())
		dq, dk, dv, lse := f32(g.QLen()), f32(g.KLen()), f32(g.KLen()), f32(g.Rows())
		s, p, dp := f32(batch*l*l), f32(batch*l*l), f32(batch*l*l)
		ld, ll := l*d, l*l
		gs := func(ta, tb bool, m, n, kk int, alpha float32, a kernels.F32, sa int, bm kernels.F32, sb int, c kernels.F32, sc int) error {
			return e.ops.GemmStrided(e.s, ta, tb, batch, m, n, kk, alpha, a, sa, bm, sb, 0, c, sc)
		}
		for _, bc := range []struct {
			name string
			run  func() error
		}{
			{fmt.Sprintf("fused %dx L=%d d=%d", batch, l, d), func() error {
				return firstErr(e.ops.Attention(e.s, y, lse, q, k, v, g),
					e.ops.AttentionBackward(e.s, dq, dk, dv, dy, q, k, v, y, lse, g))
			}},
			{fmt.Sprintf("composed %dx L=%d d=%d", batch, l, d), func() error {
				return firstErr(gs(false, true, l, l, d, g.Scale, q, ld, k, ld, s, ll),
					e.ops.Softmax(e.s, p, s, batch*l, l),
					gs(false, false, l, d, l, 1, p, ll, v, ld, y, ld),
					gs(false, true, l, l, d, 1, dy, ld, v, ld, dp, ll),
					gs(true, false, l, d, l, 1, p, ll, dy, ld, dv, ld),
					e.ops.SoftmaxBackward(e.s, dp, dp, p, batch*l, l),
					gs(false, false, l, d, l, g.Scale, dp, ll, k, ld, dq, ld),
					gs(true, false, l, d, l, g.Scale, dp, ll, q, ld, dk, ld))
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
			})
		}
	}
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
