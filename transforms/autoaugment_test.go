package transforms

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/rng"
)

// augChains are the new random transforms, each after a crop as a training recipe places them.
func augChains() map[string]*Chain {
	return map[string]*Chain{
		"trivialaugment": Compose(RandomResizedCrop(40), HorizontalFlip(0.5), TrivialAugmentWide()),
		"randaugment":    Compose(RandomResizedCrop(40), RandAugment(2, 9)),
		"autoaugment":    Compose(RandomResizedCrop(40), AutoAugment(ImageNetPolicy)),
		"autoaugment10":  Compose(RandomCrop(40, 4), AutoAugment(CIFAR10Policy)),
		"autoaugmentsv":  Compose(RandomCrop(40, 4), AutoAugment(SVHNPolicy)),
		"erasing":        Compose(RandomCrop(40, 4), RandomErasing(0.7)),
		"erasingmean":    Compose(RandomCrop(40, 4), RandomErasingWith(1, [2]float64{0.1, 0.2}, [2]float64{0.5, 2}, []byte{124, 116, 104})),
		"blur":           Compose(RandomCrop(40, 4), GaussianBlur(5, 0.1, 2)),
		"grayscale":      Compose(RandomCrop(40, 4), RandomGrayscale(0.5)),
		"jitterhue":      Compose(RandomCrop(40, 4), ColorJitterHue(0.4, 0.4, 0.4, 0.1)),
		"perspective":    Compose(RandomCrop(40, 4), RandomPerspective(0.5, 0.8)),
		"affine": Compose(RandomCrop(40, 4), RandomAffine(Affine{
			Degrees: [2]float64{-30, 30}, Translate: [2]float64{0.1, 0.2}, Scale: [2]float64{0.8, 1.2}, Shear: [4]float64{-10, 10, -5, 5},
		})),
		"all": Compose(RandomResizedCrop(40), TrivialAugmentWide(), RandAugment(2, 14), GaussianBlur(3, 0.5, 1),
			ColorJitterHue(0.2, 0.2, 0.2, 0.5), RandomGrayscale(0.2), RandomAffine(Affine{Degrees: [2]float64{-10, 10}}),
			RandomPerspective(0.3, 0.5), RandomErasing(0.5)),
	}
}

// TestAugmentDeterministicAndLayouts: the same sample seed gives the same output on a fresh
// Worker and a used one, HWC is CHW transposed, and the seeds do change the output.
func TestAugmentDeterministicAndLayouts(t *testing.T) {
	src := hwc(57, 61, 3, func(y, x, c int) byte { return byte(x*5 + y*3 + c*70 + (x*y)%13) })
	for name, p := range augChains() {
		t.Run(name, func(t *testing.T) {
			used := p.NewWorker()
			s := rng.NewSample()
			distinct := map[string]bool{}
			for i := range 60 {
				s.Reset(3, 1, i)
				a := make([]byte, 3*40*40)
				if err := used.Apply(a, src, s.Rand); err != nil {
					t.Fatal(err)
				}
				s.Reset(3, 1, i)
				b := make([]byte, 3*40*40)
				if err := p.NewWorker().ApplyLayout(b, HWC, src, s.Rand); err != nil {
					t.Fatal(err)
				}
				for k := range 40 * 40 {
					for c := range 3 {
						if a[c*1600+k] != b[k*3+c] {
							t.Fatalf("sample %d: CHW[%d][%d] = %d; HWC from a fresh Worker has %d", i, c, k, a[c*1600+k], b[k*3+c])
						}
					}
				}
				distinct[string(a)] = true
			}
			if len(distinct) < 20 {
				t.Errorf("60 seeds gave %d distinct outputs; want the seed to matter", len(distinct))
			}
		})
	}
}

// TestPoliciesAllocateNothing: a warm Worker runs the augmentations without allocating.
func TestPoliciesAllocateNothing(t *testing.T) {
	raw := hwc(90, 120, 3, func(y, x, c int) byte { return byte(x ^ y + c) })
	p := augChains()["all"]
	w, r := p.NewWorker(), rng.NewSample()
	dst := make([]byte, 3*40*40)
	i := 0
	run := func() {
		r.Reset(1, 0, i)
		i++
		if err := w.Apply(dst, raw, r.Rand); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		run()
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("Apply with augmentations allocs = %v; want 0", n)
	}
}

