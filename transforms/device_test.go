package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/rng"
)

type namedJPEG struct {
	name string
	data []byte
}

// deviceCorpus is the JPEGs the device path is checked on: Go's image/testdata JPEGs (4:2:0,
// 4:2:2, 4:4:0, 4:4:4, 4:1:1, 4:1:0, progressive, restart intervals, RGB, CMYK, gray, a
// truncated one), the jpeg fork's testdata, two photo-like ones made here (500x375 RGB and its
// gray), the first with each EXIF orientation, and 8 photos of $STOKE_PHOTOS when it is set.
func deviceCorpus(t testing.TB) []namedJPEG {
	t.Helper()
	var files []string
	for _, pattern := range []string{
		filepath.Join(goroot(t), "src", "image", "testdata", "*.jpeg"),
		filepath.Join("internal", "jpeg", "testdata", "*.jpg"),
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	if dir := os.Getenv("STOKE_PHOTOS"); dir != "" {
		m, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
		for i := range min(8, len(m)) {
			files = append(files, m[i*len(m)/8])
		}
	}
	var c []namedJPEG
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c = append(c, namedJPEG{filepath.Base(f), b})
	}
	photo := synthetic(t)
	gray := toImage(hwc(375, 500, 1, func(y, x, _ int) byte { return byte((x + 2*y + (x*y)%37) / 3) }))
	c = append(c, namedJPEG{"synthetic", photo}, namedJPEG{"synthetic-gray", encodeJPEG(t, gray, 85)})
	for o := 2; o <= 8; o++ {
		c = append(c, namedJPEG{fmt.Sprintf("synthetic-exif%d", o), withOrientation(photo, o, binary.LittleEndian)})
	}
	return c
}

// deviceChains are the Chains the device path is checked with, and how many seeds each gets:
// the training crop at 224 and at sizes that take every reduced scale, the evaluation
// geometry, the other filters, padded crops with flips and quarter turns (a transposed output).
var deviceChains = []struct {
	p     *Chain
	seeds int
}{
	{Compose(RandomResizedCrop(224), HorizontalFlip(0.5)), 12},
	{Compose(RandomResizedCrop(24), HorizontalFlip(0.5)), 12},
	{Compose(Resize(256), CenterCrop(224)), 1},
	{Compose(Resize(40), CenterCrop(32)), 1},
	{Compose(Resize(8), CenterCrop(8)), 1},
	{Compose(ResizeFilter(60, Bicubic), CenterCrop(48)), 1},
	{Compose(ResizeFilter(30, Lanczos), CenterCrop(30)), 1},
	{Compose(RandomCrop(96, 8), VerticalFlip(0.5), RandomRotate90(), HorizontalFlip(0.5)), 6},
	{Compose(CenterCrop(600), Resize(50)), 1},
	{Compose(ResizeTo(20, 90)), 1},
	{Compose(ResizeTo(20, 1)), 1},
	{Compose(ResizeTo(1, 20), Rotate90(1)), 1},
	{Compose(Normalize(ImageNetMean, ImageNetStd), RandomResizedCrop(64)), 2},
}

// checkDevice runs one sample both ways: Apply, and Render of ApplyCoefficients' record, with the
// same seed. It reports a difference: in the bytes, or in the outcome (an error of Apply must
// be ApplyCoefficients', ErrHostPath only where Apply succeeds). It returns the record
// (nil on the host path).
func checkDevice(t *testing.T, name string, w *Worker, data []byte, s Shape, r *rng.Sample, seed int) []byte {
	t.Helper()
	name = fmt.Sprintf("%s, seed %d", name, seed)
	want, got, rec := make([]byte, s.Len()), make([]byte, s.Len()), make([]byte, 1<<20)
	r.Reset(7, 0, seed)
	werr := w.Apply(want, Input{Encoded: data}, r.Rand)
	r.Reset(7, 0, seed)
	n, err := w.ApplyCoefficients(rec, s, Input{Encoded: data}, r.Rand)
	switch {
	case errors.Is(err, ErrHostPath):
		if werr != nil {
			t.Errorf("%s: ApplyCoefficients = %v; Apply fails with %v", name, err, werr)
		}
		return nil
	case werr != nil || err != nil:
		if werr == nil || err == nil || errors.Is(werr, ErrCorrupt) != errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: ApplyCoefficients = %v; Apply = %v", name, err, werr)
		}
		return nil
	}
	if err := w.Render(got, rec[:n]); err != nil {
		t.Fatalf("%s: Render: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		d := 0
		for d < len(got) && got[d] == want[d] {
			d++
		}
		t.Errorf("%s: Render differs from Apply at byte %d of %d (%d, Apply %d)", name, d, len(got), got[d], want[d])
	}
	return rec[:n]
}

