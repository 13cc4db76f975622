package transforms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	ijpeg "github.com/stoke-ml/stoke/transforms/internal/jpeg"
)

// The record's fixed parts (see ApplyCoefficients): its header and each component's grid.
const (
	recordMagic   = "STKC"
	recordVersion = 1
	recordHeader  = 112
	recordGrid    = 184
)

// ApplyCoefficients is the host half of a device decode: it does what Apply does up to the
// decode (the header, the pixel limit, the Chain's plan drawn from r, its mapping onto the stored
// image, the region and scale of the JPEG decode) but only entropy-decodes the region's blocks,
// and writes into dst a record that holds everything the device needs to produce Apply's output
// (uint8 CHW of shape out) on its own: the blocks' quantized coefficients, the quantization
// tables and grids, and the geometry of the resampling pass. It returns the record's length.
// Render is the reference of the device stage: Render(pixels, dst[:n]) writes what Apply writes,
// byte for byte. A warm Worker allocates nothing; its time counts as "decode" in Times.
//
// out is the output's shape, as Apply's dst length gives it (C 1 or 3, and the size the Chain
// gives the image): another size is an error wrapping ErrShape.
//
// Samples that the device cannot take return an error wrapping ErrHostPath that names the cause;
// give them to Apply, with r as it was before this call (a Loader reseeds the sample's generator
// anyway). Those are: raw pixels and images other than JPEG; Chains with ExactDecode; samples
// whose plan has steps on the output pixels (ColorJitter, the augmentation policies, Pixels...);
// plans whose resampling reads more than the image's size beyond its edges (only outputs padded
// by more than the image's size can); JPEGs the decoder fork does not take (CMYK, a coefficient
// outside 16 bits, ... which Apply decodes otherwise); and records longer than len(dst). The
// causes that the plan gives are found before anything is decoded. A corrupt JPEG returns
// Apply's error (wrapping ErrCorrupt), not ErrHostPath.
//
// # Record layout
//
// All numbers are little-endian; offsets are in bytes from the record's start. The header
// (112 bytes):
//
//	 0  [4]byte  magic "STKC"
//	 4  uint32   version, 1
//	 8  uint32   size: the record's length in bytes, a multiple of 4
//	12  uint32   B: the number of blocks
//	16  uint32   P: the number of coefficient pairs
//	20  uint8    C: output channels, 1 or 3
//	21  uint8    Comps: components, 1 (gray) or 3
//	22  uint8    Scale: 1, 2, 4 or 8; each block is reconstructed at bs x bs samples, bs = 8/Scale
//	23  uint8    flags: bit 0 RGB (the components are R, G, B, not Y, Cb, Cr), bit 1 Progressive
//	24  uint8    filter: 0 bilinear, 1 bicubic, 2 Lanczos-3 (Filter)
//	25  [3]byte  zero
//	28  uint16   H: output height
//	30  uint16   W: output width
//	32  uint16   the image's stored width, full resolution (before EXIF orientation)
//	34  uint16   the image's stored height
//	36  int32    base, 40 int32 du, 44 int32 dv: the output's pixel (j, k) of the stored frame
//	             lands at base + j*du + k*dv in each H x W channel (one of the 8 orientations)
//	48  axis u   (32 bytes) along the stored width: j; output pixel j covers the stored pixels
//	             [off + j*scale, off + (j+1)*scale)
//	80  axis v   (32 bytes) along the stored height: k
//
// An axis is float64 off, float64 scale (> 0), int32 n (W or H: the output pixels along it),
// int32 lo, int32 hi (0 <= lo <= hi <= n: the outputs outside [lo, hi) are padding, zero), and 4
// zero bytes.
//
// Then Comps grids of 184 bytes, the jpeg fork's BlockGrid of each component: uint16 Quant[64]
// (natural order), then int32 First, BX, BY, Across, Down, H, V, and the plane the blocks go to,
// int32 X0, Y0, W, H, SubX, SubY, Stride. Then the arrays, each starting at a multiple of 4 and
// padded with zeros to the next: uint32 Start[B], uint8 Count[B], uint8 Index[P], int16 Value[P].
// Coefficients in the jpeg fork (go doc ./transforms/internal/jpeg Coefficients) says what they
// mean: block i of component c (First <= i < First+Across*Down, in rows of Across) holds the
// pairs [Start[i], Start[i]+Count[i]) (Count 255: absent, its samples zero) of natural-order
// Index and quantized Value, dequantized by Quant, inverse-transformed into the plane of
// Stride = Across*bs samples a row, which starts at the component's sample (X0, Y0). The
// resampling reads its samples x < W, y < H of each row; the component's sample X0+x covers the
// stored pixels [(X0+x)*SubX*Scale, (X0+x+1)*SubX*Scale) in the axes' coordinates (and Y0+y
// likewise with SubY).
//
// # The device stage
//
// For each plane it resamples (the three, or the first alone when the image is gray or when C
// is 1 and the image YCbCr), each axis's taps are those of Apply (PIL's, in float64 arithmetic
// without fused multiply-adds): for output j in [lo, hi), with ratio 1/(Sub*Scale) and origin
// X0 (Y0), center = (off*ratio - origin) + (j+0.5)*(scale*ratio); support = filter support *
// max(scale*ratio, 1); the taps [max(int(center-support+0.5), 0), min(int(center+support+0.5),
// size)) with size the plane's W (H), their weights filter((x-center+0.5)/max(scale*ratio, 1))
// normalized to sum 1 and rounded to 22 fractional bits, every output given the same tap count,
// the widest, with its start clamped inside the plane (resample.go's weights.compute has each
// rounding and edge case). The horizontal pass rounds to uint8, the vertical pass reads it and
// rounds again; the colour conversion is image/color's YCbCr->RGB in integers (C 3 from YCbCr),
// the copy of a gray plane or of R, G, B, or RGB's luma (C 1 from RGB).
func (w *Worker) ApplyCoefficients(dst []byte, out Shape, in Input, r *rand.Rand) (int, error) {
	p := w.p
	t0 := time.Now()
	if (in.Encoded != nil) == (in.Pixels != nil) {
		return 0, fmt.Errorf("transforms: input must have exactly one of Encoded and Pixels: %w", ErrShape)
	}
	if in.Encoded == nil {
		return 0, fmt.Errorf("transforms: raw pixels: %w", ErrHostPath)
	}
	info, stored, err := decodeInfo(in.Encoded)
	if err != nil {
		return 0, err
	}
	if err := p.Admit(info); err != nil {
		return 0, err
	}
	if info.Format != "jpeg" {
		return 0, fmt.Errorf("transforms: a %s image: %w", info.Format, ErrHostPath)
	}
	switch mode := p.DecodeMode(); mode {
	case FastDecode, DeviceDecode:
	case ExactDecode:
		return 0, fmt.Errorf("transforms: %v decode, as libjpeg-turbo: %w", mode, ErrHostPath)
	default:
		return 0, fmt.Errorf("transforms: decode mode %d: %w", mode, ErrInvalid)
	}
	m, _, err := w.plan(out.Len(), CHW, info, exifOrientation(info.Orientation), stored, r)
	if err != nil {
		return 0, err
	}
	if ow, oh := w.pl.Size(); ow != out.W || oh != out.H {
		return 0, fmt.Errorf("transforms: a %dx%d output for shape %v: %w", ow, oh, out, ErrShape)
	}
	if len(w.pl.post) > 0 {
		return 0, fmt.Errorf("transforms: %v works on the output pixels: %w", p.transforms()[w.pl.post[0].owner], ErrHostPath)
	}
	if !m.u.bounded(stored[0]) || !m.v.bounded(stored[1]) {
		return 0, fmt.Errorf("transforms: the plan reads more than the image's size beyond its edges: %w", ErrHostPath)
	}
	scale, region := decodeWindow(&m, stored, false)
	co, err := w.jd.DecodeCoefficients(in.Encoded, ijpeg.Options{Scale: scale, Region: region, MaxPixels: p.limit()})
	if err != nil && errors.As(err, new(ijpeg.UnsupportedError)) {
		// Apply decodes such a file otherwise, or fails: its error if it does.
		if derr := w.decodeJPEG(in.Encoded, &m, stored); derr != nil {
			return 0, derr
		}
		return 0, fmt.Errorf("transforms: jpeg: %w: %w", ErrHostPath, err)
	}
	if err != nil {
		return 0, fmt.Errorf("transforms: decoding jpeg: %w: %w", ErrCorrupt, err)
	}
	if err := checkSize(co.Width, co.Height, stored); err != nil {
		return 0, err
	}
	n := recordSize(co.Comps, len(co.Start), len(co.Index))
	if n > len(dst) || n > math.MaxUint32 {
		return 0, fmt.Errorf("transforms: a record of %d bytes, dst of %d: %w", n, len(dst), ErrHostPath)
	}
	writeRecord(dst[:n], co, &m, out)
	w.times[0].Add(int64(time.Since(t0)))
	return n, nil
}

