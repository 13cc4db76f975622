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

// weights are the taps of one axis of a resample: output i (lo <= i < hi) reads count[i-lo]
// source pixels from start[i-lo] with coefficients w[(i-lo)*k:].
type weights struct {
	start, count []int32
	w            []int32
	k            int
	fw           []float64
}

// compute fills ws for axis a in plane coordinates (source pixel = ratio * full-resolution
// coordinate) on a plane of size pixels. A pure axis (integer crop, ratio 1) gets one tap each.
func (ws *weights) compute(a axis, ratio float64, size int, fd filterDef) {
	n := a.hi - a.lo
	scale := a.scale * ratio
	off := a.off * ratio
	fscale := max(scale, 1)
	support := fd.support * fscale
	ws.k = int(math.Ceil(support))*2 + 1
	ws.start = grow32(ws.start, n)
	ws.count = grow32(ws.count, n)
	ws.w = grow32(ws.w, n*ws.k)
	if cap(ws.fw) < ws.k {
		ws.fw = make([]float64, ws.k)
	}
	fw := ws.fw[:ws.k]
	ss := 1 / fscale
	for i := range n {
		center := off + (float64(i+a.lo)+0.5)*scale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), size)
		if xmin >= size { // a crop past the edge: clamp to the last pixel
			xmin = size - 1
			xmax = size
		}
		if xmax <= xmin {
			xmax = xmin + 1
		}
		cnt := min(xmax-xmin, ws.k)
		sum := 0.0
		for j := range cnt {
			v := fd.f((float64(j+xmin) - center + 0.5) * ss)
			fw[j] = v
			sum += v
		}
		row := ws.w[i*ws.k : (i+1)*ws.k]
		clear(row)
		if sum == 0 { // the box fell between taps: nearest pixel
			fw[0], sum, cnt = 1, 1, 1
		}
		for j := range cnt {
			v := fw[j] / sum * (1 << precBits)
			if v < 0 {
				row[j] = int32(v - 0.5)
			} else {
				row[j] = int32(v + 0.5)
			}
		}
		ws.start[i] = int32(xmin)
		ws.count[i] = int32(cnt)
	}
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
// convert full-resolution stored coordinates to this plane's (subsampled or scaled) ones.
type plane struct {
	pix          []byte
	stride, step int
	w, h         int
	rx, ry       float64
}

// resampler holds one Worker's resampling scratch.
type resampler struct {
	wx, wy weights
	tmp    []byte
}

// resample writes the valid region of m's output for plane p into out (row-major, (u.hi-u.lo)
// columns): a horizontal pass over the source rows the vertical taps need, then a vertical pass.
func (rs *resampler) resample(out []byte, p *plane, m *mapping) {
	fd := filters[m.filter]
	nu, nv := m.u.hi-m.u.lo, m.v.hi-m.v.lo
	rs.wx.compute(m.u, p.rx, p.w, fd)
	rs.wy.compute(m.v, p.ry, p.h, fd)
	ymin := int(rs.wy.start[0])
	ymax := ymin
	for k := range nv {
		ymin = min(ymin, int(rs.wy.start[k]))
		ymax = max(ymax, int(rs.wy.start[k]+rs.wy.count[k]))
	}
	rows := ymax - ymin
	rs.tmp = growBytes(rs.tmp, rows*nu)
	tmp := rs.tmp
	wx := &rs.wx
	for y := range rows {
		src := p.pix[(y+ymin)*p.stride:]
		dst := tmp[y*nu : (y+1)*nu]
		if p.step == 1 {
			horizontal1(dst, src, wx)
		} else {
			horizontalN(dst, src, p.step, wx)
		}
	}
	wy := &rs.wy
	for k := range nv {
		s0, cnt := int(wy.start[k])-ymin, int(wy.count[k])
		ww := wy.w[k*wy.k : k*wy.k+cnt]
		dst := out[k*nu : (k+1)*nu]
		vertical(dst, tmp[s0*nu:], nu, ww)
	}
}

func horizontal1(dst, src []byte, ws *weights) {
	k := ws.k
	for j := range dst {
		s, c := int(ws.start[j]), int(ws.count[j])
		w := ws.w[j*k : j*k+c]
		px := src[s : s+c]
		acc := int32(1 << (precBits - 1))
		for t, wt := range w {
			acc += int32(px[t]) * wt
		}
		dst[j] = clip8(acc)
	}
}

func horizontalN(dst, src []byte, step int, ws *weights) {
	k := ws.k
	for j := range dst {
		s, c := int(ws.start[j]), int(ws.count[j])
		w := ws.w[j*k : j*k+c]
		acc := int32(1 << (precBits - 1))
		for t, wt := range w {
			acc += int32(src[(s+t)*step]) * wt
		}
		dst[j] = clip8(acc)
	}
}

func vertical(dst, src []byte, stride int, w []int32) {
	switch len(w) {
	case 1:
		copy(dst, src[:len(dst)])
	case 2:
		r0, r1 := src[:len(dst)], src[stride:stride+len(dst)]
		w0, w1 := w[0], w[1]
		for j := range dst {
			dst[j] = clip8(1<<(precBits-1) + int32(r0[j])*w0 + int32(r1[j])*w1)
		}
	default:
		for j := range dst {
			acc := int32(1 << (precBits - 1))
			for t, wt := range w {
				acc += int32(src[t*stride+j]) * wt
			}
			dst[j] = clip8(acc)
		}
	}
}
