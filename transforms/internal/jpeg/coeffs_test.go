package jpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// sameImage reports where got (a Reconstruct) differs from want (a Decode of the same data).
func sameImage(got, want *Image) error {
	if got.Width != want.Width || got.Height != want.Height || got.Comps != want.Comps || got.RGB != want.RGB ||
		got.Scale != want.Scale {
		return fmt.Errorf("image %dx%d, %d comps, RGB %v, scale %d; Decode says %dx%d, %d, %v, %d",
			got.Width, got.Height, got.Comps, got.RGB, got.Scale, want.Width, want.Height, want.Comps, want.RGB, want.Scale)
	}
	for i := range 3 {
		p, q := got.Planes[i], want.Planes[i]
		if !bytes.Equal(p.Pix, q.Pix) {
			for j := range min(len(p.Pix), len(q.Pix)) {
				if p.Pix[j] != q.Pix[j] {
					return fmt.Errorf("plane %d: sample (%d,%d) = %d; Decode says %d", i, j%q.Stride, j/q.Stride, p.Pix[j], q.Pix[j])
				}
			}
			return fmt.Errorf("plane %d holds %d samples; Decode's %d", i, len(p.Pix), len(q.Pix))
		}
		if p.Stride != q.Stride || p.X0 != q.X0 || p.Y0 != q.Y0 || p.W != q.W || p.H != q.H || p.SubX != q.SubX ||
			p.SubY != q.SubY {
			p.Pix, q.Pix = nil, nil
			return fmt.Errorf("plane %d is %+v; Decode's %+v", i, p, q)
		}
	}
	return nil
}

// checkCoefficients decodes data with Decode and with DecodeCoefficients then Reconstruct, with
// one Decoder (so that each result must leave the other's memory alone), and reports a
// difference in the error class or in the images. Coefficients outside int16 (errWide) are the
// documented exception: Decode takes them.
func checkCoefficients(dec *Decoder, data []byte, o Options) error {
	m, err := dec.Decode(data, o)
	co, cerr := dec.DecodeCoefficients(data, o)
	if errors.Is(cerr, errWide) && err == nil {
		return nil
	}
	if errClass(err) != errClass(cerr) {
		return fmt.Errorf("%+v: Decode error %v, DecodeCoefficients error %v", o, err, cerr)
	}
	if err != nil {
		return nil
	}
	if err := checkLayout(co); err != nil {
		return fmt.Errorf("%+v: %v", o, err)
	}
	if err := sameImage(co.Reconstruct(), m); err != nil {
		return fmt.Errorf("%+v: %v", o, err)
	}
	return nil
}

// checkLayout checks the invariants the device relies on: grids that tile Start, pairs inside
// the streams, indices in the scale's window, in zig-zag order, and no zero values.
func checkLayout(co *Coefficients) error {
	n, w := 0, 8/co.Scale
	for c := range co.Comps {
		g := &co.Grids[c]
		if g.First != n || g.Plane.Stride != g.Across*w || g.Plane.Pix != nil {
			return fmt.Errorf("grid %d = %+v; want First %d, Stride %d, no Pix", c, *g, n, g.Across*w)
		}
		n += g.Across * g.Down
	}
	if n != len(co.Start) || n != len(co.Count) || len(co.Index) != len(co.Value) {
		return fmt.Errorf("%d blocks in the grids, %d starts, %d counts; %d indices, %d values",
			n, len(co.Start), len(co.Count), len(co.Index), len(co.Value))
	}
	for i, cnt := range co.Count {
		if cnt == Absent {
			continue
		}
		s, e := int(co.Start[i]), int(co.Start[i])+int(cnt)
		if cnt > blockSize || e > len(co.Index) {
			return fmt.Errorf("block %d: pairs [%d, %d) of %d", i, s, e, len(co.Index))
		}
		prev := int32(-1)
		for j := s; j < e; j++ {
			k := co.Index[j]
			if k >= blockSize || int(k%8) >= w || int(k/8) >= w || co.Value[j] == 0 || zigzag[k] <= prev {
				return fmt.Errorf("block %d: pair (%d, %d) after zig-zag index %d", i, k, co.Value[j], prev)
			}
			prev = zigzag[k]
		}
	}
	return nil
}

// errClass names the kind of err that the package documents.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.As(err, new(FormatError)):
		return "FormatError"
	case errors.As(err, new(UnsupportedError)):
		return "UnsupportedError"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "io.ErrUnexpectedEOF"
	}
	return fmt.Sprintf("%T", err)
}

