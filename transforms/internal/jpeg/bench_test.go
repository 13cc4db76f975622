package jpeg

import (
	"bytes"
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
