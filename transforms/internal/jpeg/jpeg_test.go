package jpeg

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"io"
	"os"
	"testing"
)

// photo makes a w x h test image with edges, gradients and texture.
func photo(w, h int, gray bool) image.Image {
	if gray {
		m := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				m.Pix[y*m.Stride+x] = byte((x*3 + y*5 + (x*y)%23) % 256)
			}
		}
		return m
	}
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{byte(x * 255 / w), byte((y*7 + x) % 256), byte((x ^ y) * 3), 255})
		}
	}
	return m
}

func encode(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, m, &stdjpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stdPlanes decodes with the standard library and returns its planes.
func stdPlanes(t *testing.T, data []byte) [][]byte {
	t.Helper()
	m, err := stdjpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	switch m := m.(type) {
	case *image.YCbCr:
		return [][]byte{m.Y, m.Cb, m.Cr}
	case *image.Gray:
		return [][]byte{m.Pix}
	}
	t.Fatalf("standard decoder returned %T", m)
	return nil
}

func stdStrides(t *testing.T, data []byte) []int {
	m, _ := stdjpeg.Decode(bytes.NewReader(data))
	switch m := m.(type) {
	case *image.YCbCr:
		return []int{m.YStride, m.CStride, m.CStride}
	case *image.Gray:
		return []int{m.Stride}
	}
	return nil
}

// files are the decoder's test images: two made here, the rest made once from the same 40x24
// picture by PIL (progressive.jpg: progressive=True; q90-444.jpg: subsampling=0; q85-422.jpg:
// quality=85, subsampling=1; progressive-422-odd.jpg: its 37x21 top left, quality=85,
// subsampling=1, progressive=True) and by libjpeg-turbo's cjpeg (restart*.jpg: -restart 1B or
// 2B, one also -grayscale), for the features Go's encoder does not produce. (Progressive files
// with restart markers are not here: image/jpeg, and so this fork, rejects cjpeg's with "missing
// 0xff00 sequence".)
func files(t testing.TB) map[string][]byte {
	m := map[string][]byte{
		"420 odd size": encode(t, photo(61, 37, false)),
		"gray":         encode(t, photo(45, 30, true)),
	}
	for _, f := range []string{"progressive", "progressive-422-odd", "q90-444", "q85-422", "restart", "restart-gray"} {
		b, err := os.ReadFile("testdata/" + f + ".jpg")
		if err != nil {
			t.Fatal(err)
		}
		m[f] = b
	}
	return m
}

func TestDecodeMatchesStandardLibrary(t *testing.T) {
	var dec Decoder
	for name, data := range files(t) {
		t.Run(name, func(t *testing.T) {
			want, strides := stdPlanes(t, data), stdStrides(t, data)
			for _, region := range []image.Rectangle{{}, image.Rect(17, 9, 30, 20)} {
				m, err := dec.Decode(data, Options{Region: region})
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != m.Comps {
					t.Fatalf("Decode comps = %d; want %d", m.Comps, len(want))
				}
				for i := range m.Comps {
					p := m.Planes[i]
					x0, y0, x1, y1 := 0, 0, p.W, p.H
					if !region.Empty() {
						x0, y0 = region.Min.X/p.SubX, region.Min.Y/p.SubY
						x1, y1 = region.Max.X/p.SubX, region.Max.Y/p.SubY
					}
					if x0 < p.X0 || y0 < p.Y0 || x1 > p.X0+p.W || y1 > p.Y0+p.H {
						t.Fatalf("region %v plane %d holds [%d,%d)x[%d,%d); want [%d,%d)x[%d,%d) covered", region, i, p.X0, p.X0+p.W, p.Y0, p.Y0+p.H, x0, x1, y0, y1)
					}
					for y := y0; y < y1; y++ {
						for x := x0; x < x1; x++ {
							if got, w := p.Pix[(y-p.Y0)*p.Stride+x-p.X0], want[i][y*strides[i]+x]; got != w {
								t.Fatalf("region %v plane %d (%d,%d) = %d; standard library says %d", region, i, x, y, got, w)
							}
						}
					}
				}
			}
		})
	}
}

func TestDecodeScaled(t *testing.T) {
	// A reduced IDCT approximates the mean of each scale x scale group of full-size pixels.
	var dec Decoder
	for name, data := range files(t) {
		full := stdPlanes(t, data)
		strides := stdStrides(t, data)
		for _, scale := range []int{2, 4, 8} {
			m, err := dec.Decode(data, Options{Scale: scale})
			if err != nil {
				t.Fatal(err)
			}
			for i := range m.Comps {
				p := m.Planes[i]
				var sum, n float64
				for y := range p.H - 1 { // the last row/column may average fewer pixels
					for x := range p.W - 1 {
						mean := 0
						for dy := range scale {
							for dx := range scale {
								mean += int(full[i][(y*scale+dy)*strides[i]+x*scale+dx])
							}
						}
						d := float64(p.Pix[y*p.Stride+x]) - float64(mean)/float64(scale*scale)
						sum += d * d
						n++
					}
				}
				if rms := sum / max(n, 1); rms > 12*12 {
					t.Errorf("%s: scale %d plane %d: rms difference from box mean = %.1f; want <= 12", name, scale, i, rms)
				}
			}
		}
	}
}

func TestDecodeBadInput(t *testing.T) {
	good := encode(t, photo(32, 32, false))
	var dec Decoder
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not jpeg", []byte("hello, world")},
		{"truncated header", good[:30]},
		{"truncated scan", good[:len(good)-40]},
	}
	for _, tc := range tests {
		_, err := dec.Decode(tc.data, Options{})
		var fe FormatError
		if err == nil || (!errors.As(err, &fe) && !errors.Is(err, io.ErrUnexpectedEOF)) {
			t.Errorf("Decode(%s) = %v; want a FormatError or io.ErrUnexpectedEOF", tc.name, err)
		}
	}
	// A restart marker out of sequence is corrupt data: an error, not a panic or a hang.
	rst := files(t)["restart"]
	bad := bytes.Replace(rst, []byte{0xff, 0xd1}, []byte{0xff, 0xd5}, 1)
	if bytes.Equal(bad, rst) {
		t.Fatal("restart.jpg has no RST1 marker")
	}
	if _, err := dec.Decode(bad, Options{}); err == nil {
		t.Error("Decode(wrong RST marker) = nil error; want FormatError")
	}
	if _, err := dec.Decode(good, Options{Scale: 3}); err == nil {
		t.Error("Decode(scale 3) = nil error; want UnsupportedError")
	}
	if _, err := dec.Decode(good, Options{Scale: 2, Exact: true}); !errors.As(err, new(UnsupportedError)) {
		t.Errorf("Decode(scale 2, exact) = %v; want UnsupportedError", err)
	}
}

