package jpeg

import (
	"image"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/transforms/internal/pilref"
)

// compareExact compares the exact decode m of a w x h image over region r with PIL's rgb.
func compareExact(m *Image, rgb []byte, w int, r image.Rectangle) pilref.Stats {
	var s pilref.Stats
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			for c := range 3 {
				p := m.Planes[min(c, m.Comps-1)]
				s.Add(p.Pix[(y-p.Y0)*p.Stride+x-p.X0], rgb[(y*w+x)*3+c])
			}
		}
	}
	return s
}

// TestExactMatchesPIL decodes every image of the corpus in exact mode, whole and through a
// region, and compares with PIL's decode. libjpeg-turbo's islow IDCT, fancy upsampling and
// colour conversion are integer code ported bit for bit, so every image must be equal to PIL's
// on all but a few samples; the per-image figures are logged (go test -v).
func TestExactMatchesPIL(t *testing.T) {
	var dec Decoder
	var all pilref.Stats
	for _, im := range pilref.Corpus(t, 20) {
		t.Run(im.Name, func(t *testing.T) {
			w, h := im.RGB.W, im.RGB.H
			whole := image.Rect(0, 0, w, h)
			region := image.Rect(w/3, h/4, w/3+w/2, h/4+h/3)
			for _, r := range []image.Rectangle{{}, region} {
				if r.Empty() && r != (image.Rectangle{}) {
					continue
				}
				m, err := dec.Decode(im.Data, Options{Exact: true, Region: r})
				if err != nil {
					t.Fatal(err)
				}
				if m.Width != w || m.Height != h {
					t.Fatalf("Decode size = %dx%d; PIL says %dx%d", m.Width, m.Height, w, h)
				}
				cmp := whole
				if !r.Empty() {
					cmp = r
				}
				s := compareExact(m, im.RGB.Pix, w, cmp)
				if r.Empty() {
					all.Merge(s)
					t.Logf("exact vs PIL: %v", s)
				}
				// Measured: every sample equal. The margin allows a sample in 10,000 off by one.
				if s.Max > 1 || s.FracEqual() < 0.9999 {
					t.Errorf("region %v: exact vs PIL: %v; want max <= 1, >= 99.99%% equal", r, s)
				}
			}
		})
	}
	t.Logf("all images, exact vs PIL: %v", all)
}

// checkExactPlanes checks the shape of an exact decode: 1 or 3 full-resolution planes that
// hold their W x H samples.
func checkExactPlanes(t *testing.T, m *Image) {
	t.Helper()
	if m.Comps != 1 && (m.Comps != 3 || !m.RGB) {
		t.Fatalf("exact Decode: %d comps, RGB %v; want 1, or 3 RGB", m.Comps, m.RGB)
	}
	for i := range m.Comps {
		p := m.Planes[i]
		if p.SubX != 1 || p.SubY != 1 || p.W <= 0 || p.H <= 0 || p.X0+p.W > m.Width || p.Y0+p.H > m.Height ||
			p.Stride < p.W || len(p.Pix) < (p.H-1)*p.Stride+p.W {
			t.Fatalf("exact Decode plane %d: %+v of a %dx%d image",
				i, Plane{X0: p.X0, Y0: p.Y0, W: p.W, H: p.H, Stride: p.Stride, SubX: p.SubX, SubY: p.SubY}, m.Width, m.Height)
		}
	}
}

// TestRangeLimit compares rangeLimit with the table libjpeg builds (jdmaster.c's
// prepare_range_limit_table), indexed as jpeg_idct_islow does.
func TestRangeLimit(t *testing.T) {
	var table [5*256 + 128]byte // sample_range_limit, from -256
	simple := table[256:]
	for i := range 256 {
		simple[i] = byte(i)
	}
	post := simple[128:] // IDCT_range_limit
	for i := 128; i < 512; i++ {
		post[i] = 255
	}
	copy(post[4*256-128:], simple[:128])
	for x := int32(-5000); x <= 5000; x++ {
		if got, want := rangeLimit(x), post[x&1023]; got != want {
			t.Fatalf("rangeLimit(%d) = %d; want %d", x, got, want)
		}
	}
}

// idctIslowFull is idctIslow without the shortcuts for zero rows and columns: the C code's
// general path on every column and row (NO_ZERO_ROW_TEST).
func idctIslowFull(dst []byte, stride int, b *block) {
	const (
		d1 = islowConstBits - islowPass1Bits
		d2 = islowConstBits + islowPass1Bits + 3
	)
	var ws [blockSize]int32
	pass := func(in func(k int) int64, store func(k int, v int64)) {
		z2, z3 := in(2), in(6)
		z1 := (z2 + z3) * fix0_541196100
		tmp2 := z1 + z3*-fix1_847759065
		tmp3 := z1 + z2*fix0_765366865
		tmp0 := (in(0) + in(4)) << islowConstBits
		tmp1 := (in(0) - in(4)) << islowConstBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
		o0, o1, o2, o3 := islowOdd(in(7), in(5), in(3), in(1))
		for k, v := range [8]int64{tmp10 + o3, tmp11 + o2, tmp12 + o1, tmp13 + o0, tmp13 - o0, tmp12 - o1, tmp11 - o2, tmp10 - o3} {
			store(k, v)
		}
	}
	for c := range 8 {
		pass(func(k int) int64 { return int64(b[k*8+c]) }, func(k int, v int64) { ws[k*8+c] = int32((v + 1<<(d1-1)) >> d1) })
	}
	for r := range 8 {
		pass(func(k int) int64 { return int64(ws[r*8+k]) }, func(k int, v int64) { dst[r*stride+k] = rangeLimit(int32((v + 1<<(d2-1)) >> d2)) })
	}
}

// TestIslowShortcuts checks that idctIslow's shortcuts for zero AC columns and rows (as in C)
// compute what the general path computes, on blocks as sparse as photos' and on dense ones with
// large coefficients.
func TestIslowShortcuts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 20000 {
		var b block
		n := []int{1, 3, 6, 10, 15, 28, 64}[trial%7]
		for _, z := range unzig[:n] {
			if r.IntN(3) > 0 {
				b[z] = r.Int32N(2*2048) - 2048
				if trial%5 == 0 {
					b[z] *= 16
				}
			}
		}
		var got, want [64]byte
		orig := b
		idctIslow(got[:], 8, &b)
		idctIslowFull(want[:], 8, &b)
		if got != want || b != orig {
			t.Fatalf("block %v: idctIslow = %v; general path %v", orig, got, want)
		}
	}
}
