package collective

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAllReduceGoroutines(t *testing.T) {
	sizes := []int{0, 1, 2, 3, 5, 7, 64, 1001, 4099}
	for _, w := range []int{2, 3, 4} {
		gs := startGroups(t, w, 5*time.Second)
		for _, chunk := range []int{64, defaultChunk} {
			for _, g := range gs {
				g.ring.chunkBytes = chunk
			}
			for _, op := range []Op{Sum, Avg} {
				for _, n := range sizes {
					bufs := make([][]float32, w)
					errs := onAll(gs, func(g *Group) error {
						b := make([]float32, n)
						for i := range b {
							b[i] = pattern(g.Rank(), i)
						}
						bufs[g.Rank()] = b
						return g.AllReduce(context.Background(), b, op)
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("w=%d n=%d %v: AllReduce(rank %d) = %v", w, n, op, r, err)
						}
					}
					if err := checkSum(w, bufs[0], op); err != nil {
						t.Fatalf("w=%d n=%d chunk=%d %v: %v", w, n, chunk, op, err)
					}
					for r := 1; r < w; r++ {
						for i := range bufs[r] {
							if math.Float32bits(bufs[r][i]) != math.Float32bits(bufs[0][i]) {
								t.Fatalf("w=%d n=%d: rank %d element %d = %v; rank 0 has %v", w, n, r, i, bufs[r][i], bufs[0][i])
							}
						}
					}
				}
			}
		}
	}
}

func bf16Pattern(r, i int) uint16 { return F32ToBF16(pattern(r, i) * 3) }

// fp16Pattern is pattern in fp16, every seventh element near 40000 (so that
// two ranks' sum overflows fp16 to ±Inf) and every eleventh a subnormal.
func fp16Pattern(r, i int) uint16 {
	switch {
	case i%7 == 3:
		return F32ToFP16(40000 + pattern(r, i))
	case i%11 == 5:
		return F32ToFP16(pattern(r, i) * 0x1p-18)
	}
	return F32ToFP16(pattern(r, i) * 3)
}

// TestAllReduce16 holds AllReduceBF16 and AllReduceFP16 to the ring's order
// of float32 additions, each rounded to the format once, on every rank.
func TestAllReduce16(t *testing.T) {
	for _, f := range []struct {
		name    string
		reduce  func(g *Group, b []uint16, op Op) error
		pattern func(r, i int) uint16
		format  format16
	}{
		{"bf16", func(g *Group, b []uint16, op Op) error { return g.AllReduceBF16(context.Background(), b, op) }, bf16Pattern, bf16Format},
		{"fp16", func(g *Group, b []uint16, op Op) error { return g.AllReduceFP16(context.Background(), b, op) }, fp16Pattern, fp16Format},
	} {
		for _, w := range []int{2, 3} {
			gs := startGroups(t, w, 5*time.Second)
			for _, g := range gs {
				g.ring.chunkBytes = 32
			}
			for _, op := range []Op{Sum, Avg} {
				for _, n := range []int{0, 1, 5, 333} {
					bufs := make([][]uint16, w)
					errs := onAll(gs, func(g *Group) error {
						b := make([]uint16, n)
						for i := range b {
							b[i] = f.pattern(g.Rank(), i)
						}
						bufs[g.Rank()] = b
						return f.reduce(g, b, op)
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("%s: all-reduce (rank %d) = %v", f.name, r, err)
						}
					}
					infs := 0
					for r := range w {
						for i, v := range bufs[r] {
							if want := ringSum16(w, n, i, f.pattern, op, f.format); v != want {
								t.Fatalf("%s w=%d n=%d %v: rank %d element %d = %04x; want %04x", f.name, w, n, op, r, i, v, want)
							}
							if v&0x7fff == 0x7c00 {
								infs++
							}
						}
					}
					// 40000 on every rank: the fp16 sum overflows to Inf, and so does Avg's (the
					// total overflows before it is divided).
					if wantInf := f.name == "fp16" && n == 333; wantInf != (infs == w*48) {
						t.Errorf("%s w=%d n=%d %v: %d overflowed elements over the ranks; want %d", f.name, w, n, op, infs, w*48)
					}
				}
			}
		}
	}
}

