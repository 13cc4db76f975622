// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package jpeg

import (
	"io"
)

// maxCodeLength is the maximum (inclusive) number of bits in a Huffman code.
const maxCodeLength = 16

// maxNCodes is the maximum (inclusive) number of codes in a Huffman tree.
const maxNCodes = 256

// lutSize is the log-2 size of the Huffman decoder's look-up table.
const lutSize = 8

// huffman is a Huffman decoder, specified in section C.
type huffman struct {
	// length is the number of codes in the tree.
	nCodes int32
	// lut is the look-up table for the next lutSize bits in the bit-stream.
	// The high 8 bits of the uint16 are the encoded value. The low 8 bits
	// are 1 plus the code length, or 0 if the value is too large to fit in
	// lutSize bits.
	lut [1 << lutSize]uint16
	// vals are the decoded values, sorted by their encoding.
	vals [maxNCodes]uint8
	// minCodes[i] is the minimum code of length i, or -1 if there are no
	// codes of that length.
	minCodes [maxCodeLength]int32
	// maxCodes[i] is the maximum code of length i, or -1 if there are no
	// codes of that length.
	maxCodes [maxCodeLength]int32
	// valsIndices[i] is the index into vals of minCodes[i].
	valsIndices [maxCodeLength]int32
	// Fork: counts[i] is the number of codes of length i+1: with vals, the table's definition.
	counts [maxCodeLength]uint8
	// Fork: fast decodes a code and its extra bits together when both fit in the next fastBits
	// bits, 0 when they do not. AC tables: value<<16 | run<<8 | bits used, where the runs of
	// the end of the block (fastEOB) and of a run of 16 zeros (fastZRL) are past the block's
	// end, so that the AC loops' test of a coefficient's position, k+run < blockSize, also keeps
	// them off a coefficient's path. DC tables: difference<<16 | bits used.
	fast [1 << fastBits]int32
	// Fork: skip reads past a block's AC codes without their values (skipBlock): for the next
	// skipBits bits, the codes with their extra bits that lie whole in them, one after the
	// other up to an end of block, as skipEOB (ending with an end of block) | advance<<8 |
	// bits used, the advance being what they add to the zig-zag index (a run of 16 zeros 16,
	// a coefficient its run plus one). When the first does not fit, the advance is skipNone,
	// past any block's end. AC tables only. Building it costs what it saves on some 700
	// skipped blocks, so it is built (skipReady, allocated the first time) when a second image
	// defines the same table, and kept: an image's own table (an optimizing encoder's) skips
	// one code at a time.
	skip      *[1 << skipBits]uint16
	skipReady bool
	// Fork: pair decodes up to two AC coefficients at once (decodeBlock, decodeBlockPairs):
	// for the next fastBits bits, the first code's fast entry (bits used, run, value) with,
	// when a second coefficient's code and extra bits lie whole in the bits left, the bits of
	// both as the bits used, and the second's run plus one at bit 32, 0xff at bit 40 and its
	// value at bit 48; without a second, 0, 0 and the first's value. An entry that is not a
	// coefficient in fast has run 0xff, or fast's run of the end of block or of 16 zeros: past
	// any block's end. AC tables only, built at the first use (pairReady, allocated the first
	// time).
	pair      *[1 << fastBits]int64
	pairReady bool
}

// buildPair fills h.pair from h.fast, as buildSkip does h.skip.
func (h *huffman) buildPair() {
	if h.pair == nil {
		h.pair = new([1 << fastBits]int64)
	}
	for i := range int32(1 << fastBits) {
		f := h.fast[i]
		e := int64(uint32(f)) | int64(uint16(f>>16))<<48
		if f == 0 { // the slow path: a run past any block's end
			e = 0xff << 8
		}
		if run := (f >> 8) & 0xff; f != 0 && run < fastEOB {
			l := f & 0xff
			g := h.fast[(i<<l)&(1<<fastBits-1)]
			if l2 := g & 0xff; g != 0 && (g>>8)&0xff < fastEOB && l+l2 <= fastBits {
				e = int64(l+l2) | int64(run)<<8 | int64(uint16(f>>16))<<16 |
					int64((g>>8)&0xff+1)<<32 | 0xff<<40 | int64(uint16(g>>16))<<48
			}
		}
		h.pair[i] = e
	}
	h.pairReady = true
}

const (
	skipBits = 12
	skipEOB  = 1 << 15
	skipNone = 0x7f
)

