package transforms

import (
	"errors"
	"math"
	"testing"
)

// mixBatch is n CHW images of s whose pixels are distinct per image, channel and place.
func mixBatch(n int, s Shape) []byte {
	b := make([]byte, n*s.Len())
	for i := range b {
		img, k := i/s.Len(), i%s.Len()
		b[i] = byte(img*61 + k*7 + (k/s.W)*3)
	}
	return b
}

// TestCutMix: inside the box each image holds its neighbour's original pixels (image i-1's;
// image 0 the last one's), outside its own, and Lambda is the share outside.
func TestCutMix(t *testing.T) {
	s := Shape{C: 3, H: 13, W: 17}
	const n = 5
	m := Mix{CutMixAlpha: 1, Seed: 3}
	boxes := 0
	for seq := range 200 {
		orig := mixBatch(n, s)
		b := append([]byte(nil), orig...)
		p, err := m.Apply(b, n, s, 2, seq)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Mixed || !p.CutMix {
			t.Fatalf("batch %d: %+v; want CutMix (MixUp disabled, P 1)", seq, p)
		}
		if p != m.Params(2, seq, s) {
			t.Fatalf("batch %d: Apply drew %+v, Params %+v", seq, p, m.Params(2, seq, s))
		}
		if p.X1 < 0 || p.Y1 < 0 || p.X2 > s.W || p.Y2 > s.H || p.X1 > p.X2 || p.Y1 > p.Y2 {
			t.Fatalf("batch %d: box %+v outside %v", seq, p, s)
		}
		area := (p.X2 - p.X1) * (p.Y2 - p.Y1)
		if area > 0 {
			boxes++
		}
		if want := 1 - float64(area)/float64(s.W*s.H); p.Lambda != want {
			t.Fatalf("batch %d: Lambda %v; want %v", seq, p.Lambda, want)
		}
		for i := range n {
			src := (i + n - 1) % n
			for c := range s.C {
				for y := range s.H {
					for x := range s.W {
						k := (c*s.H+y)*s.W + x
						want := orig[i*s.Len()+k]
						if x >= p.X1 && x < p.X2 && y >= p.Y1 && y < p.Y2 {
							want = orig[src*s.Len()+k]
						}
						if got := b[i*s.Len()+k]; got != want {
							t.Fatalf("batch %d image %d (%d,%d,%d) = %d; want %d (box %+v)", seq, i, c, y, x, got, want, p)
						}
					}
				}
			}
		}
	}
	if boxes < 150 {
		t.Errorf("%d of 200 batches got a non-empty box", boxes)
	}
}

// TestMixUp: every byte is lambda x its own + (1 - lambda) x its neighbour's, rounded half up.
func TestMixUp(t *testing.T) {
	s := Shape{C: 1, H: 6, W: 7}
	const n = 3
	m := Mix{MixUpAlpha: 0.2, Seed: 9}
	for seq := range 50 {
		orig := mixBatch(n, s)
		b := append([]byte(nil), orig...)
		p, err := m.Apply(b, n, s, 0, seq)
		if err != nil || !p.Mixed || p.CutMix || !(p.Lambda >= 0 && p.Lambda <= 1) {
			t.Fatalf("batch %d: %+v, %v; want MixUp with Lambda in [0, 1]", seq, p, err)
		}
		for i := range n {
			src := (i + n - 1) % n
			for k := range s.Len() {
				want := math.Floor(p.Lambda*float64(orig[i*s.Len()+k]) + (1-p.Lambda)*float64(orig[src*s.Len()+k]) + 0.5)
				if got := float64(b[i*s.Len()+k]); got != want {
					t.Fatalf("batch %d image %d byte %d = %v; want %.3f", seq, i, k, got, want)
				}
			}
		}
	}
}

