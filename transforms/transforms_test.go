package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/disintegration/imaging"
	"golang.org/x/image/bmp"

	"github.com/stoke-ml/stoke/internal/rng"
)

func TestApplyKnownPixels(t *testing.T) {
	// A 4x6 RGB image: value = 10*y + x (+100 per channel).
	in := hwc(4, 6, 3, func(y, x, c int) byte { return byte(10*y + x + 100*c) })
	id := chw(in)
	at := func(c, y, x int) byte { return byte(10*y + x + 100*c) }
	tests := []struct {
		name  string
		p     *Chain
		shape Shape
		want  func(c, y, x int) byte
	}{
		{"nil", nil, Shape{3, 4, 6}, at},
		{"empty", Compose(), Shape{3, 4, 6}, at},
		{"normalize only", Compose(Normalize(ImageNetMean, ImageNetStd)), Shape{3, 4, 6}, at},
		{"center crop", Compose(CenterCrop(2)), Shape{3, 2, 2}, func(c, y, x int) byte { return at(c, y+1, x+2) }},
		{"flip", Compose(HorizontalFlip(1)), Shape{3, 4, 6}, func(c, y, x int) byte { return at(c, y, 5-x) }},
		{"no flip", Compose(HorizontalFlip(0)), Shape{3, 4, 6}, at},
		{"flip then crop", Compose(HorizontalFlip(1), CenterCrop(2)), Shape{3, 2, 2}, func(c, y, x int) byte { return at(c, y+1, 3-x) }},
		{"crop then flip", Compose(CenterCrop(2), HorizontalFlip(1)), Shape{3, 2, 2}, func(c, y, x int) byte { return at(c, y+1, 3-x) }},
		{"pad", Compose(CenterCrop(6)), Shape{3, 6, 6}, func(c, y, x int) byte {
			if y == 0 || y == 5 {
				return 0
			}
			return at(c, y-1, x)
		}},
		{"resize identity", Compose(ResizeTo(4, 6)), Shape{3, 4, 6}, at},
		{"bicubic identity", Compose(ResizeFilter(4, Bicubic)), Shape{3, 4, 6}, at},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.p.OutShape(Shape{3, 4, 6})
			if err != nil || s != tc.shape {
				t.Fatalf("OutShape = %v, %v; want %v", s, err, tc.shape)
			}
			dst := make([]byte, s.Len())
			r := rng.NewSample()
			if err := tc.p.NewWorker().Apply(dst, in, r.Rand); err != nil {
				t.Fatal(err)
			}
			for c := range s.C {
				for y := range s.H {
					for x := range s.W {
						if got, want := dst[(c*s.H+y)*s.W+x], tc.want(c, y, x); got != want {
							t.Fatalf("Apply(%v)[c%d y%d x%d] = %d; want %d", tc.p, c, y, x, got, want)
						}
					}
				}
			}
		})
	}
	// The identity output is the CHW rearrangement of the input.
	dst := make([]byte, len(id))
	if err := Compose().NewWorker().Apply(dst, in, nil); err != nil || !bytes.Equal(dst, id) {
		t.Errorf("Compose().Apply = %v, %v; want %v", dst, err, id)
	}
}

func TestResizeBilinearKnownValues(t *testing.T) {
	// PIL's antialiased bilinear, worked by hand: out[0] = (0.75*0+0.75*100+0.25*200)/1.75 = 71.4,
	// out[1] = (0.25*100+0.75*200+0.75*255)/1.75 = 209.3; upsampling 2 -> 4 interpolates.
	tests := []struct {
		row  []byte
		n    int
		want []byte
	}{
		{[]byte{0, 100, 200, 255}, 2, []byte{71, 209}},
		{[]byte{0, 100}, 4, []byte{0, 25, 75, 100}},
		{[]byte{7, 7, 7, 7, 7}, 3, []byte{7, 7, 7}},
	}
	for _, tc := range tests {
		in := Input{Pixels: tc.row, H: 1, W: len(tc.row), C: 1}
		dst := make([]byte, tc.n)
		if err := Compose(ResizeTo(1, tc.n)).NewWorker().Apply(dst, in, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, tc.want) {
			t.Errorf("ResizeTo(1,%d)(%v) = %v; want %v", tc.n, tc.row, dst, tc.want)
		}
	}
}

