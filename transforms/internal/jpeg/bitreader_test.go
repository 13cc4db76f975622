package jpeg

import (
	"math/rand/v2"
	"testing"
)

// TestBitReaderMatchesBitByBit reads random entropy-coded segments (runs without 0xff for the
// 8-byte refill, stuffed 0xff00 pairs, then a marker or the end of the data) in random widths
// through the left-aligned accumulator, and checks every bit against a byte-at-a-time
// destuffing reference: zero bits past the segment, short() once one of them is consumed,
// and restart() accepting the RST marker exactly when fewer than 8 real bits are left.
func TestBitReaderMatchesBitByBit(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 3000 {
		var data, real []byte // real: the segment's bytes with the stuffing removed
		for range r.IntN(60) {
			switch c := byte(r.Uint32()); {
			case r.IntN(8) == 0:
				data, real = append(data, 0xff, 0x00), append(real, 0xff)
			case c != 0xff:
				data, real = append(data, c), append(real, c)
			}
		}
		end := r.IntN(3) // 0: the data ends; 1: RST0 and more data; 2: EOI
		switch end {
		case 1:
			data = append(data, 0xff, rst0Marker, 0x12, 0x34)
		case 2:
			data = append(data, 0xff, eoiMarker)
		}
		bit := func(i int) uint64 { // bit i of the segment, zero past it
			if i/8 >= len(real) {
				return 0
			}
			return uint64(real[i/8]>>(7-i%8)) & 1
		}
		br := bitReader{data: data}
		read := 0
		for read < 8*len(real)+40 {
			if br.n < 32 {
				br.fill()
			}
			w := 1 + r.IntN(16)
			got := br.acc >> (64 - w)
			br.acc <<= w
			br.n -= uint(w)
			var want uint64
			for i := range w {
				want = want<<1 | bit(read+i)
			}
			read += w
			if got != want {
				t.Fatalf("trial %d: bits %d-%d = %#x; want %#x", trial, read-w, read, got, want)
			}
			if short := read > 8*len(real); br.short() != short {
				t.Fatalf("trial %d: after %d of %d bits, short() = %v", trial, read, 8*len(real), br.short())
			}
			if left := 8*len(real) - read; end == 1 && left >= 0 {
				rb := br
				if err := rb.restart(rst0Marker); (err == nil) != (left < 8) {
					t.Fatalf("trial %d: %d real bits left: restart() = %v", trial, left, err)
				}
				if left < 8 && rb.pos != len(data)-2 {
					t.Fatalf("trial %d: restart() left pos at %d; want %d", trial, rb.pos, len(data)-2)
				}
			}
		}
	}
}
