package transforms

import "math"

// Fixed-point resampling as PIL does it (Resample.c): weights carry precBits fractional bits and
// each separable pass rounds to uint8, so the output matches PIL's resize to within rounding.
const precBits = 32 - 8 - 2

type filterDef struct {
	support float64
	f       func(x float64) float64
}

var filters = [...]filterDef{
	Bilinear: {1, func(x float64) float64 {
		x = math.Abs(x)
		if x < 1 {
			return 1 - x
		}
		return 0
	}},
	Bicubic: {2, func(x float64) float64 {
		const a = -0.5
		x = math.Abs(x)
		switch {
		case x < 1:
			return ((a+2)*x-(a+3))*x*x + 1
		case x < 2:
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	}},
	Lanczos: {3, func(x float64) float64 {
		if x > -3 && x < 3 {
			return sinc(x) * sinc(x/3)
		}
		return 0
	}},
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

// weights are the taps of one axis of a resample: output i (lo <= i < hi) reads k source pixels
// from start[i-lo] with coefficients w[(i-lo)*k:]. Every output has exactly k taps, the most any
// output needs (zero weights pad the short ones, start is clamped inside the plane), so that
// the inner loops have a fixed length.
type weights struct {
	start []int32
	w     []int32
	k     int
	fw    []float64
	// For the SIMD horizontal pass: the largest start, and the weights tap-major (wt[t*n+i] =
	// w[i*k+t]) when the kernel takes this k.
	maxStart int32
	wt       []int32
}

// compute fills ws for axis a in plane coordinates (source pixel = ratio * full-resolution
// coordinate - origin) on a plane of size pixels.
func (ws *weights) compute(a axis, ratio float64, origin, size int, fd filterDef) {
	n := a.hi - a.lo
	scale := a.scale * ratio
	off := a.off*ratio - float64(origin)
	fscale := max(scale, 1)
	support := fd.support * fscale
	ss := 1 / fscale
	ws.start = grow32(ws.start, n)
	// First pass: each output's tap range; k is the widest (bilinear upsampling needs 2 taps,
	// not the 3 its support suggests).
	k := 1
	for i := range n {
		center := off + (float64(i+a.lo)+0.5)*scale
		xmin, xmax := taps(center, support, size)
		ws.start[i] = int32(xmin)
		k = max(k, xmax-xmin)
	}
	ws.k = k
	ws.w = grow32(ws.w, n*k)
	if cap(ws.fw) < k {
		ws.fw = make([]float64, k)
	}
	fw := ws.fw[:k]
	for i := range n {
		center := off + (float64(i+a.lo)+0.5)*scale
		xmin, xmax := taps(center, support, size)
		cnt := xmax - xmin
		sum := 0.0
		for j := range cnt {
			x := (float64(j+xmin) - center + 0.5) * ss
			var v float64
			if fd.support == 1 { // bilinear, inlined: most Chains use nothing else
				v = max(1-math.Abs(x), 0)
			} else {
				v = fd.f(x)
			}
			fw[j] = v
			sum += v
		}
		if sum == 0 { // the box fell between taps: nearest pixel
			fw[0], sum, cnt = 1, 1, 1
		}
		start := min(xmin, size-k)
		row := ws.w[i*k : (i+1)*k]
		clear(row)
		for j := range cnt {
			v := fw[j] / sum * (1 << precBits)
			if v < 0 {
				row[xmin-start+j] = int32(v - 0.5)
			} else {
				row[xmin-start+j] = int32(v + 0.5)
			}
		}
		ws.start[i] = int32(start)
	}
	ws.finish()
}

// finish sets what the SIMD horizontal pass needs from start and w.
func (ws *weights) finish() {
	n, k := len(ws.start), ws.k
	ws.maxStart = 0
	for _, s := range ws.start {
		ws.maxStart = max(ws.maxStart, s)
	}
	ws.wt = ws.wt[:0] // never stale: horizontalSIMD declines an empty wt
	if avx2 && k >= 2 && k <= 4 {
		ws.wt = grow32(ws.wt, n*k)
		for i := range n {
			for t := range k {
				ws.wt[t*n+i] = ws.w[i*k+t]
			}
		}
	}
}

// taps is PIL's tap range [xmin, xmax) for an output centred at center, inside [0, size).
func taps(center, support float64, size int) (xmin, xmax int) {
	xmin = max(int(center-support+0.5), 0)
	xmax = min(int(center+support+0.5), size)
	if xmin >= size { // a crop past the edge: clamp to the last pixel
		xmin, xmax = size-1, size
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	return xmin, xmax
}

func grow32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n, n+n/4)
	}
	return s[:n]
}

func growBytes(s []byte, n int) []byte {
	if cap(s) < n {
		return make([]byte, n, n+n/4)
	}
	return s[:n]
}

