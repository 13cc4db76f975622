package jpeg

import (
	"math"
	"slices"
)

// Coefficients are the entropy-decoded blocks of an image, the input of the inverse DCT, kept
// compact for a device to dequantize, inverse-DCT, upsample and colour-convert: for each block
// that Decode reconstructs (the region's), its non-zero quantized coefficients, and for each
// component its quantization table and the grid and plane its blocks go to.
//
// # Layout
//
// The blocks of component c form the grid Grids[c]: its block in row r and column k (the
// component's block (BX+k, BY+r), counted in 8x8 blocks from the image's top left) has number
// i = First + r*Across + k, and the grids follow one another, so that i runs over [0,
// len(Start)) once. Block i's coefficients are the pairs (Index[j], Value[j]) for j in
// [Start[i], Start[i]+Count[i]): Index is the natural-order position v*8+u (row v, column u),
// Value the quantized coefficient, and the dequantized coefficient Value[j]*Quant[Index[j]],
// computed in 32 bits; positions without a pair hold zero. Only non-zero coefficients have a
// pair, and at a reduced Scale only those with u, v < 8/Scale, the ones the reduced IDCT reads
// (at Scale 8 only the DC term). A block's pairs are in zig-zag order; the blocks' pairs lie in
// the order the scan decoded them (MCU by MCU in an interleaved scan), so that Start is not
// sorted and each block needs its Count: one 8x8 thread block (or one thread) per block reads
// its Start and Count and nothing else of the stream. Count[i] == Absent marks a block that
// Decode does not reconstruct, whose samples stay zero: a component without a scan, and the
// blocks past the image's right or bottom edge that a non-interleaved scan leaves out.
//
// Block i's bs x bs samples (bs = 8/Scale) go to Grids[c].Plane at row r*bs and column k*bs
// (Pix[r*bs*Stride+k*bs:]); the plane holds Down*bs rows of Stride samples, zero where no block
// writes, of which Decode's Image shows W x H.
//
// # Reconstruction
//
// Reconstruct is the reference of the device stage. A block without AC pairs, and every block at
// Scale 8, is a flat fill of clip((DC+4)>>3 + 128), DC the dequantized DC term; other blocks go
// through the inverse DCT of dct.go (the AVX2 one where there is AVX2: the same numbers) at Scale
// 1 and through idctReduced's at Scale 2 and 4. One exception keeps Reconstruct equal to Decode
// on any input: Decode takes the flat fill at Scale 1 for sequential images only, so Progressive
// sends a progressive image's DC-only blocks through the IDCT. The two agree for dequantized DC
// terms within ±16379 (an 8-bit encoder's lie within about ±1100), so that a device may fill
// every DC-only block flat.
//
// # Ownership
//
// The Coefficients returned by DecodeCoefficients belong to the Decoder, like its planes, and so
// do the Image and planes of their Reconstruct: the Decoder's next DecodeCoefficients
// overwrites all of them, and the next Reconstruct the Image and planes (Decode leaves them
// alone). Copy what must outlive them.
type Coefficients struct {
	Width, Height int // full-resolution size
	Comps         int // 1 (gray) or 3
	RGB           bool
	Scale         int
	// Progressive is set for a progressive image: see Reconstruction.
	Progressive bool
	Grids       [3]BlockGrid
	Start       []uint32
	Count       []uint8
	Index       []uint8
	Value       []int16

	window int  // coefficients with u, v < window are kept: 8/Scale
	wide   bool // a coefficient did not fit in int16: errWide once the image is decoded
	pix    [3][]byte
	img    Image
}

// Absent is the Count of a block that Decode does not reconstruct.
const Absent = 0xff

// BlockGrid is one component's part of Coefficients: its blocks, and how to dequantize and
// store them.
type BlockGrid struct {
	// Quant is the component's quantization table in natural order: the table in force at the
	// component's last sequential scan, or at the end of a progressive image, the one Decode
	// dequantizes with.
	Quant [blockSize]uint16
	// First is the number of the grid's first block in Start and Count.
	First int
	// BX and BY are the component's block at the grid's top left, in 8x8 blocks from the image's
	// top left; Across and Down the blocks of the grid per row and column (the region's MCUs
	// times H and V).
	BX, BY       int
	Across, Down int
	// H and V are the component's sampling factors (blocks per MCU across and down).
	H, V int
	// Plane is the plane Reconstruct writes (and Decode returns) without its samples: Pix is nil,
	// Stride = Across*8/Scale.
	Plane Plane
}