// TestRenderMatchesApply is the device path's promise: for every image of the corpus and every
// Chain of deviceChains, 1 and 3 output channels, Render of ApplyCoefficients' record is Apply's
// output byte for byte, and only the CMYK file takes the host path. Between them the records
// take every scale, progressive and sequential, gray, YCbCr and RGB images, padded, flipped and
// transposed outputs. (Go's truncated progressive file decodes, both ways.)
func TestRenderMatchesApply(t *testing.T) {
	corpus := deviceCorpus(t)
	seen := map[string]bool{}
	r := rng.NewSample()
	for _, dc := range deviceChains {
		w := dc.p.NewWorker()
		for _, im := range corpus {
			info, err := DecodeInfo(im.data)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{3, 1} {
				if c == 1 && dc.p.mean != nil {
					continue // Normalize's three means need three channels
				}
				s, err := dc.p.OutShape(Shape{C: c, H: info.Height, W: info.Width})
				if err != nil {
					t.Fatal(err)
				}
				for seed := range dc.seeds {
					name := fmt.Sprintf("%v, %s, C %d", dc.p, im.name, c)
					rec := checkDevice(t, name, w, im.data, s, r, seed)
					host := strings.Contains(im.name, "cmyk")
					if (rec == nil) != host {
						t.Errorf("%s, seed %d: a record: %v; want %v", name, seed, rec != nil, !host)
					}
					if rec == nil {
						continue
					}
					seen[fmt.Sprintf("scale %d", rec[22])] = true
					seen[fmt.Sprintf("components %d, flags %d", rec[21], rec[23])] = true
					switch du := int32(binary.LittleEndian.Uint32(rec[40:])); {
					case du == -1:
						seen["flipped"] = true
					case du != 1:
						seen["transposed"] = true
					}
					if m, _, err := w.readRecord(rec, s.Len(), false); err == nil && m.padded {
						seen["padded"] = true
					}
				}
			}
		}
	}
	for _, k := range []string{"scale 1", "scale 2", "scale 4", "scale 8", "components 1, flags 0", "components 1, flags 2",
		"components 3, flags 0", "components 3, flags 1", "components 3, flags 2", "transposed", "flipped", "padded"} {
		if !seen[k] {
			t.Errorf("no record had %s", k)
		}
	}
}

// TestDeviceBadJPEG: truncated and corrupted JPEGs fail as Apply fails (ErrCorrupt, not
// ErrHostPath), or give Apply's bytes where Apply decodes them: every 7th truncation of two
// files, and every 5th byte of them changed.
func TestDeviceBadJPEG(t *testing.T) {
	p := Compose(RandomResizedCrop(32), HorizontalFlip(0.5))
	w, r := p.NewWorker(), rng.NewSample()
	s := Shape{C: 3, H: 32, W: 32}
	for _, data := range [][]byte{encodeJPEG(t, quadrants(), 80), wideDC(4)} {
		for n := 0; n < len(data); n += 7 {
			checkDevice(t, fmt.Sprintf("cut to %d bytes", n), w, data[:n], s, r, n)
		}
		for i := 2; i < len(data); i += 5 {
			bad := bytes.Clone(data)
			bad[i] ^= 0x5a
			checkDevice(t, fmt.Sprintf("byte %d changed", i), w, bad, s, r, i)
		}
	}
}