// bounded reports whether the outputs of a that are not padding read the source of size pixels
// within size pixels beyond its edges: off+lo*scale >= -size and off+hi*scale <= 2*size. They
// lie within the whole output, [off, off+n*scale], so an output padded by at most the image's
// size (RandomCrop's padding, a CenterCrop up to 3 times the image) always does; Render refuses
// a record whose axes do not, so that the taps it computes stay within a few times the image's
// size.
func (a axis) bounded(size int) bool {
	if a.hi <= a.lo {
		return true
	}
	s := float64(size)
	return a.off+float64(a.lo)*a.scale >= -s && a.off+float64(a.hi)*a.scale <= 2*s
}

// recordSize is the length of the record of comps components, nb blocks and np pairs.
func recordSize(comps, nb, np int) int {
	return recordHeader + comps*recordGrid + 4*nb + align4(nb) + align4(np) + align4(2*np)
}

func align4(n int) int { return (n + 3) &^ 3 }

// writeRecord writes the record of co and m for an output of shape out into b, its length.
func writeRecord(b []byte, co *ijpeg.Coefficients, m *mapping, out Shape) {
	le := binary.LittleEndian
	copy(b, recordMagic)
	le.PutUint32(b[4:], recordVersion)
	le.PutUint32(b[8:], uint32(len(b)))
	le.PutUint32(b[12:], uint32(len(co.Start)))
	le.PutUint32(b[16:], uint32(len(co.Index)))
	var flags byte
	if co.RGB {
		flags |= 1
	}
	if co.Progressive {
		flags |= 2
	}
	b[20], b[21], b[22], b[23], b[24] = byte(out.C), byte(co.Comps), byte(co.Scale), flags, byte(m.filter)
	b[25], b[26], b[27] = 0, 0, 0
	le.PutUint16(b[28:], uint16(out.H))
	le.PutUint16(b[30:], uint16(out.W))
	le.PutUint16(b[32:], uint16(co.Width))
	le.PutUint16(b[34:], uint16(co.Height))
	le.PutUint32(b[36:], uint32(int32(m.base)))
	le.PutUint32(b[40:], uint32(int32(m.du)))
	le.PutUint32(b[44:], uint32(int32(m.dv)))
	for i, a := range [2]axis{m.u, m.v} {
		q := b[48+32*i : 80+32*i]
		le.PutUint64(q, math.Float64bits(a.off))
		le.PutUint64(q[8:], math.Float64bits(a.scale))
		le.PutUint32(q[16:], uint32(int32(a.n)))
		le.PutUint32(q[20:], uint32(int32(a.lo)))
		le.PutUint32(q[24:], uint32(int32(a.hi)))
		le.PutUint32(q[28:], 0)
	}
	o := recordHeader
	for c := range co.Comps {
		g := &co.Grids[c]
		q := b[o : o+recordGrid]
		for i, v := range g.Quant {
			le.PutUint16(q[2*i:], v)
		}
		pl := &g.Plane
		for i, v := range [14]int{g.First, g.BX, g.BY, g.Across, g.Down, g.H, g.V, pl.X0, pl.Y0, pl.W, pl.H, pl.SubX, pl.SubY, pl.Stride} {
			le.PutUint32(q[128+4*i:], uint32(int32(v)))
		}
		o += recordGrid
	}
	st := b[o : o+4*len(co.Start)]
	for i, v := range co.Start {
		le.PutUint32(st[4*i:], v)
	}
	o += len(st)
	o += putPadded(b[o:], co.Count)
	o += putPadded(b[o:], co.Index)
	vs := b[o : o+2*len(co.Value)]
	vals := co.Value
	// Four values a store: the values are the most numerous field, and this is most of the
	// record's writing time.
	for ; len(vals) >= 4; vals, vs = vals[4:], vs[8:] {
		le.PutUint64(vs, uint64(uint16(vals[0]))|uint64(uint16(vals[1]))<<16|uint64(uint16(vals[2]))<<32|uint64(uint16(vals[3]))<<48)
	}
	for i, v := range vals {
		le.PutUint16(vs[2*i:], uint16(v))
	}
	clear(b[o+2*len(co.Value):])
}