func TestResizeMatchesImaging(t *testing.T) {
	// imaging's Linear, CatmullRom (cubic, a = -0.5) and Lanczos (3 lobes) filters are the same
	// antialiased kernels as PIL's: outputs agree to rounding (imaging rounds once, we round
	// after each pass as PIL does).
	in := hwc(37, 53, 3, func(y, x, c int) byte { return byte((x*x + 3*y*y + 40*c + x*y) % 256) })
	ref := toImage(in)
	filters := []struct {
		f   Filter
		ref imaging.ResampleFilter
	}{{Bilinear, imaging.Linear}, {Bicubic, imaging.CatmullRom}, {Lanczos, imaging.Lanczos}}
	for _, fl := range filters {
		for _, short := range []int{17, 10, 60} {
			t.Run(fmt.Sprint(fl.f, short), func(t *testing.T) {
				p := Compose(ResizeFilter(short, fl.f))
				s, err := p.OutShape(Shape{3, 37, 53})
				if err != nil {
					t.Fatal(err)
				}
				sz := [2]int{s.H, s.W}
				want := imaging.Resize(ref, sz[1], sz[0], fl.ref)
				dst := make([]byte, s.Len())
				if err := p.NewWorker().Apply(dst, in, nil); err != nil {
					t.Fatal(err)
				}
				n := sz[0] * sz[1]
				for y := range sz[0] {
					for x := range sz[1] {
						w := want.NRGBAAt(x, y)
						for c, wc := range []byte{w.R, w.G, w.B} {
							if got := dst[c*n+y*sz[1]+x]; absDiff(got, wc) > 2 {
								t.Fatalf("Resize %v [c%d y%d x%d] = %d; imaging says %d", fl.f, c, y, x, got, wc)
							}
						}
					}
				}
			})
		}
	}
}

func TestResizeShorterSide(t *testing.T) {
	tests := []struct {
		in   Shape
		size int
		want Shape
	}{
		{Shape{3, 375, 500}, 256, Shape{3, 256, 341}},
		{Shape{3, 500, 375}, 256, Shape{3, 341, 256}},
		{Shape{1, 28, 28}, 32, Shape{1, 32, 32}},
		{Shape{4, 10, 20}, 5, Shape{3, 5, 10}},
	}
	for _, tc := range tests {
		if got, err := Compose(Resize(tc.size)).OutShape(tc.in); err != nil || got != tc.want {
			t.Errorf("Resize(%d).OutShape(%v) = %v, %v; want %v", tc.size, tc.in, got, err, tc.want)
		}
	}
	if got, err := Eval(224).OutShape(Shape{3, 375, 500}); err != nil || got != (Shape{3, 224, 224}) {
		t.Errorf("Eval(224).OutShape = %v, %v; want 3x224x224", got, err)
	}
	if got, err := Train(224).OutShape(Shape{3, 375, 500}); err != nil || got != (Shape{3, 224, 224}) {
		t.Errorf("Train(224).OutShape = %v, %v; want 3x224x224", got, err)
	}
}

func TestInvalidTransforms(t *testing.T) {
	for _, p := range []*Chain{
		Compose(Resize(-1)), Compose(CenterCrop(0)), Compose(RandomResizedCrop(0)),
		Compose(RandomResizedCropWith(8, [2]float64{0.5, 0.2}, [2]float64{1, 1})),
		Compose(ColorJitter(-1, 0, 0)), Compose(Normalize([]float32{1, 2}, []float32{1})),
		Compose(Normalize([]float32{0}, []float32{0})), Compose(Normalize([]float32{0, 0}, []float32{1, 1})),
	} {
		if _, err := p.OutShape(Shape{3, 8, 8}); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrShape) {
			t.Errorf("%v.OutShape = %v; want ErrInvalid or ErrShape", p, err)
		}
	}
}