// TestApplyCoefficientsHostPath: each cause of the host path is ErrHostPath naming it, and
// Apply transforms each of those samples.
func TestApplyCoefficientsHostPath(t *testing.T) {
	photo := synthetic(t)
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, quadrants()); err != nil {
		t.Fatal(err)
	}
	cmyk, err := os.ReadFile(filepath.Join(goroot(t), "src", "image", "testdata", "video-001.cmyk.jpeg"))
	if err != nil {
		t.Fatal(err)
	}
	crop := Compose(RandomResizedCrop(24))
	tests := []struct {
		name  string
		p     *Chain
		in    Input
		dst   int
		cause string
	}{
		{"png", crop, Input{Encoded: pngData.Bytes()}, 1 << 20, "a png image"},
		{"raw", crop, hwc(30, 40, 3, func(y, x, c int) byte { return byte(x + y + c) }), 1 << 20, "raw pixels"},
		{"cmyk", crop, Input{Encoded: cmyk}, 1 << 20, "4-component"},
		{"wide", Compose(ResizeTo(24, 24)), Input{Encoded: wideDC(17)}, 1 << 20, "coefficient outside 16 bits"},
		{"exact", crop.WithDecode(ExactDecode), Input{Encoded: photo}, 1 << 20, "exact decode"},
		{"jitter", crop.Append(ColorJitter(0.4, 0.4, 0.4)), Input{Encoded: photo}, 1 << 20, "ColorJitter"},
		{"trivialaugment", crop.Append(TrivialAugmentWide()), Input{Encoded: photo}, 1 << 20, "TrivialAugmentWide"},
		{"pixels", crop.Append(fnTransform(func(p *Plan) { p.Pixels(func(Image) {}) })), Input{Encoded: photo}, 1 << 20, "works on the output pixels"},
		{"reach", Compose(CenterCrop(31), ResizeTo(1, 1), CenterCrop(3), ResizeTo(1, 1), ResizeTo(24, 24)),
			Input{Encoded: encodeJPEG(t, toImage(hwc(16, 16, 3, func(y, x, c int) byte { return byte(16*y + x + c) })), 90)}, 1 << 20,
			"beyond its edges"},
		{"small dst", crop, Input{Encoded: photo}, 200, "dst of 200"},
	}
	r := rng.NewSample()
	for _, tc := range tests {
		s := Shape{C: 3, H: 24, W: 24}
		w := tc.p.NewWorker()
		r.Reset(1, 0, 0)
		_, err := w.ApplyCoefficients(make([]byte, tc.dst), s, tc.in, r.Rand)
		if !errors.Is(err, ErrHostPath) || !strings.Contains(err.Error(), tc.cause) {
			t.Errorf("%s: ApplyCoefficients = %v; want ErrHostPath naming %q", tc.name, err, tc.cause)
		}
		r.Reset(1, 0, 0)
		if err := w.Apply(make([]byte, s.Len()), tc.in, r.Rand); err != nil {
			t.Errorf("%s: Apply = %v", tc.name, err)
		}
	}
	// A record that fits exactly is written; one byte less is the host path.
	w := crop.NewWorker()
	r.Reset(1, 0, 0)
	n, err := w.ApplyCoefficients(make([]byte, 1<<20), Shape{3, 24, 24}, Input{Encoded: photo}, r.Rand)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{n, n - 1} {
		r.Reset(1, 0, 0)
		_, err := w.ApplyCoefficients(make([]byte, size), Shape{3, 24, 24}, Input{Encoded: photo}, r.Rand)
		if (err == nil) != (size == n) || (err != nil && !errors.Is(err, ErrHostPath)) {
			t.Errorf("dst of %d bytes for a record of %d: %v", size, n, err)
		}
	}
	// Other errors are Apply's.
	for _, tc := range []struct {
		name string
		in   Input
		s    Shape
		want error
	}{
		{"both inputs", Input{Encoded: photo, Pixels: []byte{1}}, Shape{3, 24, 24}, ErrShape},
		{"garbage", Input{Encoded: []byte("not an image")}, Shape{3, 24, 24}, ErrCorrupt},
		{"truncated", Input{Encoded: photo[:len(photo)/2]}, Shape{3, 24, 24}, ErrCorrupt},
		{"shape", Input{Encoded: photo}, Shape{3, 12, 48}, ErrShape},
		{"channels", Input{Encoded: photo}, Shape{2, 24, 24}, ErrShape},
	} {
		r.Reset(1, 0, 0)
		if _, err := w.ApplyCoefficients(make([]byte, 1<<20), tc.s, tc.in, r.Rand); !errors.Is(err, tc.want) || errors.Is(err, ErrHostPath) {
			t.Errorf("%s: ApplyCoefficients = %v; want %v", tc.name, err, tc.want)
		}
	}
	big := Compose(RandomResizedCrop(24)).WithMaxPixels(100)
	if _, err := big.NewWorker().ApplyCoefficients(make([]byte, 1<<20), Shape{3, 24, 24}, Input{Encoded: photo}, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the pixel limit: ApplyCoefficients = %v; want ErrTooLarge", err)
	}
}