// fp16Value decodes IEEE half bits in float64, independently of FP16ToF32.
func fp16Value(h uint16) float64 {
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	v := math.Ldexp(m, -24)
	switch {
	case e == 0x1f && m == 0:
		v = math.Inf(1)
	case e == 0x1f:
		v = math.NaN()
	case e > 0:
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// TestFP16Exhaustive: every one of the 65536 fp16 bit patterns widens to its
// value exactly and rounds back to itself (a NaN to a NaN of the same sign);
// the float32 half way between two neighbouring halves rounds to the one
// with the even significand, and a float32 either side of it to the nearer.
func TestFP16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		v, want := FP16ToF32(h), fp16Value(h)
		if math.IsNaN(want) {
			if back := F32ToFP16(v); !math.IsNaN(float64(v)) || back&0x7c00 != 0x7c00 || back&0x3ff == 0 || back&0x8000 != h&0x8000 {
				t.Fatalf("fp16 NaN %04x widens to %v and rounds back to %04x", h, v, back)
			}
			continue
		}
		if float64(v) != want || math.Signbit(float64(v)) != (h&0x8000 != 0) {
			t.Fatalf("FP16ToF32(%04x) = %v; want %v", h, v, want)
		}
		if back := F32ToFP16(v); back != h {
			t.Fatalf("F32ToFP16(FP16ToF32(%04x)) = %04x", h, back)
		}
		if h&0x7fff >= 0x7bff { // the largest finite: its upper neighbour is Inf, below
			continue
		}
		// The midpoint to the next half up in magnitude (exact in float32: 12 significand bits).
		next := fp16Value(h + 1)
		mid := float32((want + next) / 2)
		even := h
		if h&1 != 0 {
			even = h + 1
		}
		if got := F32ToFP16(mid); got != even {
			t.Fatalf("F32ToFP16(%v), half way between %04x and %04x, = %04x; want the even %04x", mid, h, h+1, got, even)
		}
		below := math.Nextafter32(mid, float32(want))
		above := math.Nextafter32(mid, float32(next))
		if got := F32ToFP16(below); got != h {
			t.Fatalf("F32ToFP16(%v), just nearer %04x than %04x, = %04x", below, h, h+1, got)
		}
		if got := F32ToFP16(above); got != h+1 {
			t.Fatalf("F32ToFP16(%v), just nearer %04x than %04x, = %04x", above, h+1, h, got)
		}
	}
}

func TestF32ToFP16(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65519.996, 0x7bff},                          // below the tie with 2^16: the largest finite
		{65520, 0x7c00},                              // the tie: to the even 2^16, which is Inf
		{-65520, 0xfc00},                             // and -Inf
		{math.MaxFloat32, 0x7c00},                    // overflow to Inf
		{float32(math.Inf(-1)), 0xfc00},              // Inf stays Inf
		{1 + p(-11), 0x3c00},                         // a tie: to the even 1
		{1 + 3*p(-11), 0x3c02},                       // a tie: up to the even 1+2^-9
		{p(-14), 0x0400},                             // the smallest normal
		{p(-14) - p(-25), 0x0400},                    // a subnormal tie, to the even 2^-14
		{p(-24), 0x0001},                             // the smallest subnormal
		{-p(-24), 0x8001},                            // negative
		{3 * p(-25), 0x0002},                         // a subnormal tie: to the even 2*2^-24
		{p(-25), 0x0000},                             // the tie with 0: to 0
		{math.Nextafter32(p(-25), 1), 0x0001},        // just past it: the smallest subnormal
		{math.Float32frombits(1), 0x0000},            // fp32's smallest subnormal: 0
		{float32(math.Copysign(0, -1)), 0x8000},      // -0 stays -0
		{1000 * p(-24), 1000},                        // a subnormal, exact
		{float32(math.Ldexp(1023.5, -24)), 0x0400},   // the largest subnormal's tie up: to the even normal
		{float32(math.Ldexp(1022.5, -24)), 1022},     // a subnormal tie down to even
		{math.Float32frombits(0x33000001), 0x0001},   // the smallest float above 2^-25
		{math.Float32frombits(0x477fefff), 0x7bff},   // just below the overflow tie
		{float32(math.Ldexp(2049, -11)), 0x3c00 + 0}, // 1+2^-11: tie, even
		{float32(math.Ldexp(2051, -11)), 0x3c00 + 2}, // 1+3*2^-11: tie, even up
		{float32(math.Ldexp(2050, -11)), 0x3c00 + 1}, // exact
	} {
		if got := F32ToFP16(tc.in); got != tc.want {
			t.Errorf("F32ToFP16(%v = %08x) = %04x; want %04x", tc.in, math.Float32bits(tc.in), got, tc.want)
		}
	}
	if got := F32ToFP16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("F32ToFP16(NaN) = %04x; want a NaN", got)
	}
}

// TestF32ToFP16Nearest: for random float32s over fp16's range and beyond,
// F32ToFP16 gives the nearest half (ties to even), by comparison with the
// neighbours in float64.
func TestF32ToFP16Nearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200_000 {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.Abs(float64(f)) >= 65520 {
			continue
		}
		h := F32ToFP16(f)
		d := math.Abs(float64(f) - fp16Value(h))
		for _, o := range []uint16{h - 1, h + 1} {
			if o&0x7fff > 0x7bff || (o^h)&0x8000 != 0 {
				continue // past the largest finite, or across zero
			}
			od := math.Abs(float64(f) - fp16Value(o))
			if od < d || od == d && h&1 != 0 {
				t.Fatalf("F32ToFP16(%v) = %04x (%v); %04x (%v) is nearer or the even tie", f, h, fp16Value(h), o, fp16Value(o))
			}
		}
	}
}

func TestF32ToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie: to even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie: to even (up)
		{math.Float32frombits(0x3f808001), 0x3f81},
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float rounds to +Inf
	} {
		if got := F32ToBF16(tc.in); got != tc.want {
			t.Errorf("F32ToBF16(%08x) = %04x; want %04x", math.Float32bits(tc.in), got, tc.want)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("F32ToBF16(NaN) = %04x; want a NaN", got)
	}
}
