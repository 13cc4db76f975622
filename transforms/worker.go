package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	ijpeg "github.com/stoke-ml/stoke/transforms/internal/jpeg"
)

// maxInputSide bounds the sides of raw inputs (whatever the pixel limit) so that no size
// arithmetic overflows.
const maxInputSide = 1 << 24

// Worker executes a Chain on one sample at a time with reusable scratch memory. Not safe for
// concurrent use; each goroutine needs its own.
type Worker struct {
	p    *Chain
	pl   Plan
	src  source
	jd   ijpeg.Decoder
	rc   ijpeg.Coefficients // Render's, read from a record
	rs   [3]planeResampler
	rows [3][]byte // one output row per plane, in the stored frame
	conv []byte    // RGB conversion of rare image models
	u8   []byte    // uint8 staging of the float path
	rot  []byte    // RandomRotation's (and the affine and sharpness steps') copy of the output
	fbuf []float64 // GaussianBlur's horizontal pass
	lut  [][256]float32
	// times are the nanoseconds spent decoding, resampling and in each transform's pixel steps
	// (by its index in the Chain), read by Times from other goroutines.
	times []atomic.Int64
}

// Time is a part of a Worker's time: Name is "decode" (reading the input's header, planning and
// decoding it), "resample" (the fused pass of the geometry, from the decoded image into the
// output) or a transform of the Chain (its String) that works on the output's pixels.
type Time struct {
	Name string        `json:"name"`
	Time time.Duration `json:"ns"`
}

// Times is where w's time went over the samples it applied: decode, resample, then each transform
// with pixel steps that took time, in Chain order. A transform that plans geometry alone has its
// share in resample, which does every crop, resize and flip in one pass.
func (w *Worker) Times() []Time {
	out := []Time{{"decode", time.Duration(w.times[0].Load())}, {"resample", time.Duration(w.times[1].Load())}}
	for i, t := range w.p.transforms() {
		if d := time.Duration(w.times[2+i].Load()); d > 0 {
			out = append(out, Time{fmt.Sprint(t), d})
		}
	}
	return out
}

// NewWorker returns a Worker for p with empty scratch; the first samples grow it.
func (p *Chain) NewWorker() *Worker {
	w := &Worker{p: p, times: make([]atomic.Int64, 2+len(p.transforms()))}
	if p != nil && p.mean != nil {
		w.lut = make([][256]float32, len(p.mean))
		for c := range p.mean {
			for v := range 256 {
				w.lut[c][v] = (float32(v)/255 - p.mean[c]) / p.std[c]
			}
		}
	}
	return w
}

// Apply transforms in and writes uint8 CHW pixels into dst, whose length must be C*H*W for the
// output size H x W the Chain gives this input and C = 1 or 3 (the channels wanted: encoded
// images are converted to RGB or to luma, raw pixels likewise). Randomness is drawn from r, the
// sample's own generator (seed it from what identifies the sample, for instance
// rand.New(rand.NewPCG(seed, uint64(index))), so that the output does not depend on which Worker
// ran it); r may be nil for Chains without random transforms (random ones then take their
// deterministic fallback). A warm Worker allocates nothing for JPEG and raw input.
func (w *Worker) Apply(dst []byte, in Input, r *rand.Rand) error {
	return w.apply(dst, CHW, in, r)
}

// ApplyLayout is Apply with the output layout l (CHW or HWC).
func (w *Worker) ApplyLayout(dst []byte, l Layout, in Input, r *rand.Rand) error {
	return w.apply(dst, l, in, r)
}

// ApplyFloat32 is Apply followed by the conversion to float32 in layout l:
// (float32(v)/255 - mean[c]) / std[c] with the Chain's Normalize, or float32(v)/255 without
// one. The device-side normalization of Apply's output computes the same numbers.
func (w *Worker) ApplyFloat32(dst []float32, l Layout, in Input, r *rand.Rand) error {
	w.u8 = growBytes(w.u8, len(dst))
	if err := w.apply(w.u8, l, in, r); err != nil {
		return err
	}
	u8 := w.u8
	if w.lut == nil {
		for i, v := range u8 {
			dst[i] = float32(v) / 255
		}
		return nil
	}
	// apply succeeded, so checkNorm accepted len(mean) as 1 or C.
	nc := len(u8) / (w.pl.x.n * w.pl.y.n)
	lut := func(c int) *[256]float32 { return &w.lut[min(c, len(w.lut)-1)] }
	if l == HWC {
		for i, v := range u8 {
			dst[i] = lut(i % nc)[v]
		}
		return nil
	}
	n := len(u8) / nc
	for c := range nc {
		t := lut(c)
		d, s := dst[c*n:(c+1)*n], u8[c*n:(c+1)*n]
		for i, v := range s {
			d[i] = t[v]
		}
	}
	return nil
}