// DecodeCoefficients decodes data as Decode does, with the same Options (but Exact) and the same
// errors, but stops before the inverse DCT: the result holds the coefficients of every block that
// Decode reconstructs. Exact is an UnsupportedError, and so is a coefficient outside int16,
// once the rest of the image has decoded without an error: Decode accepts such a coefficient,
// but no 8-bit encoder writes one (theirs fit in 12 bits).
func (dec *Decoder) DecodeCoefficients(data []byte, opt Options) (*Coefficients, error) {
	if opt.Exact {
		return nil, UnsupportedError("exact decoding of coefficients")
	}
	co := &dec.co
	co.wide = false
	if err := dec.decode(data, opt, co); err != nil {
		return nil, err
	}
	if co.wide { // only now, so that an error Decode reports comes first
		return nil, errWide
	}
	d := &dec.d
	co.Width, co.Height, co.Comps, co.Scale, co.Progressive = d.width, d.height, d.nComp, d.scale, d.progressive
	co.RGB = d.nComp == 3 && d.isRGB()
	for i := range d.nComp {
		g := &co.Grids[i]
		g.Plane = d.plane(i)
		if d.progressive { // Decode dequantizes a progressive image after its last scan
			g.setQuant(&d.quant[d.comp[i].tq])
		}
	}
	for i := d.nComp; i < len(co.Grids); i++ {
		co.Grids[i] = BlockGrid{}
	}
	return co, nil
}

// Bytes is the size of a device copy of c: a 16-byte image header; per component 184 bytes, its
// Quant (64 uint16) and the rest of its BlockGrid (14 int32); per block 5 bytes, its Start and
// Count; per pair 3 bytes, its Index and Value.
func (c *Coefficients) Bytes() int {
	return 16 + c.Comps*(2*blockSize+14*4) + 5*len(c.Start) + 3*len(c.Index)
}

// Reconstruct dequantizes and inverse-DCTs every block of c into planes (see Reconstruction),
// and returns the Image that Decode returns for the same data and Options, byte for byte, Pix
// included. The Image and its planes belong to c's Decoder (see Ownership); a warm Decoder's
// Reconstruct allocates nothing.
func (c *Coefficients) Reconstruct() *Image {
	bs := 8 / c.Scale
	// Decode keeps a sequential image's full-size blocks transposed for the AVX2 IDCT and passes
	// it the zig-zag index of their last coefficient, a progressive image's blocks as they are
	// with 63: the same here, so that the same IDCT runs.
	transposed := avx2 && bs == 8 && !c.Progressive
	pos := &natural
	if transposed {
		pos = &transpose
	}
	m := &c.img
	*m = Image{Width: c.Width, Height: c.Height, Comps: c.Comps, RGB: c.RGB, Scale: c.Scale}
	for ci := range c.Comps {
		g := &c.Grids[ci]
		p := g.Plane
		p.Pix = resizeClear(c.pix[ci], p.Stride*g.Down*bs)
		c.pix[ci] = p.Pix
		m.Planes[ci] = p
		for r := range g.Down {
			row := p.Pix[r*bs*p.Stride:]
			for k, i := 0, g.First+r*g.Across; k < g.Across; k, i = k+1, i+1 {
				n := c.Count[i]
				if n == Absent {
					continue
				}
				var b block
				last := int32(0)
				s := c.Start[i]
				idx, val := c.Index[s:s+uint32(n)], c.Value[s:s+uint32(n)]
				for j, x := range idx {
					x &= blockSize - 1 // Index is below 64: the mask only drops bounds checks
					b[pos[x]] = int32(val[j]) * int32(g.Quant[x])
					if x != 0 {
						last = max(last, zigzag[x])
					}
				}
				if c.Progressive {
					last = blockSize - 1
				}
				idctStore(row[k*bs:], p.Stride, bs, &b, last, transposed)
			}
		}
	}
	return m
}

// natural, transpose and zigzag map a natural-order position to itself, to its place in a block
// stored transposed, and to its zig-zag index.
var natural, transpose, zigzag = func() (n, t [blockSize]int, z [blockSize]int32) {
	for i := range blockSize {
		n[i], t[i] = i, i%8*8+i/8
	}
	for i, k := range unzig {
		z[k] = int32(i)
	}
	return n, t, z
}()

// errWide is a coefficient that int16 does not hold.
var errWide error = UnsupportedError("coefficient outside 16 bits")

