package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refImage is a reference HWC image that the reference geometry below transforms pixel by pixel.
type refImage struct {
	w, h, c int
	pix     []byte
}

func (m refImage) at(x, y, c int) byte {
	if x < 0 || y < 0 || x >= m.w || y >= m.h {
		return 0
	}
	return m.pix[(y*m.w+x)*m.c+c]
}

func refFrom(w, h, c int, f func(x, y, c int) byte) refImage {
	m := refImage{w, h, c, make([]byte, w*h*c)}
	for y := range h {
		for x := range w {
			for k := range c {
				m.pix[(y*w+x)*c+k] = f(x, y, k)
			}
		}
	}
	return m
}

// geomOp is one step of a random geometry sequence: kind 0 horizontal flip, 1 vertical flip, 2
// quarter turns (k), 3 crop (x, y, w, h).
type geomOp struct{ kind, k, x, y, w, h int }

func (o geomOp) ref(m refImage) refImage {
	switch o.kind {
	case 0:
		return refFrom(m.w, m.h, m.c, func(x, y, c int) byte { return m.at(m.w-1-x, y, c) })
	case 1:
		return refFrom(m.w, m.h, m.c, func(x, y, c int) byte { return m.at(x, m.h-1-y, c) })
	case 2:
		for range ((o.k % 4) + 4) % 4 { // numpy.rot90: new (x, y) = old (W-1-y, x)
			old := m
			m = refFrom(old.h, old.w, old.c, func(x, y, c int) byte { return old.at(old.w-1-y, x, c) })
		}
		return m
	}
	return refFrom(o.w, o.h, m.c, func(x, y, c int) byte { return m.at(o.x+x, o.y+y, c) })
}

// planOps is a user-style transform that drives the public Plan methods directly.
type planOps []geomOp

func (ops planOps) String() string { return fmt.Sprintf("planOps%v", []geomOp(ops)) }

func (ops planOps) Plan(p *Plan, _ *rand.Rand) error {
	for _, o := range ops {
		switch o.kind {
		case 0:
			p.FlipHorizontal()
		case 1:
			p.FlipVertical()
		case 2:
			p.Rotate90(o.k)
		case 3:
			p.Crop(o.x, o.y, o.w, o.h)
		}
	}
	return nil
}

func randomOps(r *rand.Rand, w, h int) []geomOp {
	var ops []geomOp
	for range 1 + r.IntN(5) {
		o := geomOp{kind: r.IntN(4)}
		switch o.kind {
		case 2:
			o.k = r.IntN(9) - 4
			if o.k%2 != 0 {
				w, h = h, w
			}
		case 3: // possibly reaching outside: padding
			o.w, o.h = 1+r.IntN(w+2), 1+r.IntN(h+2)
			o.x, o.y = r.IntN(w+3)-2, r.IntN(h+3)-2
			w, h = o.w, o.h
		}
		ops = append(ops, o)
	}
	return ops
}

// TestGeometryMatchesReference composes random flips, quarter turns and crops (through the
// public Plan and through the package's transforms) and compares every output pixel with a
// pixel-by-pixel reference, for gray and RGB, CHW and HWC, raw pixels and JPEGs in all eight
// EXIF orientations.
func TestGeometryMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(t *testing.T, src refImage, in Input, ops []geomOp, tfs []Transform) {
		t.Helper()
		want := src
		for _, o := range ops {
			want = o.ref(want)
		}
		for _, l := range []Layout{CHW, HWC} {
			dst := make([]byte, want.w*want.h*want.c)
			if err := Compose(tfs...).NewWorker().ApplyLayout(dst, l, in, r); err != nil {
				t.Fatalf("%v: %v", ops, err)
			}
			got := Image{Pix: dst, C: want.c, H: want.h, W: want.w, Layout: l}
			for y := range want.h {
				for x := range want.w {
					for c := range want.c {
						if g, w := dst[got.Index(c, y, x)], want.at(x, y, c); g != w {
							t.Fatalf("%v %v: pixel (%d,%d) c%d = %d; want %d", ops, l, x, y, c, g, w)
						}
					}
				}
			}
		}
	}
	for _, c := range []int{1, 3} {
		for range 200 {
			w, h := 1+r.IntN(7), 1+r.IntN(7)
			src := refFrom(w, h, c, func(x, y, k int) byte { return byte(1 + x + 10*y + 100*k) })
			in := Input{Pixels: src.pix, H: h, W: w, C: c}
			ops := randomOps(r, w, h)
			check(t, src, in, ops, []Transform{planOps(ops)})
			// The same sequence through the package's transforms, one per step.
			var tfs []Transform
			for _, o := range ops {
				switch o.kind {
				case 0:
					tfs = append(tfs, HorizontalFlip(1))
				case 1:
					tfs = append(tfs, VerticalFlip(1))
				case 2:
					tfs = append(tfs, Rotate90(o.k))
				default:
					tfs = append(tfs, planOps{o})
				}
			}
			check(t, src, in, ops, tfs)
		}
	}
	base := encodeJPEG(t, quadrants(), 95)
	for o := 1; o <= 8; o++ {
		data := withOrientation(base, o, bytesOrder(o))
		info, err := DecodeInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		// The reference starts from the displayed image the identity Chain decodes.
		disp := make([]byte, 3*info.Width*info.Height)
		if err := Compose().NewWorker().ApplyLayout(disp, HWC, Input{Encoded: data}, nil); err != nil {
			t.Fatal(err)
		}
		src := refImage{info.Width, info.Height, 3, disp}
		for range 30 {
			ops := randomOps(r, info.Width, info.Height)
			check(t, src, Input{Encoded: data}, ops, []Transform{planOps(ops)})
		}
	}
}