// goroot is the Go installation whose image/testdata holds the JPEGs of Go's own tests.
func goroot(t testing.TB) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// fnTransform is a Transform of a test's own.
type fnTransform func(p *Plan)

func (f fnTransform) Plan(p *Plan, _ *rand.Rand) error { f(p); return nil }
func (f fnTransform) String() string                   { return "fnTransform" }

// wideDC is a baseline gray JPEG n blocks wide and one high whose every block adds 2047 to the
// DC predictor (DC table: one code, "0" for category 11; AC table: one code, "0" for end of
// block; quantization all ones): past 16 blocks a DC term leaves int16, which the decoder takes
// and its coefficients do not.
func wideDC(n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xff, 0xd8, 0xff, 0xdb, 0, 67, 0})
	b.Write(bytes.Repeat([]byte{1}, 64))
	b.Write([]byte{0xff, 0xc0, 0, 11, 8, 0, 8, byte(8 * n >> 8), byte(8 * n), 1, 1, 0x11, 0})
	for _, t := range [][2]byte{{0, 11}, {1, 0}} {
		b.Write([]byte{0xff, 0xc4, 0, 20, t[0] << 4, 1})
		b.Write(make([]byte, 15))
		b.WriteByte(t[1])
	}
	b.Write([]byte{0xff, 0xda, 0, 8, 1, 1, 0x00, 0, 63, 0})
	var acc uint64
	var nb uint
	emit := func(c byte) {
		b.WriteByte(c)
		if c == 0xff {
			b.WriteByte(0)
		}
	}
	for range n {
		acc, nb = acc<<13|0b0_11111111111_0, nb+13
		for ; nb >= 8; nb -= 8 {
			emit(byte(acc >> (nb - 8)))
		}
	}
	if nb > 0 {
		emit(byte(acc<<(8-nb)) | byte(1<<(8-nb)-1))
	}
	b.Write([]byte{0xff, 0xd9})
	return b.Bytes()
}

// smallRecord is the record of a 13x13 crop of a small JPEG, with its shape.
func smallRecord(t testing.TB, data []byte, seed int) ([]byte, Shape) {
	p := Compose(RandomResizedCrop(13), HorizontalFlip(0.5))
	r := rng.NewSample()
	r.Reset(3, 0, seed)
	rec := make([]byte, 1<<16)
	s := Shape{3, 13, 13}
	n, err := p.NewWorker().ApplyCoefficients(rec, s, Input{Encoded: data}, r.Rand)
	if err != nil {
		t.Fatal(err)
	}
	return rec[:n], s
}

