package jpeg

import (
	"math/rand/v2"
	"testing"
)

// fastBySearch is the reference: for each entry, search the code by increasing length.
func fastBySearch(h *huffman, dc bool) (t [1 << fastBits]int32) {
	for p := range int32(1 << fastBits) {
		for l := int32(1); l <= fastBits; l++ {
			code := p >> (fastBits - l)
			if h.maxCodes[l-1] < 0 || code > h.maxCodes[l-1] || code < h.minCodes[l-1] {
				continue
			}
			rs := h.vals[h.valsIndices[l-1]+code-h.minCodes[l-1]]
			run, s := int32(rs>>4), int32(rs&0x0f)
			if dc {
				run, s = 0, int32(rs)
			}
			switch {
			case dc && s == 0:
				t[p] = l
			case s == 0 && run == 0:
				t[p] = fastEOB<<8 | l
			case s == 0 && run == 15:
				t[p] = fastZRL<<8 | l
			case s != 0 && l+s <= fastBits:
				v := (p >> (fastBits - l - s)) & (1<<s - 1)
				if v < 1<<(s-1) {
					v += (-1 << s) + 1
				}
				t[p] = v<<16 | run<<8 | (l + s)
			}
			break
		}
	}
	return
}

// TestFastMatchesSearch checks the range fill of buildFast against the per-entry search on
// random canonical codes, well-formed and oversubscribed (corrupt), as DC and as AC tables.
func TestFastMatchesSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for trial := range 5000 {
		h, counts, ok := randomCode(r, trial)
		if !ok {
			continue
		}
		for _, dc := range []bool{false, true} {
			want := fastBySearch(&h, dc)
			h.buildFast(dc)
			if h.fast != want {
				t.Fatalf("trial %d, dc %v, counts %v: the tables differ", trial, dc, counts)
			}
		}
	}
}

// randomCode returns a random canonical code as processDHT derives it (counts of random sizes,
// well-formed or oversubscribed, and random values), or false when it has no or too many codes.
func randomCode(r *rand.Rand, trial int) (h huffman, counts [16]int, ok bool) {
	total := 0
	for i := range counts {
		if trial%2 == 0 {
			counts[i] = r.IntN(3)
		} else {
			counts[i] = r.IntN(1 << min(i+1, 8))
		}
		total += counts[i]
	}
	if total == 0 || total > 256 {
		return h, counts, false
	}
	for i := range h.vals {
		h.vals[i] = uint8(r.Uint32())
	}
	code, idx := int32(0), int32(0)
	for i := range 16 {
		if counts[i] == 0 {
			h.minCodes[i], h.maxCodes[i] = -1, -1
		} else {
			h.minCodes[i] = code
			code += int32(counts[i])
			h.maxCodes[i] = code - 1
			h.valsIndices[i] = idx
			idx += int32(counts[i])
		}
		code <<= 1
	}
	return h, counts, true
}

// TestSkipMatchesFast reads past the AC codes of random bit strings (zero bits after their 64)
// from random zig-zag positions with skipBlock's two lookups (skip, then fast one code at a
// time) and one code at a time with fast alone, as far as fast decodes, and checks that both
// end in the same place: bits consumed, position, and whether the block ended.
func TestSkipMatchesFast(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for trial := range 3000 {
		h, counts, ok := randomCode(r, trial)
		if !ok {
			continue
		}
		h.buildFast(false)
		h.buildSkip()
		// step reads one code with fast: its bits, the new position, whether the block ended,
		// and false if fast does not hold it.
		step := func(acc uint64, k int32) (uint, int32, bool, bool) {
			f := h.fast[acc>>(64-fastBits)]
			if f == 0 {
				return 0, k, false, false
			}
			switch run := (f >> 8) & 0xff; run {
			case fastEOB:
				return uint(f & 0xff), k, true, true
			case fastZRL:
				k += 16
			default:
				k += run + 1
			}
			return uint(f & 0xff), k, k >= blockSize, true
		}
		for range 20 {
			acc0, k0 := r.Uint64(), 1+r.Int32N(blockSize-1)
			type end struct {
				used uint
				k    int32
				done bool
			}
			var want, got end
			for acc, k := acc0, k0; ; {
				l, nk, done, ok := step(acc, k)
				if !ok {
					break
				}
				acc <<= l
				want = end{want.used + l, nk, done}
				if k = nk; done {
					break
				}
			}
			for acc, k := acc0, k0; ; {
				if e := h.skip[acc>>(64-skipBits)]; k+int32(e>>8&0x7f) < blockSize {
					l := uint(e & 0xff)
					acc <<= l
					k += int32(e >> 8 & 0x7f)
					got = end{got.used + l, k, e&skipEOB != 0}
					if got.done {
						break
					}
					continue
				}
				l, nk, done, ok := step(acc, k)
				if !ok {
					break
				}
				acc <<= l
				got = end{got.used + l, nk, done}
				if k = nk; done {
					break
				}
			}
			if got != want {
				t.Fatalf("trial %d, counts %v, acc %#x, k %d: skip reads to %+v; one code at a time to %+v", trial, counts, acc0, k0, got, want)
			}
		}
	}
}