func TestColorJitterKnownValues(t *testing.T) {
	// One RGB pixel pair, CHW: pixel A = (100, 150, 200), pixel B = (0, 50, 250).
	base := []byte{100, 0, 150, 50, 200, 250}
	tests := []struct {
		op   pixelOp
		want []byte
	}{
		{pixelOp{kind: 0, f: 0.5}, []byte{50, 0, 75, 25, 100, 125}},
		{pixelOp{kind: 0, f: 2}, []byte{200, 0, 255, 100, 255, 255}},
		// grey A = 140.75 -> 141, grey B = 57.85 -> 58: mean 99.5 rounds to 100; factor 0 makes
		// every value the mean.
		{pixelOp{kind: 1, f: 0}, []byte{100, 100, 100, 100, 100, 100}},
		// saturation 0: each pixel becomes its grey value.
		{pixelOp{kind: 2, f: 0}, []byte{141, 58, 141, 58, 141, 58}},
		{pixelOp{kind: 2, f: 1}, base},
	}
	for _, tc := range tests {
		dst := slices.Clone(base)
		jitterPixels(dst, tc.op, 3, 2, 1, 2)
		if !bytes.Equal(dst, tc.want) {
			t.Errorf("jitter(%+v) = %v; want %v", tc.op, dst, tc.want)
		}
	}
	// Through a Chain: factors are drawn per sample; a constant grey image keeps its grey.
	in := hwc(5, 5, 3, func(y, x, c int) byte { return 128 })
	dst := make([]byte, 75)
	r := rng.NewSample()
	r.Reset(1, 0, 0)
	if err := Compose(ColorJitter(0, 0.9, 0.9)).NewWorker().Apply(dst, in, r.Rand); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		if v != 128 {
			t.Fatalf("ColorJitter(0,.9,.9) of flat grey [%d] = %d; want 128", i, v)
		}
	}
}

