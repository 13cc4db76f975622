package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddF32 holds the kernel (AVX2 where built) to the Go loop bit for bit,
// tails, infinities and NaNs included.
func TestAddF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 1000} {
		dst, src := make([]float32, n), make([]float32, n)
		for i := range dst {
			dst[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
			src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
		}
		if n > 3 {
			dst[0], src[1], dst[2], src[2] = float32(math.Inf(1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
		}
		want := append([]float32(nil), dst...)
		addF32Go(want, src)
		addF32(dst, src)
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) && !(dst[i] != dst[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: addF32 element %d = %08x; the Go loop gives %08x", n, i, math.Float32bits(dst[i]), math.Float32bits(want[i]))
			}
		}
	}
}

func BenchmarkAddF32(b *testing.B) {
	dst, src := make([]float32, 32<<10), make([]float32, 32<<10)
	b.SetBytes(4 << 15)
	b.ReportAllocs()
	for b.Loop() {
		addF32(dst, src)
	}
}

// BenchmarkAdd16 is the ring's add of bf16 and fp16 values (one rounding per element and hop).
func BenchmarkAdd16(b *testing.B) {
	for _, f := range []struct {
		name string
		f    format16
	}{{"bf16", bf16Format}, {"fp16", fp16Format}} {
		b.Run(f.name, func(b *testing.B) {
			dst, src := make([]uint16, 32<<10), make([]uint16, 32<<10)
			for i := range src {
				src[i], dst[i] = f.f.round(float32(i%97)/7), f.f.round(float32(i%89)/5)
			}
			b.SetBytes(2 << 15)
			b.ReportAllocs()
			for b.Loop() {
				f.f.add(dst, src)
			}
		})
	}
}