// putPadded copies s to b followed by zeros up to a multiple of 4 bytes, and returns their count.
func putPadded(b, s []byte) int {
	n := align4(len(s))
	clear(b[copy(b, s):n])
	return n
}

// Render is the reference of the device stage of a record that ApplyCoefficients wrote: it
// reconstructs the blocks' planes (the jpeg fork's Coefficients.Reconstruct), then resamples,
// converts and stores them with Apply's own code, writing uint8 CHW pixels into dst, whose
// length must be the record's C*H*W (ErrShape otherwise). The record may be followed by other
// bytes. It is outside data: every count, offset and size in it is checked against its length
// and against the others, and one that does not hold is an error wrapping ErrCorrupt; no record
// makes Render panic, nor hold more memory than Apply would for its image and output: planes of
// 64 bytes a block (13 times the record's 5), taps for an output at most 3 times the image's
// size, and the horizontal pass's rows (the output's width by at most the image's height). A
// warm Worker allocates nothing.
func (w *Worker) Render(dst, record []byte) error {
	m, nc, err := w.readRecord(record, len(dst), false)
	if err != nil {
		return err
	}
	w.src.setJPEG(w.rc.Reconstruct())
	w.resample(dst, &m, nc, len(dst)/nc)
	return nil
}

// RecordScratch checks the fixed part of record b (its header, axes and grids, not its blocks and
// pairs) as Render does (an error wrapping ErrCorrupt) and returns the bytes of device memory that
// a device stage needs to render it, besides the record and the output: the reconstructed planes,
// Stride*Down*8/Scale bytes each, and the horizontal pass of each plane it resamples (the three, or
// the first alone when the image is gray or when C is 1 and the image YCbCr), the plane's H rows of
// the output's hi-lo samples of axis u. A device stage (kernels.Ops.RenderRecords) takes a record
// only into that much scratch; a caller that reserves a fixed amount sends the samples whose
// records need more down the host path. It reads the fixed part alone, so that a loader sizes a
// record for a fraction of its rendering's time. A warm Worker allocates nothing.
func (w *Worker) RecordScratch(b []byte) (int, error) {
	m, nc, err := w.readRecord(b, -1, true)
	if err != nil {
		return 0, err
	}
	co := &w.rc
	bs, need := 8/co.Scale, 0
	for c := range co.Comps {
		g := &co.Grids[c]
		need += g.Plane.Stride * g.Down * bs
	}
	planes := 3
	if co.Comps == 1 || (!co.RGB && nc == 1) {
		planes = 1
	}
	for c := range planes {
		need += co.Grids[c].Plane.H * (m.u.hi - m.u.lo)
	}
	return need, nil
}