func TestWarmDecoderAllocatesNothing(t *testing.T) {
	data := encode(t, photo(200, 150, false))
	var dec Decoder
	if _, err := dec.Decode(data, Options{}); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(20, func() {
		if _, err := dec.Decode(data, Options{Region: image.Rect(30, 30, 100, 90)}); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Decode allocs = %v; want 0", n)
	}
	// A progressive scan meets its end through readByteStuffedByte's error, which must not
	// allocate either.
	prog := files(t)["progressive"]
	if _, err := dec.Decode(prog, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { dec.Decode(prog, Options{}) }); n != 0 {
		t.Errorf("Decode(progressive) allocs = %v; want 0", n)
	}
	if _, err := dec.Decode(data, Options{Exact: true}); err != nil {
		t.Fatal(err)
	}
	n = testing.AllocsPerRun(20, func() {
		if _, err := dec.Decode(data, Options{Exact: true, Region: image.Rect(30, 30, 100, 90)}); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Decode(exact) allocs = %v; want 0", n)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(f, photo(24, 16, false)))
	f.Add(encode(f, photo(9, 9, true)))
	for _, b := range files(f) {
		f.Add(b)
	}
	var dec Decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		for _, o := range []Options{{MaxPixels: 1 << 20}, {Scale: 4, Region: image.Rect(8, 8, 16, 16), MaxPixels: 1 << 20},
			{Exact: true, MaxPixels: 1 << 20}, {Exact: true, Region: image.Rect(8, 8, 16, 16), MaxPixels: 1 << 20}} {
			m, err := dec.Decode(data, o)
			if err == nil && (m.Width <= 0 || m.Height <= 0 || m.Comps < 1) {
				t.Errorf("Decode = %dx%d, %d comps; want a positive size", m.Width, m.Height, m.Comps)
			}
			if err == nil && o.Exact {
				checkExactPlanes(t, m)
			}
			if avx2 && !o.Exact {
				decodeBoth(t, data, o) // the SIMD IDCT changes nothing, whatever the input
			}
		}
	})
}