func bytesOrder(o int) binary.ByteOrder {
	if o%2 == 0 {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// TestRandomCropPadded checks RandomCrop(size, padding) against the reference crop at the offsets
// the same generator draws (top, then left), and that every offset in [0, 2*padding] occurs.
func TestRandomCropPadded(t *testing.T) {
	src := refFrom(8, 8, 3, func(x, y, c int) byte { return byte(1 + x + 10*y + 100*c) })
	in := Input{Pixels: src.pix, H: 8, W: 8, C: 3}
	p := Compose(RandomCrop(8, 2))
	if s, err := p.OutShape(Shape{C: 3, H: 8, W: 8}); err != nil || s != (Shape{3, 8, 8}) {
		t.Fatalf("OutShape = %v, %v", s, err)
	}
	seen := map[[2]int]bool{}
	w := p.NewWorker()
	for seed := range uint64(300) {
		dst := make([]byte, 3*8*8)
		if err := w.Apply(dst, in, rand.New(rand.NewPCG(seed, 0))); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 0))
		y := r.IntN(5)
		x := r.IntN(5)
		seen[[2]int{x, y}] = true
		want := geomOp{kind: 3, x: x - 2, y: y - 2, w: 8, h: 8}.ref(src)
		if got := chw(Input{Pixels: want.pix, H: 8, W: 8, C: 3}); !bytes.Equal(dst, got) {
			t.Fatalf("seed %d: offset (%d,%d): output differs from the reference crop", seed, x, y)
		}
	}
	if len(seen) != 25 {
		t.Errorf("%d of the 25 offsets drawn in 300 samples", len(seen))
	}
}

func TestRandomRotate90Draws(t *testing.T) {
	src := refFrom(4, 4, 1, func(x, y, c int) byte { return byte(1 + x + 4*y) })
	in := Input{Pixels: src.pix, H: 4, W: 4, C: 1}
	turns := make([]refImage, 4)
	for k := range turns {
		turns[k] = geomOp{kind: 2, k: k}.ref(src)
	}
	count := [4]int{}
	w := Compose(RandomRotate90()).NewWorker()
	for seed := range uint64(400) {
		dst := make([]byte, 16)
		if err := w.Apply(dst, in, rand.New(rand.NewPCG(seed, 1))); err != nil {
			t.Fatal(err)
		}
		k := rand.New(rand.NewPCG(seed, 1)).IntN(4)
		if !bytes.Equal(dst, turns[k].pix) {
			t.Fatalf("seed %d: not the image turned %d times", seed, k)
		}
		count[k]++
	}
	for k, n := range count { // binomial(400, 1/4): mean 100, sd 8.7
		if n < 60 || n > 140 {
			t.Errorf("%d quarter turns drawn %d times in 400", k, n)
		}
	}
}