// readRecord checks record b for a dst of n bytes (any, if n is negative), sets w.rc to its
// coefficients and returns its mapping and channel count; with fixed, it checks and sets the
// fixed part alone (the header, axes and grids), not the blocks and pairs.
func (w *Worker) readRecord(b []byte, n int, fixed bool) (mapping, int, error) {
	bad := func(format string, args ...any) (mapping, int, error) {
		return mapping{}, 0, fmt.Errorf("transforms: record: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	le := binary.LittleEndian
	if len(b) < recordHeader {
		return bad("%d bytes, shorter than its header", len(b))
	}
	if string(b[:4]) != recordMagic || le.Uint32(b[4:]) != recordVersion {
		return bad("magic %q, version %d (want %q, %d)", b[:4], le.Uint32(b[4:]), recordMagic, recordVersion)
	}
	size, nb, np := int(le.Uint32(b[8:])), int(le.Uint32(b[12:])), int(le.Uint32(b[16:]))
	nc, comps, scale, flags, filter := int(b[20]), int(b[21]), int(b[22]), b[23], Filter(b[24])
	if (nc != 1 && nc != 3) || (comps != 1 && comps != 3) || (scale != 1 && scale != 2 && scale != 4 && scale != 8) ||
		flags&^3 != 0 || (flags&1 != 0 && comps != 3) || filter > Lanczos {
		return bad("C %d, %d components, scale %d, flags %#x, filter %d", nc, comps, scale, flags, filter)
	}
	if want := recordSize(comps, nb, np); size != want || size > len(b) {
		return bad("size %d for %d components, %d blocks and %d pairs (want %d), in %d bytes", size, comps, nb, np, want, len(b))
	}
	oh, ow := int(le.Uint16(b[28:])), int(le.Uint16(b[30:]))
	width, height := int(le.Uint16(b[32:])), int(le.Uint16(b[34:]))
	if ow == 0 || oh == 0 || ow > maxSide || oh > maxSide || width == 0 || height == 0 {
		return bad("a %dx%d output of a %dx%d image", ow, oh, width, height)
	}
	if n >= 0 && n != nc*oh*ow {
		return mapping{}, 0, fmt.Errorf("transforms: dst of %d bytes for a record of %dx%dx%d pixels: %w", n, nc, oh, ow, ErrShape)
	}
	m := mapping{filter: filter, base: int(int32(le.Uint32(b[36:]))), du: int(int32(le.Uint32(b[40:]))), dv: int(int32(le.Uint32(b[44:])))}
	for i, a := range [2]*axis{&m.u, &m.v} {
		q := b[48+32*i:]
		*a = axis{off: math.Float64frombits(le.Uint64(q)), scale: math.Float64frombits(le.Uint64(q[8:])),
			n: int(int32(le.Uint32(q[16:]))), lo: int(int32(le.Uint32(q[20:]))), hi: int(int32(le.Uint32(q[24:])))}
		size := [2]int{width, height}[i]
		if a.lo < 0 || a.lo > a.hi || a.hi > a.n || math.IsInf(a.off, 0) || math.IsNaN(a.off) ||
			!(a.scale > 0 && a.scale <= math.MaxFloat64) || !a.bounded(size) {
			return bad("axis %d: %+v for %d pixels", i, *a, size)
		}
	}
	if !m.orients(ow, oh) {
		return bad("base %d, steps %d and %d for axes of %d and %d pixels into %dx%d", m.base, m.du, m.dv, m.u.n, m.v.n, ow, oh)
	}
	m.padded = m.u.lo != 0 || m.u.hi != m.u.n || m.v.lo != 0 || m.v.hi != m.v.n

	co := &w.rc // field by field: it keeps the planes of its last Reconstruct for the next
	co.Width, co.Height, co.Comps, co.RGB, co.Scale, co.Progressive = width, height, comps, flags&1 != 0, scale, flags&2 != 0
	bs, first := 8/scale, 0
	for c := range comps {
		q := b[recordHeader+c*recordGrid:]
		var f [14]int
		for i := range f {
			f[i] = int(int32(le.Uint32(q[128+4*i:])))
		}
		g := &co.Grids[c]
		*g = ijpeg.BlockGrid{First: f[0], BX: f[1], BY: f[2], Across: f[3], Down: f[4], H: f[5], V: f[6],
			Plane: ijpeg.Plane{X0: f[7], Y0: f[8], W: f[9], H: f[10], SubX: f[11], SubY: f[12], Stride: f[13]}}
		for i := range g.Quant {
			g.Quant[i] = le.Uint16(q[2*i:])
		}
		if err := checkGrid(g, first, bs, width, height, scale); err != nil {
			return bad("component %d: %v", c, err)
		}
		first += g.Across * g.Down
	}
	if first != nb {
		return bad("%d blocks in the grids, %d in the record", first, nb)
	}
	if fixed {
		return m, nc, nil
	}
	o := recordHeader + comps*recordGrid
	starts, counts := b[o:o+4*nb], b[o+4*nb:o+5*nb]
	o += 4*nb + align4(nb)
	index, values := b[o:o+np], b[o+align4(np):o+align4(np)+2*np]
	co.Start, co.Count = growSlice(co.Start, nb), growSlice(co.Count, nb)
	for i := range nb {
		s, k := le.Uint32(starts[4*i:]), counts[i]
		if k != ijpeg.Absent && (k > 64 || int(s)+int(k) > np) {
			return bad("block %d: %d pairs from %d of %d", i, k, s, np)
		}
		co.Start[i], co.Count[i] = s, k
	}
	co.Index, co.Value = growSlice(co.Index, np), growSlice(co.Value, np)
	for i, x := range index {
		if x >= 64 {
			return bad("pair %d: index %d", i, x)
		}
		co.Index[i], co.Value[i] = x, int16(le.Uint16(values[2*i:]))
	}
	return m, nc, nil
}

// orients reports whether m's base and steps store every output pixel (j, k) of its axes once in
// a CHW channel of ow x oh pixels: one of the 8 orientations, u along the output's rows (du
// +-1) or along its columns.
func (m *mapping) orients(ow, oh int) bool {
	corner := func(d, last, step int) int {
		if d < 0 {
			return last * step
		}
		return 0
	}
	if (m.du == 1 || m.du == -1) && (m.dv == ow || m.dv == -ow) && m.u.n == ow && m.v.n == oh &&
		m.base == corner(m.du, ow-1, 1)+corner(m.dv, oh-1, ow) {
		return true
	}
	return (m.du == ow || m.du == -ow) && (m.dv == 1 || m.dv == -1) && m.u.n == oh && m.v.n == ow &&
		m.base == corner(m.du, oh-1, ow)+corner(m.dv, ow-1, 1)
}

// checkGrid checks grid g of a record against the jpeg fork's layout: its first block is first,
// its blocks lie within the image's (width x height pixels), and its plane is theirs at bs
// samples a side, cut at the image's edge at scale.
func checkGrid(g *ijpeg.BlockGrid, first, bs, width, height, scale int) error {
	p := &g.Plane
	// No component has more blocks across than ceil(width/8) and 3 more (4x4 sampling's MCU),
	// nor down: this bounds the products below.
	if g.First != first || g.H < 1 || g.H > 4 || g.V < 1 || g.V > 4 || g.BX < 0 || g.BY < 0 || g.Across < 1 || g.Down < 1 ||
		g.BX+g.Across > (width+7)/8+3 || g.BY+g.Down > (height+7)/8+3 {
		return fmt.Errorf("first block %d (want %d), sampling %dx%d, blocks (%d, %d) and %dx%d after them",
			g.First, first, g.H, g.V, g.BX, g.BY, g.Across, g.Down)
	}
	if p.SubX < 1 || p.SubX > 4 || p.SubY < 1 || p.SubY > 4 || p.Stride != g.Across*bs || p.X0 != g.BX*bs || p.Y0 != g.BY*bs ||
		p.W != min((width+p.SubX*scale-1)/(p.SubX*scale), (g.BX+g.Across)*bs)-p.X0 ||
		p.H != min((height+p.SubY*scale-1)/(p.SubY*scale), (g.BY+g.Down)*bs)-p.Y0 || p.W < 1 || p.H < 1 {
		return fmt.Errorf("plane %+v for blocks (%d, %d) and %dx%d after them", *p, g.BX, g.BY, g.Across, g.Down)
	}
	return nil
}

// growSlice returns s with length n, reusing its memory when it is large enough.
func growSlice[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