// coefficientFiles are files(t) and three larger images from Go's encoder, whose blocks hold
// more AC terms than the small ones': noise at quality 100 fills whole blocks (64 terms).
func coefficientFiles(t testing.TB) map[string][]byte {
	m := files(t)
	m["420 200x150"] = encode(t, photo(200, 150, false))
	m["gray 75x50"] = encode(t, photo(75, 50, true))
	noise := image.NewGray(image.Rect(0, 0, 64, 48))
	r := rand.New(rand.NewPCG(5, 5))
	for i := range noise.Pix {
		noise.Pix[i] = byte(r.Uint32())
	}
	var b bytes.Buffer
	if err := stdjpeg.Encode(&b, noise, &stdjpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	m["noise q100"] = b.Bytes()
	return m
}

// TestReconstructMatchesDecode checks Reconstruct(DecodeCoefficients(x)) against Decode(x) byte
// for byte on every test image, at every scale, for the whole image and regions inside it, at
// its edges and beyond them, with the SIMD IDCT and without.
func TestReconstructMatchesDecode(t *testing.T) {
	var dec Decoder
	for name, data := range coefficientFiles(t) {
		cfg, err := dec.Decode(data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, h := cfg.Width, cfg.Height
		regions := []image.Rectangle{
			{}, image.Rect(17, 9, 30, 20), image.Rect(0, 0, 8, 8), image.Rect(-5, -7, 3, 2),
			image.Rect(w-5, h-3, w+9, h+9), image.Rect(w-1, 0, w, h), image.Rect(0, h-1, w, h),
			image.Rect(w+16, h+16, w+40, h+40), image.Rect(w/3, h/4, w*2/3, h*3/4),
		}
		t.Run(name, func(t *testing.T) {
			for _, simd := range []bool{true, false} {
				if simd && !avx2 {
					continue
				}
				run := func(f func()) { f() }
				if !simd {
					run = withoutSIMD
				}
				run(func() {
					for _, scale := range []int{1, 2, 4, 8} {
						for _, r := range regions {
							if err := checkCoefficients(&dec, data, Options{Scale: scale, Region: r}); err != nil {
								t.Errorf("SIMD %v: %v", simd, err)
							}
						}
					}
				})
			}
		})
	}
}

// TestReconstructPhotos is TestReconstructMatchesDecode on the first 20 photos of $STOKE_PHOTOS
// (skipped without it), whole and with a 224x224 region, at every scale.
func TestReconstructPhotos(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(os.Getenv("STOKE_PHOTOS"), "*", "*.jpg"))
	if os.Getenv("STOKE_PHOTOS") == "" || len(paths) == 0 {
		t.Skip("STOKE_PHOTOS is not set")
	}
	var dec Decoder
	for _, p := range paths[:min(20, len(paths))] {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, scale := range []int{1, 2, 4, 8} {
			for _, r := range []image.Rectangle{{}, image.Rect(100, 60, 324, 284)} {
				if err := checkCoefficients(&dec, data, Options{Scale: scale, Region: r}); err != nil {
					t.Errorf("%s: %v", p, err)
				}
			}
		}
	}
}

// TestDecodeCoefficientsBadInput checks that corrupt and truncated data fail as Decode fails
// (the same error class, no panic), or decode to the same image where Decode succeeds: every
// truncation of the test images, and each of their bytes changed.
func TestDecodeCoefficientsBadInput(t *testing.T) {
	var dec Decoder
	opts := []Options{{}, {Scale: 4, Region: image.Rect(8, 8, 24, 16)}}
	for name, data := range files(t) {
		bad := make([]byte, len(data))
		for n := range len(data) {
			for _, o := range opts {
				if err := checkCoefficients(&dec, data[:n], o); err != nil {
					t.Fatalf("%s cut to %d bytes: %v", name, n, err)
				}
			}
			copy(bad, data)
			bad[n] ^= 0x55
			for _, o := range opts {
				if err := checkCoefficients(&dec, bad, o); err != nil {
					t.Fatalf("%s with byte %d changed: %v", name, n, err)
				}
			}
		}
	}
	good := files(t)["q90-444"]
	for _, o := range []Options{{Scale: 3}, {Exact: true}, {MaxPixels: 100}} {
		if _, err := dec.DecodeCoefficients(good, o); !errors.As(err, new(UnsupportedError)) {
			t.Errorf("DecodeCoefficients(%+v) = %v; want UnsupportedError", o, err)
		}
	}
}

// TestDecodeCoefficientsWide checks the documented exception: a DC sum outside int16, which
// Decode takes, is an UnsupportedError. The files are gray rows of blocks that each add 2047 to
// the DC predictor: 16 such blocks reach 32752, within int16, and a 17th passes 2^15.
func TestDecodeCoefficientsWide(t *testing.T) {
	data := wideDC(17)
	var dec Decoder
	if _, err := dec.Decode(data, Options{}); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if _, err := dec.DecodeCoefficients(data, Options{}); !errors.Is(err, errWide) {
		t.Errorf("DecodeCoefficients = %v; want %v", err, errWide)
	}
	if err := checkCoefficients(&dec, wideDC(16), Options{}); err != nil {
		t.Errorf("16 blocks: %v", err)
	}
	// Truncated, the file is corrupt first: Decode's error, not errWide.
	for n := range len(data) - 2 {
		if err := checkCoefficients(&dec, data[:n], Options{}); err != nil {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
		if _, err := dec.DecodeCoefficients(data[:n], Options{}); errors.Is(err, errWide) {
			t.Fatalf("cut to %d bytes: %v; want Decode's error", n, err)
		}
	}
}

// wideDC makes a baseline gray JPEG n blocks wide and one high in which every block's DC
// difference is +2047 and its AC terms are zero: a DC table with one code, "0" for category 11,
// and an AC table with one code, "0" for end of block.
func wideDC(n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xd8})
	b.Write([]byte{0xff, 0xdb, 0, 67, 0}) // DQT: table 0, all ones
	b.Write(bytes.Repeat([]byte{1}, blockSize))
	b.Write([]byte{0xff, 0xc0, 0, 11, 8, 0, 8, byte(8 * n >> 8), byte(8 * n), 1, 1, 0x11, 0})
	dht := func(class byte, sym byte) {
		b.Write([]byte{0xff, 0xc4, 0, 20, class<<4 | 0, 1})
		b.Write(make([]byte, 15))
		b.WriteByte(sym)
	}
	dht(0, 11)
	dht(1, 0x00)
	b.Write([]byte{0xff, 0xda, 0, 8, 1, 1, 0x00, 0, 63, 0})
	// Each block: DC code "0", 11 one bits (+2047), AC code "0" (end of block): 13 bits.
	var acc uint64
	var nb uint
	for range n {
		acc = acc<<13 | 0b0_11111111111_0
		nb += 13
		for nb >= 8 {
			c := byte(acc >> (nb - 8))
			b.WriteByte(c)
			if c == 0xff {
				b.WriteByte(0)
			}
			nb -= 8
		}
	}
	if nb > 0 {
		c := byte(acc<<(8-nb)) | byte(1<<(8-nb)-1)
		b.WriteByte(c)
		if c == 0xff {
			b.WriteByte(0)
		}
	}
	b.Write([]byte{0xff, 0xd9})
	return b.Bytes()
}