// TestMixDraws: Lambda is Beta(alpha, alpha) (mean 1/2, variance 1/(4(2 alpha + 1))), the two
// methods share the batches, P leaves the rest alone, and the draws depend on (seed, epoch, seq).
func TestMixDraws(t *testing.T) {
	s := Shape{C: 3, H: 224, W: 224}
	const n = 4000
	for _, alpha := range []float64{0.2, 1, 3} {
		var sum, sq float64
		m := Mix{MixUpAlpha: alpha, Seed: 1}
		for i := range n {
			l := m.Params(0, i, s).Lambda
			sum += l
			sq += l * l
		}
		mean, vr := sum/n, sq/n-(sum/n)*(sum/n)
		want := 1 / (4 * (2*alpha + 1))
		if math.Abs(mean-0.5) > 4*math.Sqrt(want/n) || math.Abs(vr-want) > 0.1*want {
			t.Errorf("Beta(%v, %v): mean %.4f variance %.4f; want 0.5 and %.4f", alpha, alpha, mean, vr, want)
		}
	}
	m := Mix{MixUpAlpha: 0.2, CutMixAlpha: 1, P: 0.5, Seed: 4}
	var mixed, cut int
	for i := range n {
		p := m.Params(1, i, s)
		if p.Mixed {
			mixed++
			if p.CutMix {
				cut++
			}
		} else if p.Lambda != 1 {
			t.Fatalf("an unmixed batch has Lambda %v", p.Lambda)
		}
	}
	if math.Abs(float64(mixed)-n/2) > 4*math.Sqrt(n/4) || math.Abs(float64(cut)-float64(mixed)/2) > 4*math.Sqrt(float64(mixed)/4) {
		t.Errorf("P 0.5: %d of %d batches mixed, %d by CutMix; want about half, and half of those", mixed, n, cut)
	}
	other := m
	other.Seed++
	sameEpoch, sameSeed := 0, 0
	for i := range 100 {
		p := m.Params(1, i, s)
		if p != m.Params(1, i, s) {
			t.Fatalf("batch %d: Params differs between two calls", i)
		}
		if p == m.Params(2, i, s) {
			sameEpoch++
		}
		if p == other.Params(1, i, s) {
			sameSeed++
		}
	}
	if sameEpoch > 60 || sameSeed > 60 { // about half are unmixed either way
		t.Errorf("of 100 batches, %d equal another epoch's and %d another seed's; want the draws to move", sameEpoch, sameSeed)
	}
}

func TestSoftTargets(t *testing.T) {
	p := MixParams{Mixed: true, Lambda: 0.75}
	dst := make([]float32, 3*4)
	if err := p.SoftTargets(dst, []int32{2, 0, 2}, 4); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 0, 1, 0, 0.75, 0, 0.25, 0, 0.25, 0, 0.75, 0} // 0 and 2 share label 2
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("SoftTargets = %v; want %v", dst, want)
		}
	}
	if err := p.SoftTargets(dst, []int32{1, 4, 0}, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("label 4 of 4 classes: err = %v; want ErrInvalid", err)
	}
	if err := (MixParams{Lambda: 1}).SoftTargets(dst, []int32{1, 3, 0}, 4); err != nil || dst[1] != 1 || dst[7] != 1 || dst[8] != 1 {
		t.Errorf("unmixed SoftTargets = %v, %v; want one-hot", dst, err)
	}
}

func TestMixInvalid(t *testing.T) {
	s := Shape{C: 3, H: 4, W: 4}
	for _, m := range []Mix{{MixUpAlpha: -1}, {CutMixAlpha: math.Inf(1)}, {MixUpAlpha: 1, P: 1.5}, {MixUpAlpha: math.NaN()}} {
		if _, err := m.Apply(make([]byte, 2*s.Len()), 2, s, 0, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v; want ErrInvalid", m, err)
		}
	}
	if _, err := (Mix{MixUpAlpha: 1}).Apply(make([]byte, s.Len()), 2, s, 0, 0); !errors.Is(err, ErrShape) {
		t.Errorf("2 images in the bytes of 1: err = %v; want ErrShape", err)
	}
}