func TestRandomResizedCropDistribution(t *testing.T) {
	// torchvision's rules: in 10 attempts, area fraction ~ U(0.08, 1), log ratio ~ U(log 3/4,
	// log 4/3); a box that fits is placed uniformly. Check moments of accepted boxes on a square
	// image (where almost every draw fits) and the fallback on an extreme aspect ratio.
	const W, H, N = 400, 400, 20000
	t.Run("square", func(t *testing.T) {
		tr := RandomResizedCrop(32).(rrc)
		r := rng.NewSample()
		var sumScale, sumLogR, sumX float64
		var small int
		for i := range N {
			r.Reset(7, 0, i)
			x, y, w, h := tr.box(W, H, r.Rand)
			if x < 0 || y < 0 || x+w > W || y+h > H {
				t.Fatalf("box(%d) = %d,%d %dx%d; outside %dx%d", i, x, y, w, h, W, H)
			}
			s := float64(w*h) / (W * H)
			sumScale += s
			lr := math.Log(float64(w) / float64(h))
			if lr < math.Log(3.0/4)-0.02 || lr > math.Log(4.0/3)+0.02 {
				t.Fatalf("box(%d) ratio %v outside [3/4, 4/3]", i, float64(w)/float64(h))
			}
			sumLogR += lr
			if s < 0.3 {
				small++
			}
			if W-w > 0 {
				sumX += float64(x) / float64(W-w)
			} else {
				sumX += 0.5
			}
		}
		wantMean, wantSmall := rrcAreaMoments()
		// The sd of the mean over N draws is about 0.002, of the fraction about 0.003.
		if m := sumScale / N; math.Abs(m-wantMean) > 0.01 {
			t.Errorf("mean area fraction = %.4f; want %.4f ± 0.01", m, wantMean)
		}
		if f := float64(small) / N; math.Abs(f-wantSmall) > 0.015 {
			t.Errorf("P(area < 0.3) = %.4f; want %.4f ± 0.015", f, wantSmall)
		}
		if m := sumLogR / N; math.Abs(m) > 0.01 {
			t.Errorf("mean log ratio = %.4f; want 0 ± 0.01", m)
		}
		if m := sumX / N; math.Abs(m-0.5) > 0.01 {
			t.Errorf("mean relative x offset = %.4f; want 0.5 ± 0.01", m)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		// 1000x10: no 10-attempt box fits in height... except small ones; a 10000x2 strip never
		// fits, so the central crop at ratio 4/3 is used: h=2, w=round(2*4/3)=3, x=(10000-3)/2.
		tr := RandomResizedCrop(32).(rrc)
		r := rng.NewSample()
		r.Reset(1, 0, 0)
		x, y, w, h := tr.box(10000, 1, r.Rand)
		if x != 4999 || y != 0 || w != 1 || h != 1 {
			t.Errorf("box(10000x1) = %d,%d %dx%d; want 4999,0 1x1", x, y, w, h)
		}
		x, y, w, h = tr.box(3, 3000, nil)
		if want := []int{0, 1498, 3, 4}; !slices.Equal([]int{x, y, w, h}, want) {
			t.Errorf("box(3x3000, fallback) = %v; want %v", []int{x, y, w, h}, want)
		}
	})
}

// rrcAreaMoments integrates torchvision's rule for a square image numerically: one attempt
// draws s ~ U(0.08, 1), log r ~ U(log 3/4, log 4/3) and fits iff s*r <= 1 and s/r <= 1; the
// first fitting attempt of 10 is used, else the whole image (area 1). It returns the mean area
// fraction and P(area < 0.3).
func rrcAreaMoments() (mean, small float64) {
	const n = 2000
	l0, l1 := math.Log(3.0/4), math.Log(4.0/3)
	var acc, sumS, sumSmall float64
	for i := range n {
		s := 0.08 + (float64(i)+0.5)/n*0.92
		for j := range n {
			r := math.Exp(l0 + (float64(j)+0.5)/n*(l1-l0))
			if s*r <= 1 && s/r <= 1 {
				acc++
				sumS += s
				if s < 0.3 {
					sumSmall++
				}
			}
		}
	}
	p := acc / (n * n)
	fail := math.Pow(1-p, 10)
	return (1-fail)*sumS/acc + fail, (1 - fail) * sumSmall / acc
}

func TestSameOutputWhateverTheWorker(t *testing.T) {
	imgs := make([]Input, 24)
	for i := range imgs {
		in := hwc(40+i, 60-i, 3, func(y, x, c int) byte { return byte(x*7 + y*3 + c*50 + i) })
		if i%2 == 0 {
			in = Input{Encoded: encodeJPEG(t, toImage(in), 90)}
		}
		imgs[i] = in
	}
	p := Compose(RandomResizedCrop(16), HorizontalFlip(0.5), ColorJitter(0.4, 0.4, 0.4), Normalize(ImageNetMean, ImageNetStd))
	run := func(workers int) [][]byte {
		out := make([][]byte, len(imgs))
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for g := range workers {
			wg.Go(func() {
				w, r := p.NewWorker(), rng.NewSample()
				for i := g; i < len(imgs); i += workers {
					r.Reset(3, 1, i)
					out[i] = make([]byte, 3*16*16)
					if err := w.Apply(out[i], imgs[i], r.Rand); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return out
	}
	one, eight := run(1), run(8)
	for i := range imgs {
		if !bytes.Equal(one[i], eight[i]) {
			t.Errorf("sample %d: 1 worker and 8 workers disagree", i)
		}
	}
}

func TestFloatPathMatchesDeviceNormalization(t *testing.T) {
	in := hwc(30, 40, 3, func(y, x, c int) byte { return byte(x*5 + y*3 + c*70) })
	p := Compose(RandomResizedCrop(12), HorizontalFlip(0.5), Normalize(ImageNetMean, ImageNetStd))
	for _, l := range []Layout{CHW, HWC} {
		w, r := p.NewWorker(), rng.NewSample()
		u8 := make([]byte, 3*12*12)
		f32 := make([]float32, len(u8))
		r.Reset(1, 2, 3)
		if err := w.ApplyLayout(u8, l, in, r.Rand); err != nil {
			t.Fatal(err)
		}
		r.Reset(1, 2, 3)
		if err := w.ApplyFloat32(f32, l, in, r.Rand); err != nil {
			t.Fatal(err)
		}
		mean, std, ok := p.Normalization()
		if !ok {
			t.Fatal("Normalization() ok = false; want true")
		}
		for i, v := range u8 {
			c := i / 144
			if l == HWC {
				c = i % 3
			}
			want := (float64(v)/255 - float64(mean[c])) / float64(std[c])
			if d := math.Abs(float64(f32[i]) - want); d > 1e-6 {
				t.Fatalf("%v: ApplyFloat32[%d] = %v; device normalization of %d gives %v (diff %g)", l, i, f32[i], v, want, d)
			}
		}
	}
	// kernels.NormalizeU8 on the CPU computes v*(1/(255*std)) + (-mean/std) in float32: every
	// byte value gives the float path's number to within 1e-6.
	for c := range 3 {
		m, s := ImageNetMean[c], ImageNetStd[c]
		mul, add := 1/(255*s), -m/s
		for v := range 256 {
			want := (float32(v)/255 - m) / s
			if got := float32(v)*mul + add; math.Abs(float64(got-want)) > 1e-6 {
				t.Errorf("channel %d value %d: multiply-add form %v; float path %v", c, v, got, want)
			}
		}
	}
	// Without Normalize the float path is ToTensor's v/255.
	f32 := make([]float32, 3*30*40)
	if err := Compose().NewWorker().ApplyFloat32(f32, CHW, in, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := f32[1], float32(in.Pixels[3])/255; got != want {
		t.Errorf("ApplyFloat32 without Normalize [1] = %v; want %v", got, want)
	}
}

func TestLayoutHWC(t *testing.T) {
	in := hwc(4, 5, 3, func(y, x, c int) byte { return byte(y*20 + x*3 + c) })
	dst := make([]byte, len(in.Pixels))
	if err := Compose().NewWorker().ApplyLayout(dst, HWC, in, nil); err != nil || !bytes.Equal(dst, in.Pixels) {
		t.Errorf("ApplyLayout(HWC) = %v, %v; want the input %v", dst, err, in.Pixels)
	}
	if err := Compose(HorizontalFlip(1)).NewWorker().ApplyLayout(dst, HWC, in, rng.NewSample().Rand); err != nil {
		t.Fatal(err)
	}
	if got, want := dst[:3], in.Pixels[4*3:5*3]; !bytes.Equal(got, want) {
		t.Errorf("flipped HWC first pixel = %v; want %v", got, want)
	}
}

func TestChannelConversions(t *testing.T) {
	rgb := hwc(2, 2, 3, func(y, x, c int) byte { return []byte{200, 100, 50}[c] })
	gray := hwc(2, 2, 1, func(y, x, c int) byte { return 77 })
	rgba := hwc(2, 2, 4, func(y, x, c int) byte { return []byte{10, 20, 30, 0}[c] })
	tests := []struct {
		name string
		in   Input
		c    int
		want []byte // first pixel per channel
	}{
		{"rgb->gray", rgb, 1, []byte{124}}, // 0.299*200+0.587*100+0.114*50 = 124.2
		{"gray->rgb", gray, 3, []byte{77, 77, 77}},
		{"rgba->rgb", rgba, 3, []byte{10, 20, 30}},
		{"gray->gray", gray, 1, []byte{77}},
	}
	for _, tc := range tests {
		dst := make([]byte, tc.c*4)
		if err := Compose().NewWorker().Apply(dst, tc.in, nil); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for c, w := range tc.want {
			if dst[c*4] != w {
				t.Errorf("%s: channel %d = %d; want %d", tc.name, c, dst[c*4], w)
			}
		}
	}
}

// quadrants is a 32x16 image: top-left red, top-right green, bottom-left blue, bottom-right white.
func quadrants() *image.NRGBA {
	im := image.NewNRGBA(image.Rect(0, 0, 32, 16))
	cols := []color.NRGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {255, 255, 255, 255}}
	for y := range 16 {
		for x := range 32 {
			im.SetNRGBA(x, y, cols[(y/8)*2+x/16])
		}
	}
	return im
}

func TestDecodeFormats(t *testing.T) {
	q := quadrants()
	enc := func(f func(*bytes.Buffer) error) []byte {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	grayIm := image.NewGray(q.Rect)
	for i := range grayIm.Pix {
		grayIm.Pix[i] = byte(i % 2 * 200)
	}
	pal := image.NewPaletted(q.Rect, color.Palette{color.NRGBA{255, 0, 0, 255}, color.NRGBA{0, 255, 0, 255}, color.NRGBA{0, 0, 255, 255}, color.NRGBA{255, 255,
		255, 255}})
	for y := range 16 {
		for x := range 32 {
			pal.SetColorIndex(x, y, uint8((y/8)*2+x/16))
		}
	}
	webp, err := os.ReadFile("testdata/tiny.webp")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		data   []byte
		format string
		tol    int
		quads  bool
	}{
		{"jpeg", encodeJPEG(t, q, 95), "jpeg", 40, true},
		{"png", enc(func(b *bytes.Buffer) error { return png.Encode(b, q) }), "png", 0, true},
		{"png paletted", enc(func(b *bytes.Buffer) error { return png.Encode(b, pal) }), "png", 0, true},
		{"gif", enc(func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }), "gif", 0, true},
		{"bmp", enc(func(b *bytes.Buffer) error { return bmp.Encode(b, q) }), "bmp", 0, true},
		{"jpeg gray", encodeJPEG(t, grayIm, 100), "jpeg", 0, false},
		{"webp", webp, "webp", 0, false},
	}
	want := [4][3]byte{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := DecodeInfo(tc.data)
			if err != nil || info.Format != tc.format {
				t.Fatalf("DecodeInfo = %+v, %v; want format %s", info, err, tc.format)
			}
			dst := make([]byte, 3*info.Width*info.Height)
			if err := Compose().NewWorker().Apply(dst, Input{Encoded: tc.data}, nil); err != nil {
				t.Fatal(err)
			}
			n := info.Width * info.Height
			switch {
			case tc.quads:
				for qi, pt := range [4][2]int{{4, 4}, {28, 4}, {4, 12}, {28, 12}} {
					for c := range 3 {
						if got := dst[c*n+pt[1]*32+pt[0]]; absDiff(got, want[qi][c]) > tc.tol {
							t.Errorf("pixel %v channel %d = %d; want %d ± %d", pt, c, got, want[qi][c], tc.tol)
						}
					}
				}
			case tc.name == "webp":
				// The file holds (40x, 60y, 200 or 20) for 6x4 pixels (made by PIL, lossless).
				for y := range 4 {
					for x := range 6 {
						b := byte(200)
						if x >= 3 {
							b = 20
						}
						for c, w := range []byte{byte(40 * x), byte(60 * y), b} {
							if got := dst[c*n+y*6+x]; got != w {
								t.Fatalf("webp (%d,%d) channel %d = %d; want %d", x, y, c, got, w)
							}
						}
					}
				}
			default: // gray JPEG at quality 100: alternate 0/200 columns survive within 8
				for i := range 8 {
					w := grayIm.Pix[i]
					for c := range 3 {
						if got := dst[c*n+i]; absDiff(got, w) > 8 {
							t.Errorf("gray jpeg pixel %d channel %d = %d; want %d ± 8", i, c, got, w)
						}
					}
				}
			}
		})
	}
}

func TestJPEGOrientation(t *testing.T) {
	base := encodeJPEG(t, quadrants(), 95)
	// Where the red quadrant (stored top-left) ends up after each orientation, displayed size.
	tests := []struct {
		o      int
		w, h   int
		redAtX int
		redAtY int
	}{
		{1, 32, 16, 4, 4}, {2, 32, 16, 28, 4}, {3, 32, 16, 28, 12}, {4, 32, 16, 4, 12},
		{5, 16, 32, 4, 4}, {6, 16, 32, 12, 4}, {7, 16, 32, 12, 28}, {8, 16, 32, 4, 28},
	}
	for _, tc := range tests {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			data := withOrientation(base, tc.o, bo)
			info, err := DecodeInfo(data)
			if err != nil || info.Orientation != tc.o || info.Width != tc.w || info.Height != tc.h {
				t.Fatalf("DecodeInfo(orientation %d) = %+v, %v; want %dx%d", tc.o, info, err, tc.w, tc.h)
			}
			dst := make([]byte, 3*tc.w*tc.h)
			if err := Compose().NewWorker().Apply(dst, Input{Encoded: data}, nil); err != nil {
				t.Fatal(err)
			}
			n := tc.w * tc.h
			i := tc.redAtY*tc.w + tc.redAtX
			if r, g, b := dst[i], dst[n+i], dst[2*n+i]; r < 200 || g > 50 || b > 50 {
				t.Errorf("orientation %d: pixel (%d,%d) = %d,%d,%d; want red", tc.o, tc.redAtX, tc.redAtY, r, g, b)
			}
			// The same image cropped and flipped: the geometry follows the displayed frame.
			dst2 := make([]byte, 3*4*4)
			if err := Compose(CenterCrop(4), HorizontalFlip(1)).NewWorker().Apply(dst2, Input{Encoded: data}, rng.NewSample().Rand); err != nil {
				t.Fatal(err)
			}
			cx, cy := tc.w/2-2, tc.h/2-2
			for y := range 4 {
				for x := range 4 {
					for c := range 3 {
						got, want := dst2[c*16+y*4+x], dst[c*n+(cy+y)*tc.w+cx+3-x]
						if got != want {
							t.Fatalf("orientation %d: crop+flip (%d,%d) c%d = %d; want %d", tc.o, x, y, c, got, want)
						}
					}
				}
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	good := encodeJPEG(t, quadrants(), 90)
	hugePNG := func() []byte {
		var b bytes.Buffer
		_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1)))
		p := b.Bytes()
		binary.BigEndian.PutUint32(p[16:], 50000)
		binary.BigEndian.PutUint32(p[20:], 50000)
		binary.BigEndian.PutUint32(p[29:], crc32.ChecksumIEEE(p[12:29]))
		return p
	}()
	hugeJPEG := slices.Clone(good)
	sof := bytes.Index(hugeJPEG, []byte{0xff, 0xc0})
	binary.BigEndian.PutUint16(hugeJPEG[sof+5:], 50000)
	binary.BigEndian.PutUint16(hugeJPEG[sof+7:], 50000)
	tests := []struct {
		name string
		in   Input
		want error
	}{
		{"garbage", Input{Encoded: []byte("not an image at all")}, ErrCorrupt},
		{"empty", Input{Encoded: []byte{}}, ErrCorrupt},
		{"truncated jpeg", Input{Encoded: good[:len(good)/2]}, ErrCorrupt},
		{"jpeg header only", Input{Encoded: good[:20]}, ErrCorrupt},
		{"huge png", Input{Encoded: hugePNG}, ErrTooLarge},
		{"huge jpeg", Input{Encoded: hugeJPEG}, ErrTooLarge},
		{"both", Input{Encoded: good, Pixels: []byte{1}, H: 1, W: 1, C: 1}, ErrShape},
		{"neither", Input{}, ErrShape},
		{"short pixels", Input{Pixels: []byte{1, 2}, H: 2, W: 2, C: 1}, ErrShape},
		{"two channels", Input{Pixels: make([]byte, 8), H: 2, W: 2, C: 2}, ErrShape},
		{"overflowing shape", Input{Pixels: []byte{}, H: 1 << 32, W: 1 << 32, C: 1}, ErrTooLarge},
		{"huge pixels", Input{Pixels: []byte{1}, H: 20000, W: 20000, C: 1}, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 3*8*8)
			err := Compose(RandomResizedCrop(8)).NewWorker().Apply(dst, tc.in, rng.NewSample().Rand)
			if !errors.Is(err, tc.want) {
				t.Errorf("Apply(%s) = %v; want %v", tc.name, err, tc.want)
			}
		})
	}
	if err := Compose().WithMaxPixels(100).NewWorker().Apply(make([]byte, 3*32*16), Input{Encoded: good}, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("WithMaxPixels(100).Apply(32x16) = %v; want ErrTooLarge", err)
	}
	if err := Compose().NewWorker().Apply(make([]byte, 5), Input{Encoded: good}, nil); !errors.Is(err, ErrShape) {
		t.Errorf("Apply(dst of 5 bytes) = %v; want ErrShape", err)
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	raw := hwc(300, 400, 3, func(y, x, c int) byte { return byte(x ^ y + c) })
	w, r := Train(64).NewWorker(), rng.NewSample()
	dst := make([]byte, 3*64*64)
	i := 0
	run := func() {
		r.Reset(1, 0, i)
		i++
		if err := w.Apply(dst, raw, r.Rand); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // warm the scratch up to the largest crop
		run()
	}
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Errorf("Apply(raw) allocs = %v; want 0", n)
	}
}