// TestDCOnlyIsFlat backs Reconstruct's flat fill at Scale 2 and 4: a sequential block whose AC
// terms all lie outside the kept window has no AC pair, and Reconstruct fills it flat where
// Decode runs idctReduced on its DC term alone. The two agree for every dequantized DC term
// Coefficients can hold (an int16 times a uint16): densely where the samples do not clip, and at
// the extremes. At Scale 1 it checks the bound the Coefficients doc gives for the full-size IDCT.
func TestDCOnlyIsFlat(t *testing.T) {
	for v := int32(-16379); v <= 16379; v++ {
		b := block{v}
		var got, want [8 * 8]byte
		idctStore(got[:], 8, 8, &b, 0, false)
		withoutSIMD(func() { idctStore(want[:], 8, 8, &b, blockSize-1, false) })
		if got != want {
			t.Fatalf("DC %d, 8x8: the IDCT gives %d, the flat fill %d", v, want[0], got[0])
		}
	}
	check := func(v int32) {
		for _, n := range []int{2, 4} {
			b := block{v}
			var got, want [8 * 8]byte
			idctReduced(got[:], 8, &b, n)
			idctStore(want[:], 8, n, &b, 0, false)
			if got != want {
				t.Fatalf("DC %d, %dx%d: idctReduced gives %d, the flat fill %d", v, n, n, got[0], want[0])
			}
		}
	}
	for v := int32(-1 << 16); v <= 1<<16; v++ {
		check(v)
	}
	for _, v := range []int32{math.MinInt16 * math.MaxUint16, math.MaxInt16 * math.MaxUint16, -1 << 24, 1 << 24} {
		check(v)
	}
}

