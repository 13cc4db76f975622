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

// pixelOp is one step on the output pixels, run after the geometry in plan order.
type pixelOp struct {
	kind uint8       // opBrightness, opContrast, opSaturation (ColorJitter), opRotate, opFunc, or an op of augops.go
	f    float64     // the ColorJitter factor, the rotation angle in radians, or the op's magnitude
	fn   func(Image) // opFunc: a user's step
	m    [8]float64  // opAffine's inverse affine matrix (6), opPerspective's coefficients
	n    [4]int      // integer parameters (opPosterize's bits, opErase's box, opBlur's kernel size)
	v    [3]byte     // opErase's value per channel
	// owner is the index in the Chain of the transform that planned the step (Worker.Times).
	owner int
}

const (
	opBrightness uint8 = iota
	opContrast
	opSaturation
	opRotate
	opFunc
)

// Plan is the work one sample gets, built by a Chain's transforms in Compose order from the
// sample's size alone, before any of its pixels is decoded. Its geometry (crops, resizes, flips,
// quarter turns, however many) is fused into one resampling pass from the decoded image straight
// into the output; then its pixel steps (ColorJitter, RandomRotation, Pixels) run on the output, in
// order. Coordinates are those of the output as planned so far: (0, 0) is its top-left pixel and
// Size its width and height. A Plan is reused from sample to sample by its Worker: keep no
// reference to it.
type Plan struct {
	x, y   axis        // the planned output's axes, in the frame of the displayed source
	o      orientation // turns and mirrors from that frame to the output
	filter Filter
	post   []pixelOp
	frozen bool // a pixel step that geometry does not commute with was added
	late   bool // geometry was planned after it
}

func (p *Plan) reset(w, h int) {
	p.x.reset(w)
	p.y.reset(h)
	p.o = orientation{}
	p.filter = Bilinear
	clear(p.post) // drop user closures
	p.post = p.post[:0]
	p.frozen, p.late = false, false
}

// Size returns the width and height of the output as planned so far.
func (p *Plan) Size() (w, h int) {
	if p.o.transpose {
		return p.y.n, p.x.n
	}
	return p.x.n, p.y.n
}

func (p *Plan) geometry() {
	if p.frozen {
		p.late = true
	}
}

// Crop keeps the box of w x h pixels whose top-left corner is (x, y). Parts of the box outside the
// current output become zero padding, so a box larger than the image, or at negative offsets,
// pads it.
func (p *Plan) Crop(x, y, w, h int) {
	p.geometry()
	W, H := p.Size()
	if p.o.revX {
		x = W - x - w
	}
	if p.o.revY {
		y = H - y - h
	}
	if p.o.transpose {
		x, y, w, h = y, x, h, w
	}
	p.x.crop(x, w)
	p.y.crop(y, h)
}

// Resize resamples the output to w x h pixels with filter f (which then applies to the whole
// resampling pass: the last Resize's filter wins). Consecutive resizes fuse into one.
func (p *Plan) Resize(w, h int, f Filter) {
	p.geometry()
	p.filter = f
	if p.o.transpose {
		w, h = h, w
	}
	p.x.resize(w)
	p.y.resize(h)
}

// FlipHorizontal mirrors the output left-right.
func (p *Plan) FlipHorizontal() {
	p.geometry()
	p.o.revX = !p.o.revX
}

// FlipVertical mirrors the output top-bottom.
func (p *Plan) FlipVertical() {
	p.geometry()
	p.o.revY = !p.o.revY
}

// Rotate90 turns the output k quarter turns counterclockwise (negative k: clockwise), as
// numpy.rot90 does: a W x H output becomes H x W when k is odd.
func (p *Plan) Rotate90(k int) {
	p.geometry()
	for range ((k % 4) + 4) % 4 {
		// (X, Y) -> (Y, W-1-X) after the current orientation: compose the linear parts.
		m := p.o.matrix()
		p.o = orientationOf([2][2]int{{m[1][0], m[1][1]}, {-m[0][0], -m[0][1]}})
	}
}

// Pixels adds f as a step on the output pixels: after the geometry has been resampled, f gets the
// sample's output image and changes it in place, in order with the other pixel steps. Geometry
// planned after a Pixels step is an error (it would not move what f drew). f runs on the Worker's
// goroutine; decide anything random in Plan, from r, and let f capture it.
func (p *Plan) Pixels(f func(Image)) {
	p.post = append(p.post, pixelOp{kind: opFunc, fn: f})
	p.frozen = true
}

// matrix is the linear part of o: output (X, Y) = m * (x, y) plus the offset that keeps the image
// on its canvas.
func (o orientation) matrix() [2][2]int {
	sx, sy := 1, 1
	if o.revX {
		sx = -1
	}
	if o.revY {
		sy = -1
	}
	if o.transpose {
		return [2][2]int{{0, sx}, {sy, 0}}
	}
	return [2][2]int{{sx, 0}, {0, sy}}
}

// orientationOf is the orientation whose matrix is m.
func orientationOf(m [2][2]int) orientation {
	if m[0][0] == 0 {
		return orientation{transpose: true, revX: m[0][1] < 0, revY: m[1][0] < 0}
	}
	return orientation{revX: m[0][0] < 0, revY: m[1][1] < 0}
}

// Image is a sample's output pixels as a pixel step (Plan.Pixels) sees them: C channels (1 or 3)
// of H x W uint8 pixels in Pix, in Layout. Pix is the caller's destination: change it in place.
type Image struct {
	Pix     []byte
	C, H, W int
	Layout  Layout
}

// Index returns the position in Pix of channel c of the pixel in column x of row y.
func (m Image) Index(c, y, x int) int {
	if m.Layout == HWC {
		return (y*m.W+x)*m.C + c
	}
	return (c*m.H+y)*m.W + x
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
func mapPlan(p *Plan, o orientation, sw, sh, pix, row int) mapping {
	m := mapping{filter: p.filter}
	m.padded = p.x.lo != 0 || p.x.hi != p.x.n || p.y.lo != 0 || p.y.hi != p.y.n
	// Displayed x comes from stored x (or y if transposed), read backwards if revX.
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
	// Steps in dst of one output pixel along output X and Y, and where each starts, after the
	// plan's own mirrors; then the steps of one planned pixel along displayed x and y.
	w, h := p.Size()
	stepX, stepY, base := pix, row, 0
	if p.o.revX {
		stepX, base = -pix, (w-1)*pix
	}
	if p.o.revY {
		stepY, base = -row, base+(h-1)*row
	}
	sx, sy := stepX, stepY
	if p.o.transpose {
		sx, sy = stepY, stepX
	}
	// Stored order reads displayed x (y) backwards when the image's orientation mirrors it.
	if o.revX {
		base, sx = base+(p.x.n-1)*sx, -sx
	}
	if o.revY {
		base, sy = base+(p.y.n-1)*sy, -sy
	}
	m.base = base
	if o.transpose {
		m.u, m.v = ay, ax
		m.du, m.dv = sy, sx
	} else {
		m.u, m.v = ax, ay
		m.du, m.dv = sx, sy
	}
	return m
}
