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
		var h huffman
		var counts [16]int
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
			continue
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
		for _, dc := range []bool{false, true} {
			want := fastBySearch(&h, dc)
			h.buildFast(dc)
			if h.fast != want {
				t.Fatalf("trial %d, dc %v, counts %v: the tables differ", trial, dc, counts)
			}
		}
	}
}