// TestWarmDecodeCoefficientsAllocatesNothing: a warm Decoder's DecodeCoefficients and
// Reconstruct allocate nothing, as its Decode.
func TestWarmDecodeCoefficientsAllocatesNothing(t *testing.T) {
	data := encode(t, photo(200, 150, false))
	prog := files(t)["progressive"]
	var dec Decoder
	for _, o := range []Options{{}, {Region: image.Rect(30, 30, 100, 90)}, {Scale: 2}} {
		for _, d := range [][]byte{data, prog} {
			co, err := dec.DecodeCoefficients(d, o)
			if err != nil {
				t.Fatal(err)
			}
			co.Reconstruct()
			n := testing.AllocsPerRun(20, func() {
				co, err := dec.DecodeCoefficients(d, o)
				if err != nil {
					t.Fatal(err)
				}
				co.Reconstruct()
			})
			if n != 0 {
				t.Errorf("%+v, %d bytes: DecodeCoefficients and Reconstruct allocs = %v; want 0", o, len(d), n)
			}
		}
	}
}

// TestCoefficientBytes checks that the coefficients of a 224x224 region at Scale 1 take fewer
// bytes than its pixels (224x224x3 = 150,528), for Go's encoding of the test picture at quality
// 85, and for each photo of $STOKE_PHOTOS where it is set. At Scale 2, 4 and 8 the region is
// 224*Scale pixels on a side (cut to the image), so that the output is 224x224 where the image
// is large enough; -v prints the sizes against the output's RGB bytes.
func TestCoefficientBytes(t *testing.T) {
	const pixels = 224 * 224 * 3
	type img struct {
		name string
		data []byte
	}
	imgs := []img{{"photo(500, 375) q85", encode(t, photo(500, 375, false))}}
	paths, _ := filepath.Glob(filepath.Join(os.Getenv("STOKE_PHOTOS"), "*", "*.jpg"))
	for _, p := range paths {
		if os.Getenv("STOKE_PHOTOS") == "" {
			break
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img{filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p), data})
	}
	var dec Decoder
	for _, scale := range []int{1, 2, 4, 8} {
		total, worst, out, n := 0, 0, 0, 0
		for i, im := range imgs {
			m, err := dec.Decode(im.data, Options{})
			if err != nil {
				t.Fatal(err)
			}
			side := 224 * scale
			x0, y0 := max(m.Width-side, 0)/2, max(m.Height-side, 0)/2
			r := image.Rect(x0, y0, x0+side, y0+side).Intersect(image.Rect(0, 0, m.Width, m.Height))
			co, err := dec.DecodeCoefficients(im.data, Options{Scale: scale, Region: r})
			if err != nil {
				t.Fatal(err)
			}
			b, rgb := co.Bytes(), (r.Dx()+scale-1)/scale*((r.Dy()+scale-1)/scale)*3
			if scale == 1 && b >= pixels {
				t.Errorf("%s: the coefficients of a 224x224 region take %d bytes; its pixels %d", im.name, b, pixels)
			}
			if i == 0 { // the photos only in the summary below
				t.Logf("scale %d, %s, region %dx%d: %d bytes (%d blocks, %d pairs), %.0f%% of the output's %d RGB bytes",
					scale, im.name, r.Dx(), r.Dy(), b, len(co.Start), len(co.Index), 100*float64(b)/float64(rgb), rgb)
			}
			total, worst, out, n = total+b, max(worst, b), out+rgb, n+1
		}
		t.Logf("scale %d: %d images, mean %d bytes, largest %d: %.0f%% of the outputs' RGB bytes", scale, n, total/n,
			worst, 100*float64(total)/float64(out))
	}
}

// FuzzDecodeCoefficients checks checkCoefficients on any input.
func FuzzDecodeCoefficients(f *testing.F) {
	for _, b := range files(f) {
		f.Add(b)
	}
	f.Add(wideDC(17))
	var dec Decoder
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		for _, o := range []Options{{MaxPixels: 1 << 20}, {Scale: 2, Region: image.Rect(8, 8, 24, 16), MaxPixels: 1 << 20}} {
			if err := checkCoefficients(&dec, data, o); err != nil {
				t.Error(err)
			}
		}
	})
}
