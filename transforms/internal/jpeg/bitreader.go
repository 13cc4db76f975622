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

// fill tops the accumulator up to at least 56 bits. The caller ensures br.n < 32.
func (br *bitReader) fill() {
	if p := br.pos; !br.marker {
		if br.acc, br.n, br.pos = refill8(br.data, p, br.acc, br.n); br.pos != p {
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
// decoded (0: DC only).
func (br *bitReader) decodeBlock(b *block, dcH, acH *huffman, dc *int32, qt *block, zz *[blockSize]int) (int32, error) {
	// The block keeps the accumulator in locals (registers), writing them back to br around
	// the calls that use it; refills take 8 bytes inline (refill8). Shift counts are masked to
	// 63 (they are below 64 already) so that the compiler emits a bare shift. In the AC loop,
	// a lookup in pair decodes one or two coefficients without a call; the end of the block,
	// runs of 16 zeros and coefficients pair does not hold go to fast, in an inner loop while
	// it decodes them, and codes longer than fastBits to the slow path. k is the zig-zag index
	// of the next coefficient.
	acc, n := br.acc, br.n
	if n < 32 {
		if acc, n, br.pos = refill8(br.data, br.pos, acc, n); n < 32 {
			acc, n = br.refill(acc, n)
		}
	}
	if f := dcH.fast[acc>>(64-fastBits)]; f != 0 {
		acc <<= uint32(f) & 63 // f&0xff, masked further
		n -= uint(f & 0xff)
		*dc += f >> 16
	} else {
		br.acc, br.n = acc, n
		if err := br.decodeDC(dcH, dc); err != nil {
			return 0, err
		}
		acc, n = br.acc, br.n
	}
	b[0] = *dc * qt[0]
	if !acH.pairReady {
		acH.buildPair()
	}
	fast, pair := &acH.fast, acH.pair
	_, _ = fast[0], zz[0] // nil checks here, not in the loop
	last := int32(0)
	for k := int32(1); k < blockSize; {
		if n < 32 {
			if acc, n, br.pos = refill8(br.data, br.pos, acc, n); n < 32 {
				acc, n = br.refill(acc, n)
			}
		}
		// Mostly, one lookup decodes one or two coefficients (see huffman.pair); without a
		// second, the first is written twice.
		p := pair[acc>>(64-fastBits)]
		if z1 := k + int32(p>>8)&0xff; z1+int32(p>>32)&0xff < blockSize {
			z2 := (z1 + int32(p>>32)&0xff) & (blockSize - 1)
			z1 &= blockSize - 1
			acc <<= uint32(p) & 63
			n -= uint(p & 0xff)
			b[zz[z1]&(blockSize-1)] = int32(int16(p>>16)) * qt[z1]
			b[zz[z2]&(blockSize-1)] = int32(int16(p>>48)) * qt[z2]
			last, k = z2, z2+1
			continue
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
			acc <<= uint32(f) & 63
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

// decodeDC decodes a DC difference into *dc as decodeBlock does, for a code that its fast
// table does not hold. The caller ensures br.n >= 32.
func (br *bitReader) decodeDC(dcH *huffman, dc *int32) error {
	t, err := br.decodeHuffman(dcH)
	if err != nil {
		return err
	}
	if t > 16 {
		return UnsupportedError("excessive DC component")
	}
	if br.n < 32 {
		br.fill()
	}
	if t != 0 {
		*dc += extend(br.acc, t)
		br.acc <<= t & 63 // t = 16 when masked stays 16
		br.n -= uint(t)
	}
	return nil
}

// skipBlock reads past a block outside the region, updating the component's DC predictor
// (loops as in decodeBlock, with skip in place of pair once it is built).
func (br *bitReader) skipBlock(dcH, acH *huffman, dc *int32) error {
	acc, n := br.acc, br.n
	if n < 32 {
		if acc, n, br.pos = refill8(br.data, br.pos, acc, n); n < 32 {
			acc, n = br.refill(acc, n)
		}
	}
	if f := dcH.fast[acc>>(64-fastBits)]; f != 0 {
		acc <<= uint32(f) & 63
		n -= uint(f & 0xff)
		*dc += f >> 16
	} else {
		br.acc, br.n = acc, n
		if err := br.decodeDC(dcH, dc); err != nil {
			return err
		}
		acc, n = br.acc, br.n
	}
	fast, skip, multi := &acH.fast, acH.skip, acH.skipReady
	for k := int32(1); k < blockSize; {
		if n < 32 {
			if acc, n, br.pos = refill8(br.data, br.pos, acc, n); n < 32 {
				acc, n = br.refill(acc, n)
			}
		}
		// Mostly, one lookup reads past several codes, when they leave the block unfinished or
		// end it with an end of block (see huffman.skip). The rest goes one code at a time.
		if multi {
			if e := skip[acc>>(64-skipBits)]; k+int32(e>>8&0x7f) < blockSize {
				acc <<= uint32(e) & 63
				n -= uint(e & 0xff)
				if e&skipEOB != 0 {
					br.acc, br.n = acc, n
					return nil
				}
				k += int32(e >> 8 & 0x7f)
				continue
			}
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
		acc <<= uint32(f) & 63
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
	}
	br.acc, br.n = acc, n
	return nil
}

// refill8 is fill's fast path, which the decode loops inline on the accumulator they keep in
// locals (acc, n; pos is the next byte to read): when the 8 bytes at pos hold no 0xff (no
// stuffing, no marker), they go in with one shift, the whole bytes that fit are consumed, and
// the part of the next one that also went in is that byte's own leading bits, which the next
// refill ORs in again unchanged. Otherwise it returns its arguments, for fill. n < 56.
func refill8(data []byte, pos int, acc uint64, n uint) (uint64, uint, int) {
	if pos >= 0 && pos <= len(data)-8 {
		v := binary.BigEndian.Uint64(data[pos:])
		if (^v-0x0101010101010101)&v&0x8080808080808080 == 0 { // no byte of ^v is zero
			return acc | v>>(n&63), n | 56, pos + int((63-n)>>3)
		}
	}
	return acc, n, pos
}

// refill is fill for the decode loops when refill8 cannot: it takes and returns their locals.
func (br *bitReader) refill(acc uint64, n uint) (uint64, uint) {
	br.acc, br.n = acc, n
	br.fill()
	return br.acc, br.n
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