// buildSkip fills h.skip from h.fast: the entry of each bit string is its first code's fast
// entry followed by the entry, again from fast, of what is left of the string padded with
// zero bits, as long as that entry's bits lie in the string (a code is known from its own
// bits alone).
func (h *huffman) buildSkip() {
	if h.skip == nil {
		h.skip = new([1 << skipBits]uint16)
	}
	for i := range int32(1 << skipBits) {
		e, bits, adv := uint16(skipNone<<8), int32(0), int32(0)
		for {
			f := h.fast[(i<<bits)&(1<<skipBits-1)>>(skipBits-fastBits)]
			l := f & 0xff
			if f == 0 || bits+l > skipBits {
				break
			}
			bits += l
			r := (f >> 8) & 0xff
			if r == fastEOB {
				e = skipEOB | uint16(adv<<8|bits)
				break
			}
			if r == fastZRL {
				r = 15
			}
			if adv += r + 1; adv >= blockSize { // past any block's end: the entry before is as good
				break
			}
			e = uint16(adv<<8 | bits)
		}
		h.skip[i] = e
	}
	h.skipReady = true
}

const (
	fastBits = 10
	fastEOB  = blockSize
	fastZRL  = blockSize + 1
)

// buildFast fills h.fast from the canonical code (minCodes, maxCodes, valsIndices) of a DC or
// an AC table: each code of at most fastBits bits fills the range of entries that start with it
// (with its extra bits, when they fit too). Shorter codes go last, so that in an oversubscribed
// (corrupt) table the shortest code wins, as a search by increasing length would find.
func (h *huffman) buildFast(dc bool) {
	clear(h.fast[:])
	for l := int32(fastBits); l >= 1; l-- {
		if h.maxCodes[l-1] < 0 {
			continue
		}
		for code := h.minCodes[l-1]; code <= h.maxCodes[l-1] && code < 1<<l; code++ {
			rs := h.vals[h.valsIndices[l-1]+code-h.minCodes[l-1]]
			run, s := int32(rs>>4), int32(rs&0x0f)
			if dc { // the symbol is the size of the difference that follows
				run, s = 0, int32(rs)
			}
			lo := code << (fastBits - l)
			f := int32(0) // does not fit: the slow path
			switch {
			case dc && s == 0:
				f = l // a zero difference
			case s == 0 && run == 0:
				f = fastEOB<<8 | l
			case s == 0 && run == 15:
				f = fastZRL<<8 | l
			case s != 0 && l+s <= fastBits:
				for v := range int32(1) << s {
					x := v
					if x < 1<<(s-1) {
						x += (-1 << s) + 1
					}
					vlo := lo | v<<(fastBits-l-s)
					fill32(h.fast[vlo:vlo+1<<(fastBits-l-s)], x<<16|run<<8|(l+s))
				}
				continue
			}
			fill32(h.fast[lo:lo+1<<(fastBits-l)], f)
		}
	}
}

func fill32(s []int32, v int32) {
	for i := range s {
		s[i] = v
	}
}

// errShortHuffmanData means that an unexpected EOF occurred while decoding
// Huffman data.
var errShortHuffmanData error = FormatError("short Huffman data")

// ensureNBits reads bytes from the byte buffer to ensure that d.bits.n is at
// least n. For best performance (avoiding function calls inside hot loops),
// the caller is the one responsible for first checking that d.bits.n < n.
func (d *decoder) ensureNBits(n int32) error {
	for {
		c, err := d.readByteStuffedByte()
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				return errShortHuffmanData
			}
			return err
		}
		d.bits.a = d.bits.a<<8 | uint32(c)
		d.bits.n += 8
		if d.bits.m == 0 {
			d.bits.m = 1 << 7
		} else {
			d.bits.m <<= 8
		}
		if d.bits.n >= n {
			break
		}
	}
	return nil
}

// receiveExtend is the composition of RECEIVE and EXTEND, specified in section
// F.2.2.1.
func (d *decoder) receiveExtend(t uint8) (int32, error) {
	if d.bits.n < int32(t) {
		if err := d.ensureNBits(int32(t)); err != nil {
			return 0, err
		}
	}
	d.bits.n -= int32(t)
	d.bits.m >>= t
	s := int32(1) << t
	x := int32(d.bits.a>>uint8(d.bits.n)) & (s - 1)
	if x < s>>1 {
		x += ((-1) << t) + 1
	}
	return x, nil
}