func TestJPEGPathMatchesDecodedPixels(t *testing.T) {
	// The fused path (region-limited, possibly reduced-scale decode, resampling the YCbCr
	// planes) against the plain one (full standard-library decode to RGB, then the same
	// geometry on raw pixels). Chroma is interpolated rather than replicated, so the two differ
	// at sharp colour edges; on a smooth image they agree to rounding.
	src := hwc(300, 400, 3, func(y, x, c int) byte { return byte((x*(c+1) + y*(3-c)) / 9) }) // no wrap-around edges
	data := encodeJPEG(t, toImage(src), 95)
	im, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rgb := make([]byte, 300*400*3)
	for y := range 300 {
		for x := range 400 {
			r, g, b, _ := im.At(x, y).RGBA()
			copy(rgb[(y*400+x)*3:], []byte{byte(r >> 8), byte(g >> 8), byte(b >> 8)})
		}
	}
	raw := Input{Pixels: rgb, H: 300, W: 400, C: 3}
	tests := []struct {
		name string
		p    *Chain
		size int
		tol  float64
	}{
		{"full scale", Compose(ResizeTo(200, 300), CenterCrop(150), HorizontalFlip(1)), 0, 0.5},
		{"crop", Compose(CenterCrop(100)), 0, 0.5},
		// A reduced IDCT samples each 2x2..8x8 group instead of averaging every pixel, so
		// JPEG noise survives a little more: a looser bound.
		{"train", Compose(RandomResizedCrop(64), HorizontalFlip(0.5)), 0, 2},
		{"eval (scale 4)", Eval(56), 0, 2},
		{"scale 8", Compose(ResizeTo(30, 40)), 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.p.OutShape(Shape{3, 300, 400})
			if err != nil {
				t.Fatal(err)
			}
			w1, w2, r := tc.p.NewWorker(), tc.p.NewWorker(), rng.NewSample()
			a, b := make([]byte, s.Len()), make([]byte, s.Len())
			for i := range 5 {
				r.Reset(9, 0, i)
				if err := w1.Apply(a, Input{Encoded: data}, r.Rand); err != nil {
					t.Fatal(err)
				}
				r.Reset(9, 0, i)
				if err := w2.Apply(b, raw, r.Rand); err != nil {
					t.Fatal(err)
				}
				sum := 0
				for j := range a {
					sum += absDiff(a[j], b[j])
				}
				if mean := float64(sum) / float64(len(a)); mean > tc.tol {
					t.Errorf("sample %d: mean |jpeg path - pixel path| = %.2f; want <= %v", i, mean, tc.tol)
				}
			}
		})
	}
}

