package transforms

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// withoutSIMD runs f with the Go loops alone.
func withoutSIMD(t *testing.T, f func()) {
	t.Helper()
	saved := avx2
	avx2 = false
	defer func() { avx2 = saved }()
	f()
}

// TestVerticalSIMDMatchesGo compares the SIMD vertical pass with the Go loops, byte for byte, for
// every tap count, lengths around multiples of 8, and weights that over- and undershoot (bicubic
// and Lanczos lobes), including sums that leave [0, 255] both ways.
func TestVerticalSIMDMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no SIMD kernels on this CPU or build")
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for taps := 1; taps <= 10; taps++ {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 63, 224, 225} {
			for trial := range 20 {
				stride := n + rnd.IntN(5)
				src := make([]byte, taps*stride)
				for i := range src {
					src[i] = byte(rnd.Uint32())
				}
				w := make([]int32, taps)
				sum := int32(0)
				for i := range w[1:] {
					if rnd.IntN(4) > 0 { // some zero taps (padding) too
						w[i+1] = int32(rnd.IntN(1<<precBits)) - 1<<(precBits-2)
					}
					sum += w[i+1]
				}
				w[0] = 1<<precBits - sum
				if trial%5 == 0 {
					w[0] += int32(rnd.IntN(1<<(precBits-1))) - 1<<(precBits-2) // sums outside [0, 255]
				}
				want := make([]byte, n)
				withoutSIMD(t, func() { vertical(want, src, stride, w) })
				got := make([]byte, n)
				vertical(got, src, stride, w)
				if !bytes.Equal(got, want) {
					t.Fatalf("taps %d, n %d, weights %v:\n got %v\nwant %v", taps, n, w, got, want)
				}
			}
		}
	}
}

// TestYCbCrSIMDMatchesGo compares the SIMD colour conversion with the Go loop for CHW rows, plain
// and flipped, on random samples (every clamp is reached).
func TestYCbCrSIMDMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no SIMD kernels on this CPU or build")
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 7, 8, 9, 16, 23, 224, 231} {
		for _, du := range []int{1, -1, 3} {
			ys, cbs, crs := make([]byte, n), make([]byte, n), make([]byte, n)
			for i := range n {
				ys[i], cbs[i], crs[i] = byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())
			}
			chanStride := 3*n + 5
			o := 2
			switch du {
			case -1:
				o = n + 1
			case 3:
				chanStride = 1
			}
			want := make([]byte, 3*chanStride+3*n+8)
			got := make([]byte, len(want))
			withoutSIMD(t, func() { ycbcrRow(want, o, du, chanStride, ys, cbs, crs) })
			ycbcrRow(got, o, du, chanStride, ys, cbs, crs)
			if !bytes.Equal(got, want) {
				t.Fatalf("n %d, du %d:\n got %v\nwant %v", n, du, got, want)
			}
		}
	}
}

// TestHorizontalSIMDMatchesGo compares the SIMD horizontal pass with the Go kernels, on planar
// rows and on one channel of interleaved RGB, with random starts and weights (any int32, so
// rounding and clipping at both ends are exercised), and checks that it declines rows too short
// for its reads.
func TestHorizontalSIMDMatchesGo(t *testing.T) {
	if !avx2 {
		t.Skip("no SIMD kernels on this CPU or build")
	}
	kernels := map[int]func(dst, src []byte, ws *weights){2: horizontal2, 3: horizontal3, 4: horizontal4}
	rnd := rand.New(rand.NewPCG(7, 8))
	for trial := range 1200 {
		k, step := 2+trial%3, 1+2*(trial/3%2)
		w := k + rnd.IntN(300)
		n := 1 + rnd.IntN(300)
		// The plane's next bytes follow a row, except at its end.
		row := make([]byte, step*w+4)
		for i := range row {
			row[i] = byte(rnd.Uint32())
		}
		ws := weights{k: k, start: make([]int32, n), w: make([]int32, n*k)}
		for j := range n {
			ws.start[j] = int32(rnd.IntN(w - k + 1))
		}
		ws.start[rnd.IntN(n)] = int32(w - k) // the row's last pixel
		for i := range ws.w {
			if trial%2 == 0 {
				ws.w[i] = int32(rnd.Uint32())
			} else {
				ws.w[i] = int32(rnd.IntN(3<<precBits)) - 1<<precBits
			}
		}
		ws.finish()
		got, want := make([]byte, n), make([]byte, n)
		if step == 1 {
			kernels[k](want, row, &ws)
		} else {
			horizontalN(want, row, 3, &ws)
		}
		if !horizontalSIMD(got, row, step, &ws) {
			t.Fatalf("k %d, step %d, n %d: horizontalSIMD declined a row with room for its reads", k, step, n)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("k %d, step %d, w %d, n %d:\n got %v\nwant %v", k, step, w, n, got, want)
		}
		// A row that ends at its last pixel leaves room for 4-tap reads only.
		clear(got)
		if ran := horizontalSIMD(got, row[:step*(w-1)+1], step, &ws); ran != (k == 4) || ran && !bytes.Equal(got, want) {
			t.Fatalf("k %d, step %d: on a row that ends at its last pixel horizontalSIMD ran = %v, output %v; want ran = %v, output %v", k, step, ran, got, k == 4, want)
		}
	}
}
