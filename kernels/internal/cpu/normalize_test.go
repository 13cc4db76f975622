package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// withKernel runs f with normalizeRow using k (nil: the Go loop), restoring the choice after.
func withKernel(k *normKernel, f func()) {
	saved := normalizeKernel
	normalizeKernel = k
	defer func() { normalizeKernel = saved }()
	f()
}

// TestNormalizeSIMDMatchesGo checks every SIMD kernel this CPU runs against the Go loop bit for
// bit: every byte value, lengths around the kernels' widths and unrolling (so every tail), source
// and destination at every alignment, ImageNet's factors and random ones, and nothing written
// past the end.
func TestNormalizeSIMDMatchesGo(t *testing.T) {
	if len(normKernels) == 0 {
		t.Skip("no SIMD kernel on this CPU or build")
	}
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]uint8, 1100)
	for i := range src {
		src[i] = uint8(i) // every value, then more
	}
	r.Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	type factors struct{ mul, add float32 }
	fs := []factors{{1, 0}, {1 / (255 * 0.229), -0.485 / 0.229}, {1 / (255 * 0.225), -0.406 / 0.225}, {1.0 / 255, 0}}
	for range 20 {
		fs = append(fs, factors{float32(r.NormFloat64() * 10), float32(r.NormFloat64() * 100)})
	}
	lengths := []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 1000, 1024}
	want := make([]float32, 1200)
	got := make([]float32, 1200)
	const sentinel = 0x7fc0dead // a NaN the kernels never produce
	for _, k := range normKernels {
		for _, f := range fs {
			for _, n := range lengths {
				for off := range 4 {
					in := src[off : off+n]
					normalizeGo(want[:n], in, f.mul, f.add)
					for i := range got {
						got[i] = math.Float32frombits(sentinel)
					}
					withKernel(k, func() { normalizeRow(got[off:off+n], in, f.mul, f.add) })
					for i := range got {
						w := uint32(sentinel)
						if i >= off && i < off+n {
							w = math.Float32bits(want[i-off])
						}
						if g := math.Float32bits(got[i]); g != w {
							t.Fatalf("%s: mul %v add %v n %d offset %d: element %d = %#x (%v); want %#x",
								k.name, f.mul, f.add, n, off, i-off, g, got[i], w)
						}
					}
				}
			}
		}
	}
}

// TestNormalizeU8SameWithAndWithoutSIMD runs the whole NormalizeU8 (per-channel factors, rows
// whose length is no multiple of a kernel's width) with each kernel and with the Go loop.
func TestNormalizeU8SameWithAndWithoutSIMD(t *testing.T) {
	const n, channels, inner = 4, 3, 37 * 41
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]uint8, n*channels*inner)
	for i := range src {
		src[i] = uint8(r.Uint32())
	}
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	want := make([]float32, len(src))
	withKernel(nil, func() { NormalizeU8(want, src, channels, inner, mean, std) })
	for i, v := range src {
		c := i / inner % channels
		if e := math.Abs(float64(want[i]) - (float64(v)/255-float64(mean[c]))/float64(std[c])); e > 2e-6 {
			t.Fatalf("Go loop: element %d = %v; off by %g", i, want[i], e)
		}
	}
	for _, k := range normKernels {
		got := make([]float32, len(src))
		withKernel(k, func() { NormalizeU8(got, src, channels, inner, mean, std) })
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d = %v; the Go loop gives %v", k.name, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkNormalizeU8 normalizes a batch of 64 ImageNet-sized images (3x224x224, uint8 ->
// float32) into one reused buffer, as stoke bench does on the cpu device, with each kernel.
func BenchmarkNormalizeU8(b *testing.B) {
	const batch, channels, inner = 64, 3, 224 * 224
	src := make([]uint8, batch*channels*inner)
	for i := range src {
		src[i] = uint8(i * 7)
	}
	dst := make([]float32, len(src))
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	for _, k := range append([]*normKernel{nil}, normKernels...) {
		name := "go"
		if k != nil {
			name = k.name
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			withKernel(k, func() {
				for b.Loop() {
					NormalizeU8(dst, src, channels, inner, mean, std)
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/image")
		})
	}
}