func (w *Worker) apply(dst []byte, l Layout, in Input, r *rand.Rand) error {
	p := w.p
	t0 := time.Now()
	encoded := in.Encoded != nil
	if encoded == (in.Pixels != nil) {
		return fmt.Errorf("transforms: input must have exactly one of Encoded and Pixels: %w", ErrShape)
	}
	var o orientation
	var info ImageInfo
	var stored [2]int
	var jpegData bool
	if encoded {
		var err error
		info, stored, err = decodeInfo(in.Encoded)
		if err != nil {
			return err
		}
		if err := p.Admit(info); err != nil {
			return err
		}
		o = exifOrientation(info.Orientation)
		jpegData = info.Format == "jpeg"
		if !jpegData {
			im, _, err := image.Decode(bytes.NewReader(in.Encoded))
			if err != nil {
				return fmt.Errorf("transforms: decoding %s: %w: %w", info.Format, ErrCorrupt, err)
			}
			w.src.setImage(im, &w.conv)
			stored = [2]int{w.src.w, w.src.h}
			info.Width, info.Height = w.src.w, w.src.h
		}
	} else {
		// Sides are bounded first so that the products below cannot overflow.
		if in.H > maxInputSide || in.W > maxInputSide || int64(in.H)*int64(in.W) > int64(p.limit()) {
			return fmt.Errorf("transforms: %dx%d pixels (limit %d): %w", in.W, in.H, p.limit(), ErrTooLarge)
		}
		if in.H <= 0 || in.W <= 0 || (in.C != 1 && in.C != 3 && in.C != 4) || len(in.Pixels) != in.H*in.W*in.C {
			return fmt.Errorf("transforms: %d pixel bytes for shape %dx%dx%d (HWC, C 1, 3 or 4): %w", len(in.Pixels), in.H, in.W, in.C, ErrShape)
		}
		if in.C == 1 {
			w.src.setGray(in.Pixels, in.W, in.W, in.H)
		} else {
			w.src.setInterleaved(in.Pixels, in.W*in.C, in.C, in.W, in.H)
		}
		stored = [2]int{in.W, in.H}
		info.Width, info.Height = in.W, in.H
	}

	m, nc, err := w.plan(len(dst), l, info, o, stored, r)
	if err != nil {
		return err
	}
	if jpegData {
		if err := w.decodeJPEG(in.Encoded, &m, stored); err != nil {
			return err
		}
	}

	t1 := time.Now()
	w.times[0].Add(int64(t1.Sub(t0)))
	ow, oh := w.pl.Size()
	pix, row, chanStride := strides(l, nc, ow, oh)
	w.resample(dst, &m, nc, chanStride)
	t0 = time.Now()
	w.times[1].Add(int64(t0.Sub(t1)))
	for i := range w.pl.post {
		op := &w.pl.post[i]
		switch op.kind {
		case opFunc:
			op.fn(Image{Pix: dst, C: nc, H: oh, W: ow, Layout: l})
		case opRotate:
			w.rot = growBytes(w.rot, len(dst))
			copy(w.rot, dst)
			rotatePixels(dst, w.rot, op.f, nc, ow, oh, pix, row, chanStride)
		case opBrightness, opContrast, opSaturation:
			jitterPixels(dst, *op, nc, ow*oh, pix, chanStride)
		default:
			w.runAug(dst, op, view{nc: nc, w: ow, h: oh, pix: pix, row: row, cs: chanStride})
		}
		t1 = time.Now()
		w.times[2+op.owner].Add(int64(t1.Sub(t0)))
		t0 = t1
	}
	return nil
}

// plan plans the Chain for an image of info's displayed size, whose stored size is stored and
// orientation o, and maps the plan onto the stored image for a dst of n bytes in layout l: the
// mapping and the output's channel count, which n gives (1 or 3).
func (w *Worker) plan(n int, l Layout, info ImageInfo, o orientation, stored [2]int, r *rand.Rand) (mapping, int, error) {
	p, pl := w.p, &w.pl
	pl.reset(info.Width, info.Height)
	if err := p.planAll(pl, r); err != nil {
		return mapping{}, 0, err
	}
	ow, oh := pl.Size()
	nc := n / (ow * oh)
	if (nc != 1 && nc != 3) || nc*ow*oh != n {
		return mapping{}, 0, fmt.Errorf("transforms: dst of %d bytes for a %dx%d output (want 1 or 3 channels): %w", n, ow, oh, ErrShape)
	}
	if err := p.checkNorm(nc); err != nil {
		return mapping{}, 0, err
	}
	pix, row, _ := strides(l, nc, ow, oh)
	return mapPlan(pl, o, stored[0], stored[1], pix, row), nc, nil
}

