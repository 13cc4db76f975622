//go:build cuda

package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

// TestCUDAPrecisionStagingEviction: five streams each enqueue one large bf16 product of the same
// size, with every operand uploaded first (a copy from pageable memory waits for the device).
// The fifth stream's product evicts the first stream's staging block, whose memory, freed into
// the device's cache, becomes the fifth stream's, while the first stream's GEMM is still reading
// it: the eviction must wait for the first stream. Every product must equal the CPU emulation's.
func TestCUDAPrecisionStagingEviction(t *testing.T) {
	gp, cp := openSide(t, "cuda"), openSide(t, "cpu")
	gops, err := kernels.ForPrecision(gp.dev, kernels.BF16)
	check(t, err)
	cops, err := kernels.ForPrecision(cp.dev, kernels.BF16)
	check(t, err)
	r := rand.New(rand.NewPCG(61, 62))
	const m, n, k = 256, 256, 256
	streams := make([]gpu.Stream, 5)
	as, bs := make([][]float32, 5), make([][]float32, 5)
	a, b, outs := make([]kernels.F32, 5), make([]kernels.F32, 5), make([]kernels.F32, 5)
	for i := range streams {
		streams[i], err = gp.dev.NewStream()
		check(t, err)
		sd := &side{gp.dev, streams[i], gops}
		as[i], bs[i] = randF32(r, m*k), randF32(r, k*n)
		a[i], b[i], outs[i] = sd.f32(t, as[i]), sd.f32(t, bs[i]), f32Len(sd, t, m*n)
	}
	for i, s := range streams {
		check(t, gops.Gemm(s, false, false, m, n, k, 1, a[i], b[i], 0, outs[i]))
	}
	for i, s := range streams {
		got := (&side{gp.dev, s, gops}).read(t, outs[i])
		c := f32Len(cp, t, m*n)
		check(t, cops.Gemm(cp.s, false, false, m, n, k, 1, cp.f32(t, as[i]), cp.f32(t, bs[i]), 0, c))
		if e := relErr(got, cp.read(t, c)); !(e <= 1e-5) {
			t.Errorf("stream %d: relative error %g against the CPU's bf16 emulation", i, e)
		}
	}
}
