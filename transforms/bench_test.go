package transforms

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/internal/rng"
)

// cpuSeconds is the process's user+system CPU time (0 where the system does not report it): on
// a shared machine, CPU time per image is steadier than wall time.
func cpuSeconds() float64 {
	d, _ := cputime.Process()
	return d.Seconds()
}

// photos loads the JPEGs of the real-photo set named by $STOKE_PHOTOS (made by
// ../shared/data/make-photoset.py); benchmarks that need it skip without it.
func photos(b *testing.B) [][]byte {
	dir := os.Getenv("STOKE_PHOTOS")
	if dir == "" {
		b.Skip("STOKE_PHOTOS not set (a folder of JPEGs, e.g. from make-photoset.py)")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no JPEGs under %s: %v", dir, err)
	}
	var out [][]byte
	var size int64
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, d)
		size += int64(len(d))
	}
	return out
}

// synthetic is a 500x375 photo-like JPEG (smooth gradients plus texture), made here.
func synthetic(b testing.TB) []byte {
	in := hwc(375, 500, 3, func(y, x, c int) byte {
		return byte((x*(c+1) + y*(3-c) + (x*y)%37 + (x^y)%13) / 2)
	})
	return encodeJPEG(b, toImage(in), 90)
}

// benchApply runs p over imgs with g goroutines, one Worker each, as a loader's decode stage
// would, and reports images/s. One b.Loop iteration transforms 64 images (a batch).
func benchApply(b *testing.B, p *Chain, imgs [][]byte, g int) {
	const batch = 64
	shape, err := p.OutShape(Shape{C: 3, H: 375, W: 500})
	if err != nil {
		b.Fatal(err)
	}
	type state struct {
		w   *Worker
		r   *rng.Sample
		dst []byte
	}
	st := make([]state, g)
	for i := range st {
		st[i] = state{p.NewWorker(), rng.NewSample(), make([]byte, shape.Len())}
	}
	var in int64
	for _, d := range imgs {
		in += int64(len(d))
	}
	b.SetBytes(in / int64(len(imgs)) * batch)
	b.ReportAllocs()
	next := 0
	cpu0 := cpuSeconds()
	for b.Loop() {
		var wg sync.WaitGroup
		for k := range g {
			wg.Go(func() {
				s := &st[k]
				for j := k; j < batch; j += g {
					i := next + j
					s.r.Reset(1, 0, i)
					if err := s.w.Apply(s.dst, Input{Encoded: imgs[i%len(imgs)]}, s.r.Rand); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		next += batch
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N*batch), "cpu-µs/image")
}

// BenchmarkPhotos is the transform-level speed figure: the photo set through Train(224)
// (RandomResizedCrop + flip; normalization left for the device) with 2 goroutines.
func BenchmarkPhotos(b *testing.B) {
	imgs := photos(b)
	b.Run("train224/workers=2", func(b *testing.B) { benchApply(b, Train(224), imgs, 2) })
	b.Run("train224/workers=1", func(b *testing.B) { benchApply(b, Train(224), imgs, 1) })
	b.Run("eval224/workers=2", func(b *testing.B) { benchApply(b, Eval(224), imgs, 2) })
}

// BenchmarkSynthetic needs no data: one made-up 500x375 JPEG, decoded and augmented.
func BenchmarkSynthetic(b *testing.B) {
	img := [][]byte{synthetic(b)}
	b.Run("train224", func(b *testing.B) { benchApply(b, Train(224), img, 1) })
	b.Run("eval224", func(b *testing.B) { benchApply(b, Eval(224), img, 1) })
	b.Run("decode-only", func(b *testing.B) { benchApply(b, Compose(), img, 1) })
}

// BenchmarkAugmentRaw is the augment path alone (no decode): raw interleaved pixels in, uint8
// CHW out through Train(224) (grey: its crop and flip), at the photo set's size and at the
// 256-side size `stoke pack --max-side 256` stores, for 3 channels and 1.
func BenchmarkAugmentRaw(b *testing.B) {
	for _, bc := range []struct {
		name    string
		h, w, c int
	}{
		{"500x375x3", 375, 500, 3},
		{"256x192x3", 192, 256, 3},
		{"256x192x1", 192, 256, 1},
	} {
		b.Run(bc.name, func(b *testing.B) { benchRaw(b, bc.h, bc.w, bc.c) })
	}
}

func benchRaw(b *testing.B, h, w, c int) {
	raw := hwc(h, w, c, func(y, x, c int) byte { return byte(x + y*c + (x*y)%29) })
	p := Train(224)
	if c == 1 { // Train's Normalize has three means
		p = Compose(RandomResizedCrop(224), HorizontalFlip(0.5))
	}
	wk, r := p.NewWorker(), rng.NewSample()
	dst := make([]byte, c*224*224)
	b.SetBytes(int64(len(raw.Pixels)))
	b.ReportAllocs()
	i := 0
	cpu0 := cpuSeconds()
	for b.Loop() {
		r.Reset(1, 0, i)
		i++
		if err := wk.Apply(dst, raw, r.Rand); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N), "cpu-µs/image")
}

// BenchmarkDecodeModes is the cost of ExactDecode against FastDecode per image, one Worker: the
// photo set of $STOKE_PHOTOS (or, without it, the synthetic 500x375 JPEG) through Eval at 224
// and 32 pixels and Train(224). (The decode alone: BenchmarkDecode of internal/jpeg.)
func BenchmarkDecodeModes(b *testing.B) {
	var imgs [][]byte
	if os.Getenv("STOKE_PHOTOS") != "" {
		imgs = photos(b)
	} else {
		imgs = [][]byte{synthetic(b)}
	}
	for _, c := range []struct {
		name  string
		chain *Chain
	}{
		{"eval224", Eval(224)},
		{"eval32", Eval(32)},
		{"train224", Train(224)},
	} {
		for _, m := range []DecodeMode{FastDecode, ExactDecode} {
			b.Run(c.name+"/"+m.String(), func(b *testing.B) { benchApply(b, c.chain.WithDecode(m), imgs, 1) })
		}
	}
}

// BenchmarkApplyCoefficients is the host's share of a device decode against the host path, per
// image, one Worker: the photo set of $STOKE_PHOTOS (or, without it, the synthetic 500x375 JPEG)
// through RandomResizedCrop(224) and a flip, by Apply ("apply": decode and resample into 3x224x224
// pixels) and by ApplyCoefficients ("coefficients": entropy decode into the record; its mean
// length in record-bytes/image, against the pixels' 150,528).
func BenchmarkApplyCoefficients(b *testing.B) {
	imgs := [][]byte{synthetic(b)}
	if os.Getenv("STOKE_PHOTOS") != "" {
		imgs = photos(b)
	}
	p, s := Compose(RandomResizedCrop(224), HorizontalFlip(0.5)), Shape{C: 3, H: 224, W: 224}
	for _, device := range []bool{false, true} {
		name := map[bool]string{false: "apply", true: "coefficients"}[device]
		b.Run(name, func(b *testing.B) {
			w, r := p.NewWorker(), rng.NewSample()
			dst := make([]byte, 1<<20)
			var recorded int64
			i := 0
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			for b.Loop() {
				r.Reset(1, 0, i)
				in := Input{Encoded: imgs[i%len(imgs)]}
				i++
				var err error
				if device {
					var n int
					n, err = w.ApplyCoefficients(dst, s, in, r.Rand)
					recorded += int64(n)
				} else {
					err = w.Apply(dst[:s.Len()], in, r.Rand)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N), "cpu-µs/image")
			if device {
				b.ReportMetric(float64(recorded)/float64(b.N), "record-bytes/image")
			}
		})
	}
}

// BenchmarkMix: MixUp and CutMix of one batch of 64 images of 3x224x224 in place, what
// loaders.Config.Mix adds to the copy stage per batch (ns/op is per batch).
func BenchmarkMix(b *testing.B) {
	s := Shape{C: 3, H: 224, W: 224}
	batch := mixBatch(64, s)
	for _, m := range []Mix{{MixUpAlpha: 0.2}, {CutMixAlpha: 1}} {
		name := map[bool]string{true: "cutmix", false: "mixup"}[m.CutMixAlpha > 0]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for i := range b.N {
				if _, err := m.Apply(batch, 64, s, 0, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