// TestRenderBadRecords: a record that does not hold together is ErrCorrupt (a dst of another
// size ErrShape), never a panic: every truncation of a record, every byte of its header and
// grids changed in two ways, and fields set to values just outside what they may hold.
func TestRenderBadRecords(t *testing.T) {
	rec, s := smallRecord(t, encodeJPEG(t, quadrants(), 80), 1)
	w := Compose().NewWorker()
	dst := make([]byte, s.Len())
	if err := w.Render(dst, rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Render(dst, append(bytes.Clone(rec), 1, 2, 3)); err != nil {
		t.Errorf("a record followed by other bytes: %v", err)
	}
	if err := w.Render(dst[1:], rec); !errors.Is(err, ErrShape) {
		t.Errorf("dst one byte short: %v; want ErrShape", err)
	}
	for n := range len(rec) {
		if err := w.Render(dst, rec[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut to %d bytes: %v; want ErrCorrupt", n, err)
		}
	}
	fixed := recordHeader + int(rec[21])*recordGrid
	for i := range min(fixed+64, len(rec)) {
		for _, x := range []byte{0xff, 0x01} {
			bad := bytes.Clone(rec)
			bad[i] ^= x
			if err := w.Render(dst, bad); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShape) {
				t.Errorf("byte %d ^ %#x: %v; want ErrCorrupt or ErrShape", i, x, err)
			}
		}
	}
	le := binary.LittleEndian
	nb := int(le.Uint32(rec[12:]))
	arrays := fixed
	for _, tc := range []struct {
		name string
		set  func(b []byte)
	}{
		{"magic", func(b []byte) { b[0] = 'X' }},
		{"version", func(b []byte) { le.PutUint32(b[4:], 2) }},
		{"size", func(b []byte) { le.PutUint32(b[8:], le.Uint32(b[8:])+4) }},
		{"blocks", func(b []byte) { le.PutUint32(b[12:], le.Uint32(b[12:])-1) }},
		{"channels", func(b []byte) { b[20] = 2 }},
		{"components", func(b []byte) { b[21] = 2 }},
		{"scale", func(b []byte) { b[22] = 3 }},
		{"flags", func(b []byte) { b[23] |= 4 }},
		{"filter", func(b []byte) { b[24] = 3 }},
		{"base", func(b []byte) { le.PutUint32(b[36:], le.Uint32(b[36:])+1) }},
		{"du", func(b []byte) { le.PutUint32(b[40:], 0) }},
		{"off NaN", func(b []byte) { le.PutUint64(b[48:], math.Float64bits(math.NaN())) }},
		{"off far", func(b []byte) { le.PutUint64(b[48:], math.Float64bits(-1e6)) }},
		{"scale 0", func(b []byte) { le.PutUint64(b[56:], 0) }},
		{"scale Inf", func(b []byte) { le.PutUint64(b[88:], math.Float64bits(math.Inf(1))) }},
		{"hi", func(b []byte) { le.PutUint32(b[72:], 14) }},
		{"lo", func(b []byte) { le.PutUint32(b[68:], 0xffffffff) }},
		{"first", func(b []byte) { le.PutUint32(b[recordHeader+recordGrid+128:], 0) }},
		{"across", func(b []byte) { le.PutUint32(b[recordHeader+128+12:], 1<<30) }},
		{"stride", func(b []byte) { le.PutUint32(b[recordHeader+128+13*4:], 1) }},
		{"plane W", func(b []byte) { le.PutUint32(b[recordHeader+128+9*4:], le.Uint32(b[recordHeader+128+9*4:])+1) }},
		{"subsampling", func(b []byte) { le.PutUint32(b[recordHeader+128+11*4:], 0) }},
		{"start", func(b []byte) { le.PutUint32(b[arrays:], 1<<31); b[arrays+4*nb] = 1 }},
		{"count", func(b []byte) { b[arrays+4*nb] = 65 }},
		{"index", func(b []byte) { b[arrays+4*nb+align4(nb)] = 64 }},
	} {
		bad := bytes.Clone(rec)
		tc.set(bad)
		if err := w.Render(dst, bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Render = %v; want ErrCorrupt", tc.name, err)
		}
	}
}

// TestRecordScratch: RecordScratch is the planes that Render reconstructs and the horizontal
// passes' rows at the planes' full height (at least what Render's own passes hold), for records
// of every scale and of 1 and 3 channels; it refuses a record cut short, as Render does, and
// leaves the pairs to Render.
func TestRecordScratch(t *testing.T) {
	w, r := Compose().NewWorker(), rng.NewSample()
	data := synthetic(t)
	rec := make([]byte, 1<<20)
	for _, p := range []*Chain{Compose(RandomResizedCrop(224)), Compose(Resize(80), CenterCrop(64)), Compose(Resize(160)), Compose(Resize(24))} {
		for _, c := range []int{1, 3} {
			s, err := p.OutShape(Shape{C: c, H: 375, W: 500})
			if err != nil {
				t.Fatal(err)
			}
			r.Reset(1, 0, 0)
			n, err := p.NewWorker().ApplyCoefficients(rec, s, Input{Encoded: data}, r.Rand)
			if err != nil {
				t.Fatal(err)
			}
			need, err := w.RecordScratch(rec[:n])
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Render(make([]byte, s.Len()), rec[:n]); err != nil {
				t.Fatal(err)
			}
			planes, passes := 0, 0
			im := w.rc.Reconstruct()
			for i := range im.Comps {
				planes += len(im.Planes[i].Pix)
			}
			for i := range 3 {
				if i == 0 || (c == 3 && im.Comps == 3) {
					passes += im.Planes[i].H * s.W
				}
			}
			if need != planes+passes || len(w.rs[0].tmp) > im.Planes[0].H*s.W {
				t.Errorf("%v, %d channels, scale %d: RecordScratch = %d; want planes %d + passes %d (Render's first pass: %d)",
					p, c, im.Scale, need, planes, passes, len(w.rs[0].tmp))
			}
			if _, err := w.RecordScratch(rec[:n-1]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: a record cut short: RecordScratch = %v; want ErrCorrupt", p, err)
			}
			bad := bytes.Clone(rec[:n])
			nb := int(binary.LittleEndian.Uint32(bad[12:]))
			bad[recordHeader+im.Comps*recordGrid+5*nb+(-nb&3)] = 64 // pair 0's index
			if _, err := w.RecordScratch(bad); err != nil {
				t.Errorf("%v: a bad pair: RecordScratch = %v; want nil (Render checks it)", p, err)
			}
			if err := w.Render(make([]byte, s.Len()), bad); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: a bad pair: Render = %v; want ErrCorrupt", p, err)
			}
		}
	}
}