// strides are the steps in dst between an output's pixels, its rows and its channels in layout
// l, for nc channels of ow x oh pixels.
func strides(l Layout, nc, ow, oh int) (pix, row, chanStride int) {
	if l == HWC {
		return nc, ow * nc, 1
	}
	return 1, ow, ow * oh
}

// resample runs mapping m's one pass from w.src into dst's nc channels, chanStride apart:
// zeros where m pads, then each output row resampled, converted and stored.
func (w *Worker) resample(dst []byte, m *mapping, nc, chanStride int) {
	if m.padded {
		clear(dst)
	}
	nu, nv := m.u.hi-m.u.lo, m.v.hi-m.v.lo
	if nu <= 0 || nv <= 0 {
		return
	}
	planes := 3
	if w.src.kind == kindGray || (w.src.kind == kindYCbCr && nc == 1) {
		planes = 1
	}
	for c := range planes {
		var prev *planeResampler
		if c > 0 {
			prev = &w.rs[c-1]
		}
		w.rs[c].prepare(&w.src.planes[c], m, prev)
		w.rows[c] = growBytes(w.rows[c], nu)
	}
	for k := range nv {
		for c := range planes {
			w.rs[c].row(w.rows[c], k)
		}
		w.writeRow(dst, m, k, nc, chanStride)
	}
}

// decodeJPEG decodes only what mapping m reads: the blocks around the crop, at the largest
// reduced scale (1/2, 1/4, 1/8) that still leaves at least one decoded sample per output pixel.
// Images the fork does not handle (CMYK, unless exact) go through the standard library.
//
// With ExactDecode the decode is at full scale and as libjpeg-turbo's, into R, G, B planes.
func (w *Worker) decodeJPEG(data []byte, m *mapping, stored [2]int) error {
	exact := w.p.DecodeMode() == ExactDecode
	if mode := w.p.DecodeMode(); mode != FastDecode && mode != DeviceDecode && !exact {
		return fmt.Errorf("transforms: decode mode %d: %w", mode, ErrInvalid)
	}
	scale, region := decodeWindow(m, stored, exact)
	im, err := w.jd.Decode(data, ijpeg.Options{Scale: scale, Region: region, MaxPixels: w.p.limit(), Exact: exact})
	if err != nil && errors.As(err, new(ijpeg.UnsupportedError)) {
		std, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("transforms: decoding jpeg: %w: %w", ErrCorrupt, err)
		}
		w.src.setImage(std, &w.conv)
		return checkSize(w.src.w, w.src.h, stored)
	}
	if err != nil {
		return fmt.Errorf("transforms: decoding jpeg: %w: %w", ErrCorrupt, err)
	}
	if err := checkSize(im.Width, im.Height, stored); err != nil {
		return err
	}
	w.src.setJPEG(im)
	return nil
}

// decodeWindow is what a JPEG decode for mapping m reads of a stored image of stored pixels: the
// largest reduced scale (1/2, 1/4, 1/8; none when exact) that still leaves at least one decoded
// sample per output pixel, and the region of the crop with the filter's reach.
func decodeWindow(m *mapping, stored [2]int, exact bool) (scale int, region image.Rectangle) {
	s := min(m.u.scale, m.v.scale)
	scale = 1
	for _, d := range []int{8, 4, 2} {
		if s >= float64(d) && !exact {
			scale = d
			break
		}
	}
	// The taps reach support*max(plane scale, 1)+1 plane samples beyond the crop; in the
	// coarsest plane (chroma subsampled up to 4x, at the decode scale) that is margin pixels.
	fd := filters[m.filter]
	coarse := float64(4 * scale)
	margin := func(a axis) int { return int(math.Ceil((fd.support*max(a.scale/coarse, 1) + 2) * coarse)) }
	mu, mv := margin(m.u), margin(m.v)
	region = image.Rect(
		int(math.Floor(m.u.off+float64(m.u.lo)*m.u.scale))-mu, int(math.Floor(m.v.off+float64(m.v.lo)*m.v.scale))-mv,
		int(math.Ceil(m.u.off+float64(m.u.hi)*m.u.scale))+mu, int(math.Ceil(m.v.off+float64(m.v.hi)*m.v.scale))+mv,
	).Intersect(image.Rect(0, 0, stored[0], stored[1]))
	if region.Empty() {
		region = image.Rect(0, 0, 1, 1) // a crop wholly in padding reads nothing; decode little
	}
	return scale, region
}

func checkSize(w, h int, stored [2]int) error {
	if w != stored[0] || h != stored[1] {
		return fmt.Errorf("transforms: jpeg decodes to %dx%d, header says %dx%d: %w", w, h, stored[0], stored[1], ErrCorrupt)
	}
	return nil
}