// planned records what one Plan of t on a w x h image drew: the pixel-step kinds and whether
// the geometry moved (a translation fused as a crop).
func planned(t Transform, w, h int, r *rand.Rand) (kinds []uint8, moved bool, err error) {
	var p Plan
	p.reset(w, h)
	if err := t.Plan(&p, r); err != nil {
		return nil, false, err
	}
	for _, op := range p.post {
		kinds = append(kinds, op.kind)
	}
	return kinds, p.x.off != 0 || p.y.off != 0, nil
}

// TestAugmentOpSets: over many samples each policy draws exactly its torchvision op set,
// TrivialAugmentWide one op per sample, RandAugment n, AutoAugment at most 2.
func TestAugmentOpSets(t *testing.T) {
	kindOf := map[uint8]string{opAffine: "affine", opBrightnessT: "Brightness", opSaturationT: "Color", opContrastT: "Contrast",
		opSharpness: "Sharpness", opPosterize: "Posterize", opSolarize: "Solarize", opAutoContrast: "AutoContrast",
		opEqualize: "Equalize", opInvert: "Invert"}
	tests := []struct {
		t        Transform
		min, max int
		want     []string
	}{
		{TrivialAugmentWide(), 0, 1, []string{
			"none", "affine", "translate", "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
		}},
		{RandAugment(3, 9), 0, 3, []string{
			"none", "affine", "translate", "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
		}},
		{AutoAugment(ImageNetPolicy), 0, 2, []string{
			"none", "affine", "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert",
		}},
		{AutoAugment(CIFAR10Policy), 0, 2, []string{
			"none", "affine", "translate", "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
			"Invert",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.t.String(), func(t *testing.T) {
			seen := map[string]int{}
			for i := range 4000 {
				kinds, moved, err := planned(tt.t, 48, 36, rand.New(rand.NewPCG(5, uint64(i))))
				if err != nil {
					t.Fatal(err)
				}
				n := len(kinds)
				if moved {
					seen["translate"]++
					n++
				}
				if n < tt.min || n > tt.max {
					t.Fatalf("sample %d: %d operations; want %d to %d", i, n, tt.min, tt.max)
				}
				if n == 0 {
					seen["none"]++
				}
				for _, k := range kinds {
					seen[kindOf[k]]++
				}
			}
			if len(seen) != len(tt.want) {
				t.Errorf("ops drawn %v; want exactly %v", seen, tt.want)
			}
			for _, k := range tt.want {
				if seen[k] == 0 {
					t.Errorf("never drew %s in 4000 samples (drew %v)", k, seen)
				}
			}
		})
	}
	// TrivialAugmentWide draws its 14 ops uniformly: a sample it leaves without any step is an
	// Identity, or a translation of bin 0 (0 pixels).
	seen := 0
	for i := range 14000 {
		kinds, moved, _ := planned(TrivialAugmentWide(), 48, 36, rand.New(rand.NewPCG(9, uint64(i))))
		if len(kinds) == 0 && !moved {
			seen++
		}
	}
	want := 14000 * (1.0/14 + 2.0/14/31)
	if math.Abs(float64(seen)-want) > 4*math.Sqrt(want) {
		t.Errorf("TrivialAugmentWide left %d of 14000 samples alone; want about %.0f", seen, want)
	}
}

// TestRandomErasingBox: the box lies inside the image with its area fraction and aspect ratio in
// range, and erasing happens with probability p.
func TestRandomErasingBox(t *testing.T) {
	const w, h, n = 50, 40, 4000
	erased := 0
	for i := range n {
		var p Plan
		p.reset(w, h)
		if err := RandomErasing(0.3).Plan(&p, rand.New(rand.NewPCG(2, uint64(i)))); err != nil {
			t.Fatal(err)
		}
		if len(p.post) == 0 {
			continue
		}
		erased++
		op := p.post[0]
		top, left, eh, ew := op.n[0], op.n[1], op.n[2], op.n[3]
		if op.kind != opErase || top < 0 || left < 0 || eh < 1 || ew < 1 || top+eh > h || left+ew > w || eh >= h || ew >= w {
			t.Fatalf("sample %d: box top %d left %d %dx%d in %dx%d", i, top, left, ew, eh, w, h)
		}
		// Rounding the sides moves the area and ratio a little past the drawn ones.
		if a := float64(eh*ew) / (w * h); a < 0.02*0.8 || a > 0.33*1.2 {
			t.Fatalf("sample %d: area fraction %.3f; want about 0.02 to 0.33", i, a)
		}
		if r := float64(eh) / float64(ew); r < 0.3*0.7 || r > 3.3/0.7 {
			t.Fatalf("sample %d: aspect %.3f; want about 0.3 to 3.3", i, r)
		}
	}
	// Some erasing draws find no box that fits (10 attempts), so slightly under p.
	if f := float64(erased) / n; f < 0.25 || f > 0.32 {
		t.Errorf("erased %d of %d samples (%.3f); want about 0.3", erased, n, f)
	}
}

// TestColorJitterHueZeroIsColorJitter: hue 0 draws and writes what ColorJitter did.
func TestColorJitterHueZeroIsColorJitter(t *testing.T) {
	src := hwc(30, 34, 3, func(y, x, c int) byte { return byte(x*7 + y*3 + c*50) })
	a, b := Compose(ColorJitter(0.4, 0.4, 0.4)), Compose(ColorJitterHue(0.4, 0.4, 0.4, 0))
	for i := range 20 {
		x, y := make([]byte, 3*30*34), make([]byte, 3*30*34)
		if err := a.NewWorker().Apply(x, src, rand.New(rand.NewPCG(1, uint64(i)))); err != nil {
			t.Fatal(err)
		}
		if err := b.NewWorker().Apply(y, src, rand.New(rand.NewPCG(1, uint64(i)))); err != nil {
			t.Fatal(err)
		}
		if string(x) != string(y) {
			t.Fatalf("sample %d: ColorJitterHue(..., 0) differs from ColorJitter", i)
		}
	}
}

func TestAugmentInvalid(t *testing.T) {
	bad := []Transform{
		RandAugment(2, 31), RandAugment(-1, 9), RandAugment(2, -1), AutoAugment(7),
		RandomErasing(1.5), RandomErasingWith(0.5, [2]float64{0.3, 0.1}, [2]float64{0.3, 3.3}, nil),
		RandomErasingWith(0.5, [2]float64{0.1, 0.3}, [2]float64{0, 3.3}, nil),
		RandomErasingWith(0.5, [2]float64{0.1, 0.3}, [2]float64{0.3, 3.3}, []byte{1, 2}),
		RandomGrayscale(-0.1), GaussianBlur(4, 0.1, 2), GaussianBlur(3, 0, 2), GaussianBlur(3, 2, 1), GaussianBlur(257, 1, 2),
		ColorJitterHue(0, 0, 0, 0.6), ColorJitterHue(0, 0, 0, -0.1),
		RandomAffine(Affine{Degrees: [2]float64{10, -10}}), RandomAffine(Affine{Translate: [2]float64{-0.1, 0}}),
		RandomAffine(Affine{Scale: [2]float64{0, 1}}), RandomAffine(Affine{Shear: [4]float64{-90, 0, 0, 0}}),
		RandomPerspective(1.5, 0.5), RandomPerspective(0.5, -1),
	}
	for _, tr := range bad {
		if _, err := Compose(tr).OutShape(Shape{C: 3, H: 20, W: 20}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: OutShape err = %v; want ErrInvalid", tr, err)
		}
	}
	// Geometry after a policy would not move what it drew.
	for _, tr := range []Transform{
		TrivialAugmentWide(), RandAugment(2, 9), AutoAugment(ImageNetPolicy), RandomErasing(0.5), RandomAffine(Affine{}),
		RandomPerspective(0.5, 0.5), GaussianBlur(3, 1, 2),
	} {
		if _, err := Compose(tr, CenterCrop(10)).OutShape(Shape{C: 3, H: 20, W: 20}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v then CenterCrop: OutShape err = %v; want ErrInvalid", tr, err)
		}
		if s, err := Compose(CenterCrop(10), tr).OutShape(Shape{C: 3, H: 20, W: 20}); err != nil || s != (Shape{C: 3, H: 10, W: 10}) {
			t.Errorf("CenterCrop then %v: OutShape = %v, %v; want 3x10x10", tr, s, err)
		}
	}
}

func TestChainAppend(t *testing.T) {
	p := Train(32).WithMaxPixels(1000)
	q := p.Append(TrivialAugmentWide(), RandomErasing(0.5))
	if got, want := q.String(), strings.TrimSuffix(p.String(), ")")+
		", TrivialAugmentWide(bins=31), RandomErasing(p=0.5, scale=[0.02 0.33], ratio=[0.3 3.3], value=[0]))"; got != want {
		t.Errorf("Append = %s; want %s", got, want)
	}
	if p.String() != Train(32).String() {
		t.Errorf("Append changed its receiver: %s", p)
	}
	if q.limit() != 1000 {
		t.Errorf("Append's pixel limit = %d; want 1000", q.limit())
	}
	if mean, _, ok := q.Normalization(); !ok || mean[0] != ImageNetMean[0] {
		t.Errorf("Append's Normalization = %v, %v; want ImageNet's", mean, ok)
	}
	var nilChain *Chain
	if got := nilChain.Append(RandomGrayscale(1)).String(); got != "Compose(RandomGrayscale(1))" {
		t.Errorf("nil.Append = %s", got)
	}
}

// TestAugmentTinyOutputs: every new transform runs on outputs of 1 to 3 pixels a side (a
// degenerate perspective, a blur wider than the image, no room for an erasing box).
func TestAugmentTinyOutputs(t *testing.T) {
	src := hwc(9, 7, 3, func(y, x, c int) byte { return byte(x*30 + y*20 + c*9) })
	ts := []Transform{TrivialAugmentWide(), RandAugment(4, 30), AutoAugment(ImageNetPolicy), AutoAugment(CIFAR10Policy), AutoAugment(SVHNPolicy),
		RandomErasing(1), GaussianBlur(9, 0.5, 3), RandomGrayscale(1), ColorJitterHue(0.5, 0.5, 0.5, 0.5),
		RandomAffine(Affine{Degrees: [2]float64{-90, 90}, Translate: [2]float64{0.5, 0.5}, Scale: [2]float64{0.5, 2}, Shear: [4]float64{-45, 45, -45, 45}}),
		RandomPerspective(1, 1)}
	for _, size := range [][2]int{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {3, 3}} {
		for _, tr := range ts {
			for _, c := range []int{1, 3} {
				p := Compose(ResizeTo(size[0], size[1]), tr)
				w := p.NewWorker()
				dst := make([]byte, c*size[0]*size[1])
				for i := range 100 {
					if err := w.Apply(dst, src, rand.New(rand.NewPCG(4, uint64(i)))); err != nil {
						t.Fatalf("%v on %dx%d, %d channels: %v", p, size[1], size[0], c, err)
					}
				}
			}
		}
	}
}

// BenchmarkPolicies is the cost of each augmentation on top of the training crop and flip to
// 224 x 224 from 256 x 320 raw pixels (one op: one sample), on one Worker; cpu-µs/op is the
// process's CPU time, steadier than wall time on a shared machine.
func BenchmarkPolicies(b *testing.B) {
	raw := hwc(256, 320, 3, func(y, x, c int) byte { return byte(x*3 + y*5 + c*40 + (x*y)%23) })
	base := []Transform{RandomResizedCrop(224), HorizontalFlip(0.5)}
	for _, bt := range []struct {
		name string
		t    Transform
	}{
		{"none", nil},
		{"trivialaugment", TrivialAugmentWide()},
		{"randaugment", RandAugment(2, 9)},
		{"autoaugment", AutoAugment(ImageNetPolicy)},
		{"erasing", RandomErasing(1)},
		{"blur23", GaussianBlur(23, 0.1, 2)},
		{"jitterhue", ColorJitterHue(0.4, 0.4, 0.4, 0.1)},
		{"affine", RandomAffine(Affine{Degrees: [2]float64{-15, 15}, Scale: [2]float64{0.9, 1.1}})},
		{"perspective", RandomPerspective(0.5, 1)},
	} {
		ts := base
		if bt.t != nil {
			ts = append(append([]Transform(nil), base...), bt.t)
		}
		p := Compose(ts...)
		b.Run(bt.name, func(b *testing.B) {
			w, r := p.NewWorker(), rng.NewSample()
			dst := make([]byte, 3*224*224)
			i := 0
			b.ReportAllocs()
			cpu := cpuSeconds()
			for b.Loop() {
				r.Reset(1, 0, i)
				i++
				if err := w.Apply(dst, raw, r.Rand); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds()-cpu)*1e6/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkAugOps is each operation of the policies alone, at a middle magnitude, on a 224 x 224
// output (the resampling of the crop included: see BenchmarkPolicies/none).
func BenchmarkAugOps(b *testing.B) {
	raw := hwc(256, 320, 3, func(y, x, c int) byte { return byte(x*3 + y*5 + c*40 + (x*y)%23) })
	s := augSpace{bins: 31, wide: true}
	for op := augIdentity; op <= augInvert; op++ {
		p := Compose(CenterCrop(224), fixedAug{op: op, mag: s.magnitude(op, 15, 224, 224), post: true})
		b.Run(op.String(), func(b *testing.B) {
			w := p.NewWorker()
			dst := make([]byte, 3*224*224)
			b.ReportAllocs()
			cpu := cpuSeconds()
			for b.Loop() {
				if err := w.Apply(dst, raw, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds()-cpu)*1e6/float64(b.N), "cpu-µs/op")
		})
	}
}

// TestFusedTranslateUnderOrientation: a translation fused into the geometry moves the output
// exactly as the pixel step does, after flips, quarter turns and a resized crop.
func TestFusedTranslateUnderOrientation(t *testing.T) {
	src := hwc(31, 44, 3, func(y, x, c int) byte { return byte(x*5 + y*7 + c*60) })
	for _, pre := range [][]Transform{
		{HorizontalFlip(1)}, {VerticalFlip(1)}, {Rotate90(1)}, {Rotate90(3), HorizontalFlip(1)},
		{ResizeTo(20, 26), Rotate90(1)}, {RandomCrop(24, 3), VerticalFlip(1)},
	} {
		for _, op := range []fixedAug{{op: augTranslateX, mag: 5.9}, {op: augTranslateY, mag: -7}, {op: augTranslateX, mag: -30}} {
			post := op
			post.post = true
			a, b := Compose(append(append([]Transform(nil), pre...), op)...), Compose(append(append([]Transform(nil), pre...), post)...)
			s, err := a.OutShape(Shape{C: 3, H: 31, W: 44})
			if err != nil {
				t.Fatal(err)
			}
			x, y := make([]byte, s.Len()), make([]byte, s.Len())
			if err := a.NewWorker().Apply(x, src, nil); err != nil {
				t.Fatal(err)
			}
			if err := b.NewWorker().Apply(y, src, nil); err != nil {
				t.Fatal(err)
			}
			if string(x) != string(y) {
				t.Errorf("%v: the fused translation differs from the pixel step", a)
			}
		}
	}
}

// TestParseAugment: the policies of stoke train --augment and train.Recipe.AutoAugment, by name;
// anything else is ErrInvalid.
func TestParseAugment(t *testing.T) {
	for s, want := range map[string]string{
		"": "<nil>", "none": "<nil>",
		"trivialaugment":    TrivialAugmentWide().String(),
		"randaugment":       RandAugment(2, 9).String(),
		"randaugment:0:0":   RandAugment(0, 0).String(),
		"randaugment:64:30": RandAugment(64, 30).String(),
		"autoaugment":       AutoAugment(ImageNetPolicy).String(),
	} {
		got, err := ParseAugment(s)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("ParseAugment(%q) = %v, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"randaugment:2", "randaugment:2:31", "randaugment:65:9", "randaugment:-1:9", "randaugment:x:9", "randaugment:2:9:1",
		"autoaugment:cifar10", "mixup", "TrivialAugment"} {
		if got, err := ParseAugment(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAugment(%q) = %v, %v; want ErrInvalid", s, got, err)
		}
	}
}