// FuzzRender feeds arbitrary records to Render: it must return nil or an error wrapping
// ErrCorrupt or ErrShape, never panic, and give the same pixels with the SIMD kernels as
// without. dst has the size the record's header says (up to 3x64x64 pixels).
func FuzzRender(f *testing.F) {
	for i, data := range [][]byte{encodeJPEG(f, quadrants(), 80), encodeJPEG(f, toImage(hwc(9, 7, 1, func(y, x, c int) byte { return byte(x * y) })), 80)} {
		rec, _ := smallRecord(f, data, i)
		f.Add(rec)
	}
	w, plain := Compose().NewWorker(), Compose().NewWorker()
	f.Fuzz(func(t *testing.T, rec []byte) {
		n := 3 * 13 * 13
		if len(rec) >= recordHeader {
			if m := int(rec[20]) * int(binary.LittleEndian.Uint16(rec[28:])) * int(binary.LittleEndian.Uint16(rec[30:])); m > 0 && m <= 3*64*64 {
				n = m
			}
		}
		dst, want := make([]byte, n), make([]byte, n)
		err := w.Render(dst, rec)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrShape) {
			t.Fatalf("Render = %v; want nil, ErrCorrupt or ErrShape", err)
		}
		if err != nil || !avx2 {
			return
		}
		withoutSIMD(t, func() { err = plain.Render(want, rec) })
		if err != nil || !bytes.Equal(dst, want) {
			t.Errorf("Render with SIMD = %v, without = %v (error %v)", dst, want, err)
		}
	})
}

// TestDeviceAllocatesNothing: a warm Worker's ApplyCoefficients and Render allocate nothing.
func TestDeviceAllocatesNothing(t *testing.T) {
	data := synthetic(t)
	p := Compose(RandomResizedCrop(224), HorizontalFlip(0.5))
	w, r := p.NewWorker(), rng.NewSample()
	s := Shape{3, 224, 224}
	rec, pix := make([]byte, 1<<20), make([]byte, s.Len())
	n, i := 0, 0
	apply := func() {
		r.Reset(1, 0, i)
		i++
		var err error
		if n, err = w.ApplyCoefficients(rec, s, Input{Encoded: data}, r.Rand); err != nil {
			t.Fatal(err)
		}
	}
	render := func() {
		if err := w.Render(pix, rec[:n]); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // warm the scratch up to the largest crop
		apply()
		render()
	}
	if a := testing.AllocsPerRun(50, apply); a != 0 {
		t.Errorf("ApplyCoefficients allocs = %v; want 0", a)
	}
	if a := testing.AllocsPerRun(50, func() { apply(); render() }); a != 0 {
		t.Errorf("Render allocs = %v; want 0", a)
	}
}