func TestRandomRotation(t *testing.T) {
	// A quarter turn by rotatePixels equals the exact one.
	src := refFrom(5, 5, 3, func(x, y, c int) byte { return byte(1 + x + 10*y + 100*c) })
	want := geomOp{kind: 2, k: 1}.ref(src)
	for _, l := range []Layout{CHW, HWC} {
		in := Image{Pix: make([]byte, 75), C: 3, H: 5, W: 5, Layout: l}
		for y := range 5 {
			for x := range 5 {
				for c := range 3 {
					in.Pix[in.Index(c, y, x)] = src.at(x, y, c)
				}
			}
		}
		dst := make([]byte, 75)
		pix, row, cs := 1, 5, 25
		if l == HWC {
			pix, row, cs = 3, 15, 1
		}
		rotatePixels(dst, in.Pix, math.Pi/2, 3, 5, 5, pix, row, cs)
		out := Image{Pix: dst, C: 3, H: 5, W: 5, Layout: l}
		for y := range 5 {
			for x := range 5 {
				for c := range 3 {
					if g, w := dst[out.Index(c, y, x)], want.at(x, y, c); g != w {
						t.Fatalf("%v: (%d,%d) c%d = %d; want %d", l, x, y, c, g, w)
					}
				}
			}
		}
	}
	// RandomRotation(30) of a white square: the centre stays, the corners turn black once the
	// angle moves them off the canvas, and the angles span the range.
	in := Input{Pixels: bytes.Repeat([]byte{255}, 33*33), H: 33, W: 33, C: 1}
	w := Compose(CenterCrop(33), RandomRotation(30)).NewWorker()
	lo, hi := 0.0, 0.0
	for seed := range uint64(200) {
		dst := make([]byte, 33*33)
		if err := w.Apply(dst, in, rand.New(rand.NewPCG(seed, 2))); err != nil {
			t.Fatal(err)
		}
		angle := -30 + rand.New(rand.NewPCG(seed, 2)).Float64()*60
		lo, hi = min(lo, angle), max(hi, angle)
		if dst[16*33+16] != 255 {
			t.Fatalf("seed %d: centre pixel %d", seed, dst[16*33+16])
		}
		// The corner, 16*sqrt(2) from the centre, samples outside once 16*sin|angle| > 0.5.
		if corner, a := dst[0], math.Abs(angle); (a > 2 && corner != 0) || (a < 1.7 && corner != 255) {
			t.Fatalf("seed %d: angle %.2f: corner pixel %d", seed, angle, corner)
		}
	}
	if lo > -25 || hi < 25 {
		t.Errorf("angles drawn in [%.1f, %.1f]; want most of [-30, 30]", lo, hi)
	}
	// Geometry after a pixel step that it does not commute with is refused.
	for _, p := range []*Chain{
		Compose(RandomRotation(10), CenterCrop(4)),
		Compose(planPixels{}, HorizontalFlip(0.5)),
		Compose(planPixels{}, CenterCrop(4)),
	} {
		if _, err := p.OutShape(Shape{C: 1, H: 8, W: 8}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: OutShape error %v; want ErrInvalid", p, err)
		}
	}
	if _, err := Compose(RandomRotation(-1)).OutShape(Shape{C: 1, H: 8, W: 8}); !errors.Is(err, ErrInvalid) {
		t.Errorf("RandomRotation(-1): %v; want ErrInvalid", err)
	}
}

type planPixels struct{}

func (planPixels) String() string                   { return "planPixels" }
func (planPixels) Plan(p *Plan, _ *rand.Rand) error { p.Pixels(func(Image) {}); return nil }

// TestAugmentAllocatesNothing checks that the new geometric and pixel steps keep a warm Worker
// allocation-free: the CIFAR recipe with flips, quarter turns and a small rotation, raw and JPEG.
func TestAugmentAllocatesNothing(t *testing.T) {
	p := Compose(RandomCrop(32, 4), HorizontalFlip(0.5), VerticalFlip(0.5), RandomRotate90(), RandomRotation(10))
	for _, in := range []Input{
		hwc(32, 32, 3, func(y, x, c int) byte { return byte(x ^ y + c) }),
		{Encoded: encodeJPEG(t, quadrants(), 90)},
	} {
		w := p.NewWorker()
		dst := make([]byte, 3*32*32)
		pcg := rand.NewPCG(1, 0)
		r := rand.New(pcg)
		i := uint64(0)
		run := func() {
			i++
			pcg.Seed(1, i) // the sample's generator, reseeded as a Loader does
			if err := w.Apply(dst, in, r); err != nil {
				t.Fatal(err)
			}
		}
		for range 50 {
			run()
		}
		if n := testing.AllocsPerRun(50, run); n != 0 {
			t.Errorf("Apply(%v) allocs = %v; want 0", p, n)
		}
	}
}
