package jpeg

import "encoding/binary"

// bitReader is the entropy decoder of sequential scans (the fork's main speed-up over the
// standard library, which reads one stuffed byte per call): it reads the image bytes directly,
// 8 at a time into a 64-bit accumulator, removing stuffed zero bytes. At a marker or the end of
// the data it feeds zero bits and counts them; consuming any of them means the data was short.
//
// The accumulator is kept left-aligned: the next bit to decode is its top bit, so a table
// lookup is one shift by a constant and consuming bits one shift, and the decode's dependency
// chain runs through acc alone (n, the count of valid bits, is bookkeeping off that chain).
type bitReader struct {
	data   []byte
	pos    int    // next byte to read
	acc    uint64 // the top n bits are unread; the bits below are zero or the bytes from pos on
	n      uint
	marker bool // pos is at a marker (0xff, not 0x00) or at the end of data
	fake   uint // zero bits fed after the marker, the lowest of the unread bits
}

// fill tops the accumulator up to at least 56 bits. The caller ensures br.n < 64.
func (br *bitReader) fill() {
	// Fast path: the next 8 bytes hold no 0xff (no stuffing, no marker), so they go in with one
	// shift; the whole bytes that fit are consumed, and the part of the next one that also went
	// in is that byte's own leading bits, which the next fill ORs in again unchanged.
	if p := br.pos; p+8 <= len(br.data) && !br.marker {
		v := binary.BigEndian.Uint64(br.data[p:])
		if (^v-0x0101010101010101)&v&0x8080808080808080 == 0 { // no byte of ^v is zero
			br.acc |= v >> (br.n & 63)
			br.pos += int((63 - br.n) >> 3)
			br.n |= 56
			return
		}
	}
	for br.n <= 56 {
		c := byte(0)
		switch {
		case br.marker:
			br.fake += 8
		case br.pos >= len(br.data):
			br.marker = true
			continue
		default:
			c = br.data[br.pos]
			if c != 0xff {
				br.pos++
			} else if br.pos+1 < len(br.data) && br.data[br.pos+1] == 0 {
				br.pos += 2
			} else {
				br.marker = true
				continue
			}
		}
		br.acc |= uint64(c) << (56 - br.n)
		br.n += 8
	}
}

// short reports whether bits past the end of the scan's data were consumed.
func (br *bitReader) short() bool { return br.fake > br.n }

// decodeHuffman returns the next symbol of h. The caller ensures br.n >= 16.
func (br *bitReader) decodeHuffman(h *huffman) (uint8, error) {
	if v := h.lut[br.acc>>(64-lutSize)]; v != 0 {
		l := uint(v&0xff) - 1
		br.acc <<= l & 63
		br.n -= l
		return uint8(v >> 8), nil
	}
	for i := lutSize; i < maxCodeLength; i++ {
		code := int32(br.acc >> (63 - uint(i)))
		if code <= h.maxCodes[i] {
			br.acc <<= uint(i+1) & 63
			br.n -= uint(i + 1)
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], nil
		}
	}
	return 0, FormatError("bad Huffman code")
}

// extend takes the top s (1 to 16) bits of acc as a signed coefficient (RECEIVE and EXTEND,
// section F.2.2.1).
func extend(acc uint64, s uint8) int32 {
	x := int32(acc >> ((64 - uint(s)) & 63))
	if x < 1<<(s-1) {
		x += (-1 << s) + 1
	}
	return x
}