func TestJPEGSteadyStateAllocatesNothing(t *testing.T) {
	data := encodeJPEG(t, toImage(hwc(240, 320, 3, func(y, x, c int) byte { return byte(x*y + c) })), 90)
	for _, m := range []DecodeMode{FastDecode, ExactDecode} {
		w, r := Train(96).WithDecode(m).NewWorker(), rng.NewSample()
		dst := make([]byte, 3*96*96)
		i := 0
		run := func() {
			r.Reset(1, 0, i)
			i++
			if err := w.Apply(dst, Input{Encoded: data}, r.Rand); err != nil {
				t.Fatal(err)
			}
		}
		for range 50 {
			run()
		}
		if n := testing.AllocsPerRun(50, run); n != 0 {
			t.Errorf("Apply(jpeg, %v decode) allocs = %v; want 0", m, n)
		}
	}
}

// TestParseFilter: every filter's name parses back to it; another name does not.
func TestParseFilter(t *testing.T) {
	for _, f := range []Filter{Bilinear, Bicubic, Lanczos} {
		if got, ok := ParseFilter(f.String()); !ok || got != f {
			t.Errorf("ParseFilter(%q) = %v, %v; want %v", f.String(), got, ok, f)
		}
	}
	if _, ok := ParseFilter("nearest"); ok {
		t.Error("ParseFilter(nearest) is ok; stoke has no nearest filter")
	}
}