// setQuant sets g.Quant to q (zig-zag order, as decoder.quant).
func (g *BlockGrid) setQuant(q *block) {
	for z, k := range unzig {
		g.Quant[k] = uint16(q[z]) // processDQT reads 8 or 16 bits
	}
}

// makeGrids sizes the grids for the region's blocks, every block Absent until a scan stores it.
func (co *Coefficients) makeGrids(d *decoder) {
	n := 0
	for i := range d.nComp {
		c := &d.comp[i]
		co.Grids[i] = BlockGrid{
			First: n, BX: d.rx0 * c.h, BY: d.ry0 * c.v,
			Across: (d.rx1 - d.rx0) * c.h, Down: (d.ry1 - d.ry0) * c.v, H: c.h, V: c.v,
		}
		n += co.Grids[i].Across * co.Grids[i].Down
	}
	co.Start = resizeClear(co.Start, n)
	co.Count = resizeClear(co.Count, n)
	for i := range co.Count {
		co.Count[i] = Absent
	}
	co.Index, co.Value = co.Index[:0], co.Value[:0]
	co.window = d.bs
}

// resizeClear returns s with length n, zeroed, reusing its memory when it is large enough.
func resizeClear[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// grow makes room for at least one more block's pairs (64) in co.Index and co.Value, both then
// of the same capacity, at most 2^32 so that Start holds every offset below it; it fails past that.
func (co *Coefficients) grow() error {
	if len(co.Index) > math.MaxUint32-blockSize {
		return UnsupportedError("more coefficients than 32-bit offsets address")
	}
	more := max(len(co.Index), 16*blockSize)
	co.Index, co.Value = slices.Grow(co.Index, more), slices.Grow(co.Value, more)
	c := min(cap(co.Index), cap(co.Value), math.MaxUint32)
	co.Index, co.Value = co.Index[:len(co.Index):c], co.Value[:len(co.Value):c]
	return nil
}

// blockNumber returns the number of component ci's block (bx, by), which lies in the region.
func (co *Coefficients) blockNumber(bx, by, ci int) int {
	g := &co.Grids[ci]
	return g.First + (by-g.BY)*g.Across + bx - g.BX
}

// storeSequential decodes the next block of a sequential scan, component ci's block (bx, by) in
// the region, and stores its coefficients: processSOS's decodeBlock and reconstructDequantized,
// without dequantization and IDCT.
func (d *decoder) storeSequential(bx, by, ci int, dcH, acH *huffman, dc *int32) error {
	co := d.co
	if cap(co.Index)-len(co.Index) < blockSize { // Value has the same capacity (grow)
		if err := co.grow(); err != nil {
			return err
		}
	}
	start, n := len(co.Index), 0
	if co.window == 1 { // Scale 8 needs the DC term alone: skip the AC terms as outside the region
		if err := d.br.skipBlock(dcH, acH, dc); err != nil {
			return err
		}
		if *dc != 0 {
			co.Index, co.Value = append(co.Index, 0), append(co.Value, int16(*dc))
			n = 1
		}
	} else {
		var err error
		n, err = d.br.decodeBlockPairs(co.Index[start:start+blockSize], co.Value[start:start+blockSize], dcH, acH, dc,
			&keep[co.window])
		if err != nil {
			return err
		}
		co.Index, co.Value = co.Index[:start+n], co.Value[:start+n]
	}
	co.wide = co.wide || *dc != int32(int16(*dc)) // AC terms have at most 15 bits: only the DC sum can be wider
	i := co.blockNumber(bx, by, ci)
	co.Start[i], co.Count[i] = uint32(start), uint8(n)
	return nil
}

// keep[w][z] is 1 where zig-zag index z lies in the top-left w x w of a block, the coefficients
// that Scale 8/w reads.
var keep = func() (t [9][blockSize]uint8) {
	for _, w := range []int{1, 2, 4, 8} {
		for z, k := range unzig {
			if k%8 < w && k/8 < w {
				t[w][z] = 1
			}
		}
	}
	return t
}()

// decodeBlockPairs is decodeBlock writing the block's coefficients as pairs instead of into a
// block: the DC term (the component's predictor, if not zero) then the AC terms that keep
// marks, in zig-zag order, at idx[j] and val[j] (natural-order index and quantized value) for j
// below the count it returns. idx and val hold 64 entries. It decodes as decodeBlock does
// (see there); its stores differ: each pair is written whether kept or not, and the count
// advanced by keep, so that a kept pair costs no branch; so is a pair lookup's second
// (huffman.pair), a copy of the first when there is none, counted only when there is one.
func (br *bitReader) decodeBlockPairs(idx []uint8, val []int16, dcH, acH *huffman, dc *int32, keep *[blockSize]uint8) (int, error) {
	idx, val = idx[:blockSize], val[:blockSize]
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
			return 0, err
		}
		acc, n = br.acc, br.n
	}
	j := 0
	if *dc != 0 {
		j = 1
	}
	if !acH.pairReady {
		acH.buildPair()
	}
	fast, pair := &acH.fast, acH.pair
	_, _ = fast[0], keep[0]
	for k := int32(1); k < blockSize; {
		if n < 32 {
			if acc, n, br.pos = refill8(br.data, br.pos, acc, n); n < 32 {
				acc, n = br.refill(acc, n)
			}
		}
		// Mostly, one lookup decodes one or two coefficients (see huffman.pair); the second
		// is written, and counted only if there is one. The rest goes one code at a time.
		p := pair[acc>>(64-fastBits)]
		if z1 := k + int32(p>>8)&0xff; z1+int32(p>>32)&0xff < blockSize {
			z2 := (z1 + int32(p>>32)&0xff) & (blockSize - 1)
			z1 &= blockSize - 1
			acc <<= uint32(p) & 63
			n -= uint(p & 0xff)
			idx[j&(blockSize-1)], val[j&(blockSize-1)] = uint8(unzig[z1]), int16(p>>16)
			j += int(keep[z1])
			idx[j&(blockSize-1)], val[j&(blockSize-1)] = uint8(unzig[z2]), int16(p>>48)
			j += int(keep[z2] & uint8(p>>40))
			k = z2 + 1
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
					break
				}
				k += 16
				continue
			}
			z := k + r
			if z >= blockSize {
				break
			}
			x := extend(acc, s)
			acc <<= s & 63
			n -= uint(s)
			z &= blockSize - 1
			idx[j&(blockSize-1)], val[j&(blockSize-1)] = uint8(unzig[z]), int16(x)
			j += int(keep[z])
			k = z + 1
			continue
		}
		acc <<= uint32(f) & 63
		n -= uint(f & 0xff)
		if z := k + (f>>8)&0xff; z < blockSize {
			z &= blockSize - 1
			idx[j&(blockSize-1)], val[j&(blockSize-1)] = uint8(unzig[z]), int16(f>>16)
			j += int(keep[z])
			k = z + 1
		} else if (f>>8)&0xff == fastZRL {
			k += 16
		} else { // the end of the block, or a run past it
			break
		}
	}
	if *dc != 0 { // last: a block of 64 pairs wrote the copy of its last at j&63 = 0
		idx[0], val[0] = 0, int16(*dc)
	}
	br.acc, br.n = acc, n
	return j, nil
}

