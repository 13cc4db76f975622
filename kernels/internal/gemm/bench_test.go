package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/cputime"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchShapes are the multiplies of training as kernels/ and train/ issue them (batch 128): the
// MNIST MLP (784-512-256-10, weights stored out x in) forward and backward, and the CNN's
// convolutions, each one multiply over the whole batch with the column matrix
// [InC*KH*KW][N*OutH*OutW] (conv1: 1 -> 32 channels on 28x28, conv2: 32 -> 64 on 14x14, 5x5).
var benchShapes = []struct {
	name           string
	transA, transB bool
	m, n, k        int
}{
	{"mlp1_fwd_128x512x784_NT", false, true, 128, 512, 784},
	{"mlp2_fwd_128x256x512_NT", false, true, 128, 256, 512},
	{"mlp1_dW_512x784x128_TN", true, false, 512, 784, 128},
	{"mlp1_dX_128x784x512_NN", false, false, 128, 784, 512},
	{"conv1_fwd_32x100352x25_NN", false, false, 32, 128 * 28 * 28, 25},
	{"conv1_dW_32x25x100352_NT", false, true, 32, 25, 128 * 28 * 28},
	{"conv2_fwd_64x25088x800_NN", false, false, 64, 128 * 14 * 14, 800},
	{"conv2_dW_64x800x25088_NT", false, true, 64, 800, 128 * 14 * 14},
	{"conv2_dX_800x25088x64_TN", true, false, 800, 128 * 14 * 14, 64},
	// The same convolution with the column matrix the other way round (one row per output pixel).
	{"conv2_pixrows_25088x64x800_NN", false, false, 128 * 14 * 14, 64, 800},
	// A small ViT's weight gradients dY^T X (batch 64 of 50 tokens, hidden 64, MLP 256: models'
	// vit_p4), whose A^T the 6-row AVX2 kernel packs 6 values at a time.
	{"vit_mlp1_dW_256x64x3200_TN", true, false, 256, 64, 3200},
	{"vit_qkv_dW_192x64x3200_TN", true, false, 192, 64, 3200},
	{"vit_mlp2_dW_64x256x3200_TN", true, false, 64, 256, 3200},
}

// report adds GFLOP/s (wall clock) and, where the process CPU time is known, GFLOP per CPU
// second: on a machine shared with other work the first falls with the load, while the second
// measures the work a multiply costs (whatever the number of cores it used).
func report(b *testing.B, flops float64, cpu0 time.Duration) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu1, ok := cputime.Process(); ok && cpu1 > cpu0 {
		b.ReportMetric(flops*float64(b.N)/(cpu1-cpu0).Seconds()/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkSgemm compares this package with gonum's Sgemm on the same operands in one run.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range benchShapes {
		// Operands are made on first use, so that a -bench filter skips the large ones, and
		// shared by both implementations.
		var p problem
		operands := func() {
			if p.a == nil {
				p = newProblem(rand.New(rand.NewPCG(1, uint64(s.m))), s.transA, s.transB, s.m, s.n, s.k, 0, 1, 0)
			}
		}
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		bytes := int64(4 * (s.m*s.k + s.k*s.n + s.m*s.n))
		b.Run("stoke/"+s.name, func(b *testing.B) {
			operands()
			b.ReportAllocs()
			b.SetBytes(bytes)
			cpu0, _ := cputime.Process()
			for b.Loop() {
				Sgemm(p.transA, p.transB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
			}
			report(b, flops, cpu0)
		})
		b.Run("gonum/"+s.name, func(b *testing.B) {
			operands()
			tA, tB := blas.NoTrans, blas.NoTrans
			if p.transA {
				tA = blas.Trans
			}
			if p.transB {
				tB = blas.Trans
			}
			b.ReportAllocs()
			b.SetBytes(bytes)
			cpu0, _ := cputime.Process()
			for b.Loop() {
				gonum.Implementation{}.Sgemm(tA, tB, p.m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
			}
			report(b, flops, cpu0)
		})
	}
}

// BenchmarkKernels runs each kernel alone (one goroutine) on a square problem.
func BenchmarkKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	const n = 384
	p := newProblem(r, false, false, n, n, n, 0, 1, 0)
	for _, kern := range supported {
		b.Run(fmt.Sprintf("%s/%d", kern.name, n), func(b *testing.B) {
			b.ReportAllocs()
			cpu0, _ := cputime.Process()
			for b.Loop() {
				multiply(kern, false, false, n, n, n, 1, p.a, p.lda, p.b, p.ldb, 0, p.c, p.ldc, 1)
			}
			report(b, 2*n*n*n, cpu0)
		})
	}
}