// processDHT processes a Define Huffman Table marker, and initializes a huffman
// struct from its contents. Specified in section B.2.4.2.
func (d *decoder) processDHT(n int) error {
	for n > 0 {
		if n < 17 {
			return FormatError("DHT has wrong length")
		}
		if err := d.readFull(d.tmp[:17]); err != nil {
			return err
		}
		tc := d.tmp[0] >> 4
		if tc > maxTc {
			return FormatError("bad Tc value")
		}
		th := d.tmp[0] & 0x0f
		// The baseline th <= 1 restriction is specified in table B.5.
		if th > maxTh || (d.baseline && th > 1) {
			return FormatError("bad Th value")
		}
		// Fork: the table lives in the Decoder, and a definition equal to the one it holds
		// (an image's encoder mostly writes the same tables as the last one's) keeps the
		// tables derived from it.
		h := &d.pool.huff[tc][th]

		// Read nCodes and vals (and derive total).
		// nCodes[i] is the number of codes with code length i.
		// total is the total number of codes.
		var nCodes [maxCodeLength]int32
		var counts [maxCodeLength]uint8
		total := int32(0)
		for i := range nCodes {
			counts[i] = d.tmp[i+1]
			nCodes[i] = int32(counts[i])
			total += nCodes[i]
		}
		if total == 0 {
			return FormatError("Huffman table has zero length")
		}
		if total > maxNCodes {
			return FormatError("Huffman table has excessive length")
		}
		n -= int(total) + 17
		if n < 0 {
			return FormatError("DHT has wrong length")
		}
		var vals [maxNCodes]uint8
		if err := d.readFull(vals[:total]); err != nil {
			return err
		}
		d.huff[tc][th] = h
		if h.nCodes == total && h.counts == counts && h.vals == vals {
			if tc == acTable && !h.skipReady {
				h.buildSkip()
			}
			continue
		}
		h.nCodes, h.counts, h.vals, h.skipReady, h.pairReady = total, counts, vals, false, false

		// Derive the look-up table.
		clear(h.lut[:])
		var x, code uint32
		for i := uint32(0); i < lutSize; i++ {
			code <<= 1
			for j := int32(0); j < nCodes[i]; j++ {
				// The codeLength is 1+i, so shift code by 8-(1+i) to
				// calculate the high bits for every 8-bit sequence
				// whose codeLength's high bits matches code.
				// The high 8 bits of lutValue are the encoded value.
				// The low 8 bits are 1 plus the codeLength.
				base := uint8(code << (7 - i))
				lutValue := uint16(h.vals[x])<<8 | uint16(2+i)
				for k := uint8(0); k < 1<<(7-i); k++ {
					h.lut[base|k] = lutValue
				}
				code++
				x++
			}
		}

		// Derive minCodes, maxCodes, and valsIndices.
		var c, index int32
		for i, n := range nCodes {
			if n == 0 {
				h.minCodes[i] = -1
				h.maxCodes[i] = -1
				h.valsIndices[i] = -1
			} else {
				h.minCodes[i] = c
				h.maxCodes[i] = c + n - 1
				h.valsIndices[i] = index
				c += n
				index += n
			}
			c <<= 1
		}
		h.buildFast(tc == dcTable)
	}
	return nil
}

// decodeHuffman returns the next Huffman-coded value from the bit-stream,
// decoded according to h.
func (d *decoder) decodeHuffman(h *huffman) (uint8, error) {
	if h.nCodes == 0 {
		return 0, FormatError("uninitialized Huffman table")
	}

	if d.bits.n < 8 {
		if err := d.ensureNBits(8); err != nil {
			if err != errMissingFF00 && err != errShortHuffmanData {
				return 0, err
			}
			// There are no more bytes of data in this segment, but we may still
			// be able to read the next symbol out of the previously read bits.
			// First, undo the readByte that the ensureNBits call made.
			if d.bytes.nUnreadable != 0 {
				d.unreadByteStuffedByte()
			}
			goto slowPath
		}
	}
	if v := h.lut[(d.bits.a>>uint32(d.bits.n-lutSize))&0xff]; v != 0 {
		n := (v & 0xff) - 1
		d.bits.n -= int32(n)
		d.bits.m >>= n
		return uint8(v >> 8), nil
	}

slowPath:
	for i, code := 0, int32(0); i < maxCodeLength; i++ {
		if d.bits.n == 0 {
			if err := d.ensureNBits(1); err != nil {
				return 0, err
			}
		}
		if d.bits.a&d.bits.m != 0 {
			code |= 1
		}
		d.bits.n--
		d.bits.m >>= 1
		if code <= h.maxCodes[i] {
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], nil
		}
		code <<= 1
	}
	return 0, FormatError("bad Huffman code")
}

func (d *decoder) decodeBit() (bool, error) {
	if d.bits.n == 0 {
		if err := d.ensureNBits(1); err != nil {
			return false, err
		}
	}
	ret := d.bits.a&d.bits.m != 0
	d.bits.n--
	d.bits.m >>= 1
	return ret, nil
}

func (d *decoder) decodeBits(n int32) (uint32, error) {
	if d.bits.n < n {
		if err := d.ensureNBits(n); err != nil {
			return 0, err
		}
	}
	ret := d.bits.a >> uint32(d.bits.n-n)
	ret &= (1 << uint32(n)) - 1
	d.bits.n -= n
	d.bits.m >>= uint32(n)
	return ret, nil
}
