package jpeg

import (
	"bytes"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// benchFiles is the first 100 JPEGs of $STOKE_PHOTOS, or one made-up image without it.
func benchFiles(b *testing.B) [][]byte {
	files, _ := filepath.Glob(filepath.Join(os.Getenv("STOKE_PHOTOS"), "*", "*.jpg"))
	if os.Getenv("STOKE_PHOTOS") == "" || len(files) == 0 {
		return [][]byte{encode(b, photo(500, 375, false))}
	}
	var out [][]byte
	for _, f := range files[:min(100, len(files))] {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// BenchmarkDecode compares full-image decodes: this fork into reused planes (Y, Cb, Cr; and
// with Exact, libjpeg-turbo's full-resolution RGB) against image/jpeg.Decode.
func BenchmarkDecode(b *testing.B) {
	imgs := benchFiles(b)
	var size int64
	for _, d := range imgs {
		size += int64(len(d))
	}
	for _, c := range []struct {
		name string
		opt  Options
	}{{"fork", Options{}}, {"fork-exact", Options{Exact: true}}} {
		b.Run(c.name, func(b *testing.B) {
			var dec Decoder
			b.SetBytes(size / int64(len(imgs)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := dec.Decode(imgs[i%len(imgs)], c.opt); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(size / int64(len(imgs)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := stdjpeg.Decode(bytes.NewReader(imgs[i%len(imgs)])); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	})
}

// BenchmarkDecodeCoefficients compares the host's half of a hybrid decode, DecodeCoefficients
// (entropy decoding alone), with a full Decode of the same images and Options, Y, Cb, Cr planes
// and (decode-exact) full-resolution RGB as the device would make, and times Reconstruct, the Go
// reference of the device's half: the whole image, and a centred 224x224 region as a training
// crop decodes. It reports the mean Coefficients.Bytes per image.
func BenchmarkDecodeCoefficients(b *testing.B) {
	imgs := benchFiles(b)
	var dec Decoder
	regions := make([]image.Rectangle, len(imgs))
	for i, d := range imgs {
		m, err := dec.Decode(d, Options{})
		if err != nil {
			b.Fatal(err)
		}
		x0, y0 := max(m.Width-224, 0)/2, max(m.Height-224, 0)/2
		regions[i] = image.Rect(x0, y0, x0+224, y0+224)
	}
	for _, crop := range []bool{false, true} {
		opt := func(i int) Options {
			if crop {
				return Options{Region: regions[i]}
			}
			return Options{}
		}
		name := "whole"
		if crop {
			name = "crop224"
		}
		for _, exact := range []bool{false, true} {
			sub := "/decode"
			if exact {
				sub = "/decode-exact" // what the device would do: IDCT, upsampling, colour
			}
			b.Run(name+sub, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					o := opt(i % len(imgs))
					o.Exact = exact
					if _, err := dec.Decode(imgs[i%len(imgs)], o); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
			})
		}
		b.Run(name+"/coefficients", func(b *testing.B) {
			b.ReportAllocs()
			i, size := 0, 0
			for b.Loop() {
				co, err := dec.DecodeCoefficients(imgs[i%len(imgs)], opt(i%len(imgs)))
				if err != nil {
					b.Fatal(err)
				}
				size += co.Bytes()
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(float64(size)/float64(b.N), "coef-B/image")
		})
		b.Run(name+"/reconstruct", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				co, err := dec.DecodeCoefficients(imgs[i%len(imgs)], opt(i%len(imgs)))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				co.Reconstruct()
				i++
			}
		})
	}
}
