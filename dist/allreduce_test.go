package dist

import (
	"context"
	"math"
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

func TestAllReduceBF16(t *testing.T) {
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
						b[i] = bf16Pattern(g.Rank(), i)
					}
					bufs[g.Rank()] = b
					return g.AllReduceBF16(context.Background(), b, op)
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("AllReduceBF16(rank %d) = %v", r, err)
					}
				}
				for r := range w {
					for i, v := range bufs[r] {
						if want := ringSumBF16(w, n, i, bf16Pattern, op); v != want {
							t.Fatalf("w=%d n=%d %v: rank %d element %d = %04x; want %04x", w, n, op, r, i, v, want)
						}
					}
				}
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
