package transforms

import "math"

// axis maps one output dimension to source coordinates: output pixel i covers the source interval
// [off + i*scale, off + (i+1)*scale). Pixels outside [lo, hi) are padding (zero).
type axis struct {
	off, scale float64
	n, lo, hi  int
}

func (a *axis) reset(n int) { *a = axis{scale: 1, n: n, hi: n} }

// crop keeps output pixels [start, start+size); parts outside the current output become padding.
func (a *axis) crop(start, size int) {
	a.off += float64(start) * a.scale
	a.lo = min(max(a.lo-start, 0), size)
	a.hi = min(max(a.hi-start, 0), size)
	a.n = size
}

// resize resamples the current output to n pixels. Consecutive resizes fuse into one resample.
func (a *axis) resize(n int) {
	if n == a.n {
		return
	}
	f := float64(n) / float64(a.n)
	a.scale /= f
	a.lo = int(math.Round(float64(a.lo) * f))
	a.hi = int(math.Round(float64(a.hi) * f))
	a.n = n
}

// reversed is the same axis read from the other end of a source of length size.
func (a axis) reversed(size int) axis {
	return axis{off: float64(size) - a.off - float64(a.n)*a.scale, scale: a.scale, n: a.n, lo: a.n - a.hi, hi: a.n - a.lo}
}

// colorOp is one ColorJitter step: kind 0 brightness, 1 contrast, 2 saturation.
type colorOp struct {
	kind uint8
	f    float64
}

// plan is the geometry and colour work of one sample, in displayed (EXIF-oriented) coordinates.
type plan struct {
	x, y   axis
	flip   bool
	filter Filter
	color  []colorOp
}

func (p *plan) reset(w, h int) {
	p.x.reset(w)
	p.y.reset(h)
	p.flip = false
	p.filter = Bilinear
	p.color = p.color[:0]
}

// crop keeps the box (x, y, w, h) of the current, possibly flipped, output.
func (p *plan) crop(x, y, w, h int) {
	if p.flip {
		x = p.x.n - x - w
	}
	p.x.crop(x, w)
	p.y.crop(y, h)
}

// orientation is an EXIF orientation (1..8) decomposed: the displayed image is the stored one
// transposed (if transpose), then mirrored along displayed x and y.
type orientation struct{ transpose, revX, revY bool }

func exifOrientation(o int) orientation {
	switch o {
	case 2:
		return orientation{revX: true}
	case 3:
		return orientation{revX: true, revY: true}
	case 4:
		return orientation{revY: true}
	case 5:
		return orientation{transpose: true}
	case 6:
		return orientation{transpose: true, revX: true}
	case 7:
		return orientation{transpose: true, revX: true, revY: true}
	case 8:
		return orientation{transpose: true, revY: true}
	}
	return orientation{}
}

// mapping is a plan translated to the stored image: u runs along stored x, v along stored y, and
// the output pixel (j, k) of the stored frame lands at dst[base + j*du + k*dv] (per channel).
type mapping struct {
	u, v   axis
	base   int
	du, dv int
	filter Filter
	padded bool
}

// mapPlan translates p for a stored image of sw x sh pixels with orientation o, writing pixels
// pix apart and rows row apart in dst.
func mapPlan(p *plan, o orientation, sw, sh, pix, row int) mapping {
	m := mapping{filter: p.filter}
	m.padded = p.x.lo != 0 || p.x.hi != p.x.n || p.y.lo != 0 || p.y.hi != p.y.n
	// Displayed X comes from stored x (or y if transposed), read backwards if revX.
	ax, ay := p.x, p.y
	nx, ny := sw, sh
	if o.transpose {
		nx, ny = sh, sw
	}
	if o.revX {
		ax = ax.reversed(nx)
	}
	if o.revY {
		ay = ay.reversed(ny)
	}
	// Step of one stored-frame output pixel along displayed x and y in dst.
	sx, bx := pix, 0
	if o.revX != p.flip {
		sx, bx = -pix, (p.x.n-1)*pix
	}
	sy, by := row, 0
	if o.revY {
		sy, by = -row, (p.y.n-1)*row
	}
	m.base = bx + by
	if o.transpose {
		m.u, m.v = ay, ax
		m.du, m.dv = sy, sx
	} else {
		m.u, m.v = ax, ay
		m.du, m.dv = sx, sy
	}
	return m
}