// decodeBlock decodes one block of a sequential scan into b (coefficient zig at b[zz[zig]]:
// natural order with unzig, transposed with unzigT; dequantized by qt), updating the
// component's DC predictor. It returns the zig-zag index of the last coefficient
// decoded (0: DC only). A nil b decodes and discards (a block outside the region).
func (br *bitReader) decodeBlock(b *block, dcH, acH *huffman, dc *int32, qt *block, zz *[blockSize]int) (int32, error) {
	if br.n < 32 {
		br.fill()
	}
	if f := dcH.fast[br.acc>>(64-fastBits)]; f != 0 {
		br.acc <<= uint(f) & 63 // f&0xff, masked further
		br.n -= uint(f & 0xff)
		*dc += f >> 16
	} else {
		t, err := br.decodeHuffman(dcH)
		if err != nil {
			return 0, err
		}
		if t > 16 {
			return 0, UnsupportedError("excessive DC component")
		}
		if br.n < 32 {
			br.fill()
		}
		if t != 0 {
			*dc += extend(br.acc, t)
			br.acc <<= t & 63 // t = 16 when masked stays 16
			br.n -= uint(t)
		}
	}
	if b == nil {
		return 0, br.skipAC(acH)
	}
	b[0] = *dc * qt[0]
	// The AC loop keeps the accumulator in locals (registers), writing them back to br around
	// the calls that use it. Shift counts are masked to 63 (they are below 64 already) so that
	// the compiler emits a bare shift. Codes that the fast table decodes run in an inner loop
	// without calls, so that nothing is spilled per coefficient; refills and longer codes go
	// round the outer loop. k is the zig-zag index of the next coefficient.
	fast := &acH.fast
	_, _ = fast[0], zz[0] // nil checks here, not in the loop
	last := int32(0)
	acc, n := br.acc, br.n
	for k := int32(1); k < blockSize; {
		if n < 32 {
			br.acc, br.n = acc, n
			br.fill()
			acc, n = br.acc, br.n
		}
		f := fast[acc>>(64-fastBits)]
		if f == 0 {
			br.acc, br.n = acc, n
			v, err := br.decodeHuffman(acH)
			if err != nil {
				return 0, err
			}
			acc, n = br.acc, br.n
			r, s := int32(v>>4), v&0x0f
			if s == 0 {
				if r != 0x0f {
					break // end of block
				}
				k += 16
				continue
			}
			z := k + r
			if z >= blockSize {
				break // as the standard library: a run past the block's end ends it
			}
			x := extend(acc, s)
			acc <<= s & 63
			n -= uint(s)
			b[zz[z&(blockSize-1)]&(blockSize-1)] = x * qt[z&(blockSize-1)]
			last, k = z, z+1
			continue
		}
		for { // f != 0 and n >= 16: f's code and extra bits are there
			acc <<= uint(f) & 63
			n -= uint(f & 0xff)
			switch r := (f >> 8) & 0xff; r {
			case fastEOB:
				br.acc, br.n = acc, n
				return last, nil
			case fastZRL:
				k += 16
			default:
				z := k + r
				if z >= blockSize {
					br.acc, br.n = acc, n
					return last, nil
				}
				z &= blockSize - 1 // z < blockSize: the mask only drops bounds checks
				b[zz[z]&(blockSize-1)] = (f >> 16) * qt[z]
				last, k = z, z+1
			}
			if k >= blockSize || n < 16 {
				break
			}
			if f = fast[acc>>(64-fastBits)]; f == 0 {
				break
			}
		}
	}
	br.acc, br.n = acc, n
	return last, nil
}

// skipAC reads past a block's AC coefficients (loops as in decodeBlock).
func (br *bitReader) skipAC(acH *huffman) error {
	fast := &acH.fast
	acc, n := br.acc, br.n
	for k := int32(1); k < blockSize; {
		if n < 32 {
			br.acc, br.n = acc, n
			br.fill()
			acc, n = br.acc, br.n
		}
		f := fast[acc>>(64-fastBits)]
		if f == 0 {
			br.acc, br.n = acc, n
			v, err := br.decodeHuffman(acH)
			if err != nil {
				return err
			}
			acc, n = br.acc, br.n
			r, s := int32(v>>4), v&0x0f
			if s == 0 {
				if r != 0x0f {
					break
				}
				k += 16
				continue
			}
			k += r + 1
			acc <<= s & 63
			n -= uint(s)
			continue
		}
		for {
			acc <<= uint(f) & 63
			n -= uint(f & 0xff)
			switch r := (f >> 8) & 0xff; r {
			case fastEOB:
				br.acc, br.n = acc, n
				return nil
			case fastZRL:
				k += 16
			default:
				k += r + 1
			}
			if k >= blockSize || n < 16 {
				break
			}
			if f = fast[acc>>(64-fastBits)]; f == 0 {
				break
			}
		}
	}
	br.acc, br.n = acc, n
	return nil
}

// restart consumes the restart marker expected after the current interval, which must follow
// the interval's data (less than one byte of padding) immediately; anything else is corrupt.
func (br *bitReader) restart(expected uint8) error {
	if br.n-br.fake >= 8 || br.pos+1 >= len(br.data) || br.data[br.pos] != 0xff || br.data[br.pos+1] != expected {
		return FormatError("bad RST marker")
	}
	*br = bitReader{data: br.data, pos: br.pos + 2}
	return nil
}