func clip8(v int32) byte {
	v >>= precBits
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return byte(v)
}

// plane is one channel of a source image: pixel (x, y) is pix[y*stride + x*step]. rx and ry
// convert full-resolution stored coordinates to this plane's (subsampled or scaled) ones, and
// x0, y0 are the plane coordinates of its first pixel (a plane may hold only a region).
type plane struct {
	pix          []byte
	stride, step int
	w, h         int
	rx, ry       float64
	x0, y0       int
}

// planeResampler resamples one plane of a source to the output grid of a mapping: prepare runs
// the horizontal pass over the source rows the crop needs, row then produces one output row by
// the vertical pass, so that a row of every plane is converted and stored while it is in cache.
type planeResampler struct {
	own    [2]weights // this plane's taps, unless it shares the previous plane's
	wx, wy *weights
	tmp    []byte
	ymin   int
	nu     int
	geom   planeGeom // the plane the taps are for
}

// planeGeom is what a plane's taps depend on (besides the mapping, the same for every plane).
type planeGeom struct {
	w, h, x0, y0 int
	rx, ry       float64
}

// prepare runs the horizontal pass of plane p. prev, if not nil, is the previous plane's
// resampler: a plane of the same geometry (Cr after Cb, G and B after R) uses its taps.
func (rs *planeResampler) prepare(p *plane, m *mapping, prev *planeResampler) {
	fd := filters[m.filter]
	nu, nv := m.u.hi-m.u.lo, m.v.hi-m.v.lo
	rs.nu = nu
	rs.geom = planeGeom{w: p.w, h: p.h, x0: p.x0, y0: p.y0, rx: p.rx, ry: p.ry}
	if prev != nil && prev.geom == rs.geom {
		rs.wx, rs.wy = prev.wx, prev.wy
	} else {
		rs.wx, rs.wy = &rs.own[0], &rs.own[1]
		rs.wx.compute(m.u, p.rx, p.x0, p.w, fd)
		rs.wy.compute(m.v, p.ry, p.y0, p.h, fd)
	}
	ymin, ymax := int(rs.wy.start[0]), 0
	for k := range nv {
		ymin = min(ymin, int(rs.wy.start[k]))
		ymax = max(ymax, int(rs.wy.start[k])+rs.wy.k)
	}
	rs.ymin = ymin
	rows := ymax - ymin
	rs.tmp = growBytes(rs.tmp, rows*nu)
	tmp := rs.tmp
	for y := range rows {
		src := p.pix[(y+ymin)*p.stride:]
		dst := tmp[y*nu : (y+1)*nu]
		switch {
		case horizontalSIMD(dst, src, p.step, rs.wx):
		case p.step == 3 && rs.wx.k == 2:
			horizontal2Step3(dst, src, rs.wx)
		case p.step == 3 && rs.wx.k == 3:
			horizontal3Step3(dst, src, rs.wx)
		case p.step == 3 && rs.wx.k == 4:
			horizontal4Step3(dst, src, rs.wx)
		case p.step != 1:
			horizontalN(dst, src, p.step, rs.wx)
		case rs.wx.k == 2:
			horizontal2(dst, src, rs.wx)
		case rs.wx.k == 3:
			horizontal3(dst, src, rs.wx)
		case rs.wx.k == 4:
			horizontal4(dst, src, rs.wx)
		case rs.wx.k == 5:
			horizontal5(dst, src, rs.wx)
		default:
			horizontalK(dst, src, rs.wx)
		}
	}
}

// row writes output row k (of the valid region) into dst[:nu].
func (rs *planeResampler) row(dst []byte, k int) {
	wy := rs.wy
	s0 := int(wy.start[k]) - rs.ymin
	vertical(dst[:rs.nu], rs.tmp[s0*rs.nu:], rs.nu, wy.w[k*wy.k:(k+1)*wy.k])
}

const half = 1 << (precBits - 1) // rounds the fixed-point sums

func horizontal2(dst, src []byte, ws *weights) {
	w, st := ws.w[:2*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := int(st[j])
		p := src[s : s+2 : s+2]
		ww := w[2*j : 2*j+2 : 2*j+2]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[1])*ww[1])
	}
}

func horizontal4(dst, src []byte, ws *weights) {
	w, st := ws.w[:4*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := int(st[j])
		p := src[s : s+4 : s+4]
		ww := w[4*j : 4*j+4 : 4*j+4]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[1])*ww[1] + int32(p[2])*ww[2] + int32(p[3])*ww[3])
	}
}

func horizontal3(dst, src []byte, ws *weights) {
	w, st := ws.w[:3*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := int(st[j])
		p := src[s : s+3 : s+3]
		ww := w[3*j : 3*j+3 : 3*j+3]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[1])*ww[1] + int32(p[2])*ww[2])
	}
}