// storeProgressive stores the coefficients of a progressive image's block (bx, by) of component
// ci, after its last scan, in place of reconstructBlock.
func (d *decoder) storeProgressive(b *block, bx, by, ci int) error {
	co := d.co
	if cap(co.Index)-len(co.Index) < blockSize {
		if err := co.grow(); err != nil {
			return err
		}
	}
	start := len(co.Index)
	idx, val := co.Index[:start+blockSize], co.Value[:start+blockSize]
	n, w := start, co.window
	for _, k := range unzig {
		v := b[k]
		if v == 0 || k&7 >= w || k>>3 >= w {
			continue
		}
		co.wide = co.wide || v != int32(int16(v))
		idx[n], val[n] = uint8(k), int16(v)
		n++
	}
	co.Index, co.Value = idx[:n], val[:n]
	i := co.blockNumber(bx, by, ci)
	co.Start[i], co.Count[i] = uint32(start), uint8(n-start)
	return nil
}

// idctStore writes the bs x bs samples of dequantized block b to dst as reconstructDequantized
// does without Exact (its code, which it keeps inline for speed): last and transposed are as
// there.
func idctStore(dst []byte, stride, bs int, b *block, last int32, transposed bool) {
	if last == 0 || bs == 1 {
		v := uint8(min(max((b[0]+4)>>3+128, 0), 255))
		for y := range bs {
			row := dst[y*stride : y*stride+bs]
			for x := range row {
				row[x] = v
			}
		}
		return
	}
	if bs != 8 {
		idctReduced(dst, stride, b, bs)
		return
	}
	if !idctSIMD(dst, stride, b, transposed, last) {
		idctRows(b)
		idctColsStore(dst, stride, b)
	}
}