// writeRow converts output row k of the resampled planes to the output colour model and stores
// each pixel at its place in dst: one write per output byte.
func (w *Worker) writeRow(dst []byte, m *mapping, k, nc, chanStride int) {
	nu := m.u.hi - m.u.lo
	p0, p1, p2 := w.rows[0][:nu], w.rows[1], w.rows[2]
	o := m.base + (k+m.v.lo)*m.dv + m.u.lo*m.du
	switch kind := w.src.kind; {
	case nc == 1 && kind == kindRGB:
		p1, p2 = p1[:nu], p2[:nu]
		for j := range nu {
			r, g, b := uint32(p0[j]), uint32(p1[j]), uint32(p2[j])
			dst[o+j*m.du] = byte((r*19595 + g*38470 + b*7471 + 1<<15) >> 16)
		}
	case nc == 1 || (kind == kindGray && nc == 3):
		for c := range nc {
			copyRow(dst, o+c*chanStride, m.du, p0)
		}
	case kind == kindRGB:
		for c, pc := range [3][]byte{p0, p1[:nu], p2[:nu]} {
			copyRow(dst, o+c*chanStride, m.du, pc)
		}
	default: // YCbCr -> RGB, the standard library's integer conversion (image/color).
		ycbcrRow(dst, o, m.du, chanStride, p0, p1[:nu], p2[:nu])
	}
}

// copyRow stores src[j] at dst[o+j*du]. A flipped CHW row (du -1, half the rows of a
// training Chain) reverses 8 bytes at a time.
func copyRow(dst []byte, o, du int, src []byte) {
	switch du {
	case 1:
		copy(dst[o:o+len(src)], src)
		return
	case -1:
		n := len(src)
		d := dst[o-n+1 : o+1]
		j := 0
		for ; j+8 <= n; j += 8 {
			binary.BigEndian.PutUint64(d[n-8-j:], binary.LittleEndian.Uint64(src[j:]))
		}
		for ; j < n; j++ {
			d[n-1-j] = src[j]
		}
		return
	}
	for j, v := range src {
		dst[o+j*du] = v
	}
}

// ycbcrRow converts one row of YCbCr samples to RGB, writing pixel j at dst[o+j*du] (+
// chanStride per channel). Unit steps (CHW, flipped or not) take a loop without index
// arithmetic.
func ycbcrRow(dst []byte, o, du, chanStride int, ys, cbs, crs []byte) {
	n := len(ys)
	cbs, crs = cbs[:n], crs[:n]
	if du == 1 {
		r, g, b := dst[o:o+n], dst[o+chanStride:o+chanStride+n], dst[o+2*chanStride:o+2*chanStride+n]
		ys, cbs, crs, g, b := ys[:len(r)], cbs[:len(r)], crs[:len(r)], g[:len(r)], b[:len(r)]
		for j := ycbcrSIMD(r, g, b, ys, cbs, crs, false); j < n; j++ {
			yy1 := int32(ys[j]) * 0x10101
			cb1 := int32(cbs[j]) - 128
			cr1 := int32(crs[j]) - 128
			r[j] = clampShift(yy1 + 91881*cr1)
			g[j] = clampShift(yy1 - 22554*cb1 - 46802*cr1)
			b[j] = clampShift(yy1 + 116130*cb1)
		}
		return
	}
	if du == -1 { // flipped: the same, written backwards
		lo := o - (n - 1)
		r, g, b := dst[lo:lo+n], dst[lo+chanStride:lo+chanStride+n], dst[lo+2*chanStride:lo+2*chanStride+n]
		for j := ycbcrSIMD(r, g, b, ys, cbs, crs, true); j < n; j++ {
			yy1 := int32(ys[j]) * 0x10101
			cb1 := int32(cbs[j]) - 128
			cr1 := int32(crs[j]) - 128
			d := n - 1 - j
			r[d] = clampShift(yy1 + 91881*cr1)
			g[d] = clampShift(yy1 - 22554*cb1 - 46802*cr1)
			b[d] = clampShift(yy1 + 116130*cb1)
		}
		return
	}
	for j, y := range ys {
		yy1 := int32(y) * 0x10101
		cb1 := int32(cbs[j]) - 128
		cr1 := int32(crs[j]) - 128
		d := o + j*du
		dst[d] = clampShift(yy1 + 91881*cr1)
		dst[d+chanStride] = clampShift(yy1 - 22554*cb1 - 46802*cr1)
		dst[d+2*chanStride] = clampShift(yy1 + 116130*cb1)
	}
}

func clampShift(v int32) byte {
	if uint32(v)&0xff000000 == 0 {
		return byte(v >> 16)
	}
	return byte(^(v >> 31))
}