func horizontal5(dst, src []byte, ws *weights) {
	w, st := ws.w[:5*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := int(st[j])
		p := src[s : s+5 : s+5]
		ww := w[5*j : 5*j+5 : 5*j+5]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[1])*ww[1] + int32(p[2])*ww[2] + int32(p[3])*ww[3] + int32(p[4])*ww[4])
	}
}

func horizontalK(dst, src []byte, ws *weights) {
	k := ws.k
	for j := range dst {
		s := int(ws.start[j])
		p := src[s : s+k]
		acc := int32(half)
		for t, wt := range ws.w[j*k : (j+1)*k] {
			acc += int32(p[t]) * wt
		}
		dst[j] = clip8(acc)
	}
}

// The Step3 kernels read one channel of interleaved RGB (raw HWC input, packed shards): tap t of
// output j is src[3*(start[j]+t)]. They add the same products in the same order as horizontalN,
// so their output is identical; the constant step lets the compiler drop the per-tap bounds
// checks and multiplications.

func horizontal2Step3(dst, src []byte, ws *weights) {
	w, st := ws.w[:2*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := 3 * int(st[j])
		p := src[s : s+4 : s+4]
		ww := w[2*j : 2*j+2 : 2*j+2]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[3])*ww[1])
	}
}

func horizontal3Step3(dst, src []byte, ws *weights) {
	w, st := ws.w[:3*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := 3 * int(st[j])
		p := src[s : s+7 : s+7]
		ww := w[3*j : 3*j+3 : 3*j+3]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[3])*ww[1] + int32(p[6])*ww[2])
	}
}

func horizontal4Step3(dst, src []byte, ws *weights) {
	w, st := ws.w[:4*len(dst)], ws.start[:len(dst)]
	for j := range dst {
		s := 3 * int(st[j])
		p := src[s : s+10 : s+10]
		ww := w[4*j : 4*j+4 : 4*j+4]
		dst[j] = clip8(half + int32(p[0])*ww[0] + int32(p[3])*ww[1] + int32(p[6])*ww[2] + int32(p[9])*ww[3])
	}
}

func horizontalN(dst, src []byte, step int, ws *weights) {
	k := ws.k
	for j := range dst {
		s := int(ws.start[j])
		acc := int32(half)
		for t, wt := range ws.w[j*k : (j+1)*k] {
			acc += int32(src[(s+t)*step]) * wt
		}
		dst[j] = clip8(acc)
	}
}

// vertical combines len(w) rows of src, stride apart, into dst. Zero-weight rows (padding) are
// skipped.
func vertical(dst, src []byte, stride int, w []int32) {
	n := len(dst)
	var rows [8][]byte
	var ws [8]int32
	m := 0
	for t, wt := range w {
		if wt == 0 {
			continue
		}
		if m == len(rows) { // wide filters: the general loop
			verticalK(dst, src, stride, w)
			return
		}
		rows[m], ws[m] = src[t*stride:t*stride+n], wt
		m++
	}
	if m == 1 {
		copy(dst, rows[0]) // a single tap has weight 1
		return
	}
	// The SIMD kernel does the multiples of 8; the loops below the rest.
	j0 := verticalSIMD(dst, &rows, &ws, m)
	switch m {
	case 2:
		r0, r1, w0, w1 := rows[0][:n], rows[1][:n], ws[0], ws[1]
		for j := j0; j < n; j++ {
			dst[j] = clip8(half + int32(r0[j])*w0 + int32(r1[j])*w1)
		}
	case 3:
		r0, r1, r2, w0, w1, w2 := rows[0][:n], rows[1][:n], rows[2][:n], ws[0], ws[1], ws[2]
		for j := j0; j < n; j++ {
			dst[j] = clip8(half + int32(r0[j])*w0 + int32(r1[j])*w1 + int32(r2[j])*w2)
		}
	case 4:
		r0, r1, r2, r3 := rows[0][:n], rows[1][:n], rows[2][:n], rows[3][:n]
		w0, w1, w2, w3 := ws[0], ws[1], ws[2], ws[3]
		for j := j0; j < n; j++ {
			dst[j] = clip8(half + int32(r0[j])*w0 + int32(r1[j])*w1 + int32(r2[j])*w2 + int32(r3[j])*w3)
		}
	default:
		verticalK(dst[j0:], src[j0:], stride, w)
	}
}

func verticalK(dst, src []byte, stride int, w []int32) {
	for j := range dst {
		acc := int32(half)
		for t, wt := range w {
			acc += int32(src[t*stride+j]) * wt
		}
		dst[j] = clip8(acc)
	}
}
