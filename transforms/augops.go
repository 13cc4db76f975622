package transforms

import "math"

// The pixel steps of the augmentation policies (TrivialAugmentWide, RandAugment, AutoAugment),
// RandomErasing, GaussianBlur, RandomGrayscale and ColorJitterHue. Each follows torchvision
// 0.14's functional_tensor on a uint8 tensor: float32 arithmetic, results truncated towards zero
// by .to(uint8) after clamping to [0, 255], or rounded half to even where torchvision rounds
// (convolutions, grid sampling).

const (
	opAffine       uint8 = iota + opFunc + 1 // m: torchvision's inverse affine matrix; nearest, zero fill
	opBrightnessT                            // f: blend with black
	opSaturationT                            // f: blend with the truncated grey (Color)
	opContrastT                              // f: blend with the mean of the truncated grey
	opSharpness                              // f: blend with the 3x3 smoothed image
	opPosterize                              // n[0]: bits kept
	opSolarize                               // f: threshold; values >= f are inverted
	opAutoContrast                           // per-channel min-max stretch
	opEqualize                               // per-channel histogram equalization
	opInvert                                 // 255 - v
	opGrayscale                              // rgb_to_grayscale(num_output_channels=C)
	opHue                                    // f: hue shift in [-0.5, 0.5]
	opErase                                  // n: top, left, height, width; v: value per channel
	opBlur                                   // n[0]: kernel size; f: sigma
	opPerspective                            // m: torchvision's 8 perspective coefficients; bilinear, zero fill
)

// view is the geometry of an output image in dst: pixel (c, y, x) is at y*row + x*pix + c*cs.
type view struct{ nc, w, h, pix, row, cs int }

func (v view) at(c, y, x int) int { return y*v.row + x*v.pix + c*v.cs }

// runAug applies one of the pixel steps above to dst in place, using the Worker's scratch.
func (w *Worker) runAug(dst []byte, op *pixelOp, v view) {
	n := v.w * v.h
	img := dst[:v.nc*n] // every byte of the image, whatever the layout
	switch op.kind {
	case opAffine:
		w.rot = growBytes(w.rot, len(dst))
		copy(w.rot, dst)
		affinePixels(dst, w.rot, &op.m, v)
	case opBrightnessT, opContrastT:
		ref := float32(0)
		if op.kind == opContrastT {
			ref = meanGrey(dst, v)
		}
		lut := blendLUT(op.f, ref)
		applyLUT(img, &lut)
	case opSaturationT:
		if v.nc != 3 {
			return
		}
		ratio, inv := float32(op.f), float32(1-op.f)
		for i := range n {
			d := i * v.pix
			g := float32(greyT(dst[d], dst[d+v.cs], dst[d+2*v.cs]))
			for c := range 3 {
				e := d + c*v.cs
				dst[e] = trunc8(float32(ratio*float32(dst[e])) + float32(inv*g))
			}
		}
	case opSharpness:
		w.sharpen(dst, op.f, v)
	case opPosterize:
		var lut [256]byte
		mask := byte(0xff << (8 - op.n[0]))
		for i := range lut {
			lut[i] = byte(i) & mask
		}
		applyLUT(img, &lut)
	case opSolarize, opInvert:
		var lut [256]byte
		for i := range lut {
			lut[i] = byte(i)
			if op.kind == opInvert || float64(i) >= op.f {
				lut[i] = 255 - byte(i)
			}
		}
		applyLUT(img, &lut)
	case opAutoContrast, opEqualize:
		w.rot = growBytes(w.rot, n)
		for c := range v.nc {
			p := v.plane(dst, c, w.rot)
			if op.kind == opAutoContrast {
				autoContrast(p)
			} else {
				equalize(p)
			}
			v.putPlane(dst, c, p)
		}
	case opGrayscale:
		if v.nc != 3 {
			return
		}
		for i := range n {
			d := i * v.pix
			g := greyT(dst[d], dst[d+v.cs], dst[d+2*v.cs])
			dst[d], dst[d+v.cs], dst[d+2*v.cs] = g, g, g
		}
	case opHue:
		if v.nc != 3 {
			return
		}
		hue := float32(op.f)
		for i := range n {
			d := i * v.pix
			dst[d], dst[d+v.cs], dst[d+2*v.cs] = hueShift(dst[d], dst[d+v.cs], dst[d+2*v.cs], hue)
		}
	case opErase:
		top, left, h, wd := op.n[0], op.n[1], op.n[2], op.n[3]
		for c := range v.nc {
			for y := top; y < top+h; y++ {
				for x := left; x < left+wd; x++ {
					dst[v.at(c, y, x)] = op.v[min(c, 2)]
				}
			}
		}
	case opBlur:
		w.blur(dst, op.n[0], op.f, v)
	case opPerspective:
		w.rot = growBytes(w.rot, len(dst))
		copy(w.rot, dst)
		perspectivePixels(dst, w.rot, &op.m, v)
	}
}

// Views are packed: a row is w pixels (row == w*pix), so pixel i = y*w + x of channel c is at
// i*pix + c*cs; in CHW (pix 1) a channel is a contiguous plane, in HWC (cs 1) the pixels are.

// plane returns channel c of dst as w*h contiguous bytes: part of dst itself in CHW, otherwise
// gathered into buf (which putPlane then scatters back).
func (v view) plane(dst []byte, c int, buf []byte) []byte {
	n := v.w * v.h
	if v.pix == 1 {
		return dst[c*v.cs : c*v.cs+n]
	}
	buf = buf[:n]
	for i := range buf {
		buf[i] = dst[i*v.pix+c*v.cs]
	}
	return buf
}

// putPlane stores a plane from plane back into channel c of dst.
func (v view) putPlane(dst []byte, c int, p []byte) {
	if v.pix == 1 {
		return // p is dst
	}
	for i, b := range p {
		dst[i*v.pix+c*v.cs] = b
	}
}

func applyLUT(b []byte, lut *[256]byte) {
	for i, x := range b {
		b[i] = lut[x]
	}
}

// trunc8 is torch's clamp(0, 255).to(uint8) of a float32.
func trunc8(f float32) byte {
	switch {
	case !(f > 0):
		return 0
	case f >= 255:
		return 255
	}
	return byte(f)
}

// round8 of a float32 as torch.round (half to even) then a clamped conversion.
func roundEven8(f float32) byte {
	return trunc8(float32(math.RoundToEven(float64(f))))
}

// blendLUT is torchvision's _blend(img, ref, ratio) for every uint8 value: ratio*v + (1-ratio)*ref
// in float32, clamped and truncated.
func blendLUT(ratio float64, ref float32) [256]byte {
	var lut [256]byte
	r, other := float32(ratio), float32(float32(1-ratio)*ref)
	for i := range lut {
		lut[i] = trunc8(float32(r*float32(i)) + other)
	}
	return lut
}

// greyT is torchvision's rgb_to_grayscale of a uint8 tensor: 0.2989 r + 0.587 g + 0.114 b in
// float32, truncated.
func greyT(r, g, b byte) byte {
	s := float32(float32(0.2989)*float32(r)) + float32(float32(0.587)*float32(g))
	return byte(s + float32(float32(0.114)*float32(b)))
}

// meanGrey is the mean of the truncated grey image (the channel itself for one channel), as
// adjust_contrast computes it: the float32 of an exact sum, divided in float32.
func meanGrey(dst []byte, v view) float32 {
	n := v.w * v.h
	var sum uint64
	for i := range n {
		d := i * v.pix
		if v.nc == 3 {
			sum += uint64(greyT(dst[d], dst[d+v.cs], dst[d+2*v.cs]))
		} else {
			sum += uint64(dst[d])
		}
	}
	return float32(sum) / float32(n)
}

// sharpen is adjust_sharpness: the interior of each channel blended with its 3x3 smoothing
// (weights 1/13, centre 5/13, float32, rounded half to even); the border rows and columns keep
// their pixels (blended with themselves, which float32 can move down by one).
func (w *Worker) sharpen(dst []byte, factor float64, v view) {
	if v.w <= 2 || v.h <= 2 {
		return
	}
	n := v.w * v.h
	w.rot = growBytes(w.rot, 2*n)
	in := w.rot[:n]
	k, k5 := float32(1)/float32(13), float32(5)/float32(13)
	ratio, inv := float32(factor), float32(1-factor)
	blend := func(v, b float32) byte { return trunc8(float32(ratio*v) + float32(inv*b)) }
	for c := range v.nc {
		copy(in, v.plane(dst, c, in))
		out := v.plane(dst, c, w.rot[n:2*n]) // written whole below
		for y := range v.h {
			row := in[y*v.w : (y+1)*v.w]
			o := out[y*v.w : (y+1)*v.w]
			if y == 0 || y == v.h-1 {
				for x, b := range row {
					o[x] = blend(float32(b), float32(b))
				}
				continue
			}
			up, down := in[(y-1)*v.w:y*v.w], in[(y+1)*v.w:(y+2)*v.w]
			o[0] = blend(float32(row[0]), float32(row[0]))
			o[v.w-1] = blend(float32(row[v.w-1]), float32(row[v.w-1]))
			for x := 1; x < v.w-1; x++ {
				// conv2d's order: the rows top to bottom, each left to right.
				s := float32(k * float32(up[x-1]))
				s += float32(k * float32(up[x]))
				s += float32(k * float32(up[x+1]))
				s += float32(k * float32(row[x-1]))
				s += float32(k5 * float32(row[x]))
				s += float32(k * float32(row[x+1]))
				s += float32(k * float32(down[x-1]))
				s += float32(k * float32(down[x]))
				s += float32(k * float32(down[x+1]))
				o[x] = blend(float32(row[x]), float32(roundEven8(s)))
			}
		}
		v.putPlane(dst, c, out)
	}
}

// autoContrast stretches a channel's plane p to [0, 255]: (v - min) * (255 / (max - min)) in
// float32, truncated; a constant channel is left as it is.
func autoContrast(p []byte) {
	lo, hi := byte(255), byte(0)
	for _, b := range p {
		lo, hi = min(lo, b), max(hi, b)
	}
	if lo == hi {
		return
	}
	mn := float32(lo)
	scale := float32(255) / (float32(hi) - mn)
	var lut [256]byte
	for i := range lut {
		lut[i] = trunc8(float32((float32(i) - mn) * scale))
	}
	applyLUT(p, &lut)
}

// equalize is torchvision's _scale_channel on a channel's plane p: step = (pixels less those of
// the highest value present) / 255, lut[i] = (pixels below i + step/2) / step, all integer;
// step 0 leaves the channel as it is.
func equalize(p []byte) {
	var hist [256]int
	for _, b := range p {
		hist[b]++
	}
	total, last := 0, 0
	for _, n := range hist {
		total += n
		if n != 0 {
			last = n
		}
	}
	step := (total - last) / 255
	if step == 0 {
		return
	}
	var lut [256]byte
	cum := 0
	for i := range lut {
		lut[i] = byte(min((cum+step/2)/step, 255))
		cum += hist[i]
	}
	applyLUT(p, &lut)
}

// affineMatrix is torchvision's _get_inverse_affine_matrix (inverted): the map from output pixel
// coordinates, relative to the image centre, back to the source. Angles are in degrees.
func affineMatrix(cx, cy, angle, tx, ty, scale, shearX, shearY float64) [8]float64 {
	rot, sx, sy := radians(angle), radians(shearX), radians(shearY)
	a := math.Cos(rot-sy) / math.Cos(sy)
	b := -math.Cos(rot-sy)*math.Tan(sx)/math.Cos(sy) - math.Sin(rot)
	c := math.Sin(rot-sy) / math.Cos(sy)
	d := -math.Sin(rot-sy)*math.Tan(sx)/math.Cos(sy) + math.Cos(rot)
	m := [8]float64{d / scale, -b / scale, 0, -c / scale, a / scale, 0}
	m[2] += m[0]*(-cx-tx) + m[1]*(-cy-ty)
	m[5] += m[3]*(-cx-tx) + m[4]*(-cy-ty)
	m[2] += cx
	m[5] += cy
	return m
}

// piRuntime keeps the degree conversions run-time double divisions, as Python's math.radians and
// math.degrees compute them (a Go constant expression would be rounded once, exactly).
var piRuntime = math.Pi

func radians(deg float64) float64 { return deg * (piRuntime / 180) }
func degrees(rad float64) float64 { return rad * (180 / piRuntime) }

// affinePixels samples src through the inverse matrix m with nearest-neighbour sampling and
// zeros outside, as torchvision's affine on a tensor: the output grid (pixel centres relative to
// the centre) through m, normalized by half the size, then grid_sample's unnormalization
// (align_corners=False) and round half to even, all in float32.
func affinePixels(dst, src []byte, m *[8]float64, v view) {
	hw, hh := float32(0.5*float64(v.w)), float32(0.5*float64(v.h))
	t0, t1, t2 := float32(m[0])/hw, float32(m[1])/hw, float32(m[2])/hw
	t3, t4, t5 := float32(m[3])/hh, float32(m[4])/hh, float32(m[5])/hh
	fw, fh := float32(v.w), float32(v.h)
	x0 := float32(-float64(v.w)*0.5 + 0.5)
	y0 := float32(-float64(v.h)*0.5 + 0.5)
	for y := range v.h {
		gy := y0 + float32(y)
		ry0, ry1 := float32(gy*t1)+t2, float32(gy*t4)+t5
		for x := range v.w {
			gx := x0 + float32(x)
			u := float32(gx*t0) + ry0
			w := float32(gx*t3) + ry1
			ix := float32(float32((u+1)*fw)-1) / 2
			iy := float32(float32((w+1)*fh)-1) / 2
			sx, sy := int(math.RoundToEven(float64(ix))), int(math.RoundToEven(float64(iy)))
			d := v.at(0, y, x)
			if !(ix > -1 && iy > -1 && ix < fw && iy < fh) || sx < 0 || sy < 0 || sx >= v.w || sy >= v.h {
				for c := range v.nc {
					dst[d+c*v.cs] = 0
				}
				continue
			}
			s := v.at(0, sy, sx)
			for c := range v.nc {
				dst[d+c*v.cs] = src[s+c*v.cs]
			}
		}
	}
}

// hueShift is adjust_hue on one pixel: RGB/255 to HSV, the hue moved by hue (mod 1), back to RGB,
// times 255 and truncated, in float32 as _rgb2hsv and _hsv2rgb.
func hueShift(rb, gb, bb byte, hue float32) (byte, byte, byte) {
	r, g, b := float32(rb)/255, float32(gb)/255, float32(bb)/255
	maxc, minc := max(r, g, b), min(r, g, b)
	if maxc == minc { // no saturation: the hue does not matter
		v := trunc8(float32(maxc * 255))
		return v, v, v
	}
	cr := maxc - minc
	s := cr / maxc
	rc, gc, bc := (maxc-r)/cr, (maxc-g)/cr, (maxc-b)/cr
	var h float32
	switch {
	case maxc == r:
		h = bc - gc
	case maxc == g:
		h = float32(2+rc) - bc
	default:
		h = float32(4+gc) - rc
	}
	h = float32(h/6) + 1 // in (0, 2): fmod(h, 1) is h - floor(h), exactly
	h -= float32(math.Floor(float64(h)))
	h += hue
	h -= float32(math.Floor(float64(h)))
	h6 := float32(h * 6)
	fi := float32(math.Floor(float64(h6)))
	f := h6 - fi
	v := maxc
	clamp := func(x float32) float32 { return min(max(x, 0), 1) }
	p := clamp(float32(v * float32(1-s)))
	q := clamp(float32(v * float32(1-float32(s*f))))
	t := clamp(float32(v * float32(1-float32(s*float32(1-f)))))
	var o [3]float32
	switch ((int(fi) % 6) + 6) % 6 {
	case 0:
		o = [3]float32{v, t, p}
	case 1:
		o = [3]float32{q, v, p}
	case 2:
		o = [3]float32{p, v, t}
	case 3:
		o = [3]float32{p, q, v}
	case 4:
		o = [3]float32{t, p, v}
	default:
		o = [3]float32{v, p, q}
	}
	return trunc8(float32(o[0] * 255)), trunc8(float32(o[1] * 255)), trunc8(float32(o[2] * 255))
}

// gaussKernel fills k (odd length) with torchvision's _get_gaussian_kernel1d in float32.
func gaussKernel(k []float32, sigma float64) {
	n := len(k)
	half := float32(float64(n-1) * 0.5)
	s := float32(sigma)
	var sum float32
	for i := range n {
		x := linspace32(-half, half, n, i)
		z := float32(x / s)
		k[i] = float32(math.Exp(float64(float32(-0.5 * float32(z*z)))))
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
}

// reflect is torch's "reflect" padding index of i in [0, n) (no edge repeat), folded again for
// kernels wider than the image.
func reflect(i, n int) int {
	if n == 1 {
		return 0
	}
	for i < 0 || i >= n {
		if i < 0 {
			i = -i
		}
		if i >= n {
			i = 2*(n-1) - i
		}
	}
	return i
}

// blur is gaussian_blur with a size x size kernel of standard deviation sigma, reflect padding:
// separable, the products of the float32 kernel accumulated in float64 in kernel order,
// rounded half to even.
func (w *Worker) blur(dst []byte, size int, sigma float64, v view) {
	var kbuf [maxBlurKernel]float64
	var k32 [maxBlurKernel]float32
	gaussKernel(k32[:size], sigma)
	k := kbuf[:size]
	for i := range k {
		k[i] = float64(k32[i])
	}
	r := size / 2
	n := v.w * v.h
	if need := n + v.w + 2*r + v.w; cap(w.fbuf) < need {
		w.fbuf = make([]float64, need)
	}
	tmp, row, acc := w.fbuf[:n], w.fbuf[n:n+v.w+2*r], w.fbuf[n+v.w+2*r:n+v.w+2*r+v.w]
	w.rot = growBytes(w.rot, n)
	for c := range v.nc {
		p := v.plane(dst, c, w.rot)
		// Horizontal: each row, reflected into row, then one dot product per output.
		for y := range v.h {
			in := p[y*v.w : (y+1)*v.w]
			for i := range row {
				row[i] = float64(in[reflect(i-r, v.w)])
			}
			out := tmp[y*v.w : (y+1)*v.w]
			for x := range out {
				win := row[x : x+size]
				var s float64
				for i, kv := range k {
					s += kv * win[i]
				}
				out[x] = s
			}
		}
		// Vertical: each output row accumulates the kernel's rows of tmp, in kernel order.
		for y := range v.h {
			clear(acc)
			for i, kv := range k {
				src := tmp[reflect(y+i-r, v.h)*v.w:][:len(acc)]
				for x := range acc {
					acc[x] += kv * src[x]
				}
			}
			out := p[y*v.w : (y+1)*v.w]
			for x, s := range acc {
				out[x] = roundEven8(float32(s))
			}
		}
		v.putPlane(dst, c, p)
	}
}

// maxBlurKernel bounds GaussianBlur's kernel size.
const maxBlurKernel = 255

// linspace32 is element i of torch.linspace(start, end, steps) in float32 as torch 1.13's AVX2
// CPU kernel computes it (the one Debian's and PyPI's x86-64 builds run): pairs of 8-wide vectors
// while 16 elements remain, each vector counted up by i*step from its first element; the rest
// one at a time; an element of the first half is start + step*i, of the second end -
// step*(steps-1-i), both fused multiply-adds (GCC contracts them in that kernel).
func linspace32(start, end float32, steps, i int) float32 {
	if steps == 1 {
		return start
	}
	step := (end - start) / float32(steps-1)
	at := func(j int) float32 {
		if j < steps/2 {
			return fma32(step, float32(j), start)
		}
		return fma32(-step, float32(steps-j-1), end)
	}
	const vec = 8
	if i < steps/(2*vec)*2*vec {
		first := i / vec * vec
		return at(first) + float32(float32(i-first)*step)
	}
	return at(i)
}

func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// perspectivePixels samples src through the perspective coefficients c (output pixel (x, y) comes
// from ((c0 x + c1 y + c2) / (c6 x + c7 y + 1), (c3 x + c4 y + c5) / (c6 x + c7 y + 1))) with
// bilinear sampling and zeros outside, as torchvision's perspective on a tensor with a fill: its
// grid, grid_sample's bilinear weights, the value times the sampled mask (the weight of the
// corners inside), rounded half to even, all in float32.
func perspectivePixels(dst, src []byte, c *[8]float64, v view) {
	hw, hh := float32(0.5*float64(v.w)), float32(0.5*float64(v.h))
	t0, t1, t2 := float32(c[0])/hw, float32(c[1])/hw, float32(c[2])/hw
	t3, t4, t5 := float32(c[3])/hh, float32(c[4])/hh, float32(c[5])/hh
	c6, c7 := float32(c[6]), float32(c[7])
	sw, sh := fw32(v.w)/2, fw32(v.h)/2
	for y := range v.h {
		gy := float32(y) + 0.5
		for x := range v.w {
			gx := float32(x) + 0.5
			den := float32(float32(gx*c6)+float32(gy*c7)) + 1
			u := float32(float32(float32(gx*t0)+float32(gy*t1))+t2)/den - 1
			w := float32(float32(float32(gx*t3)+float32(gy*t4))+t5)/den - 1
			ix := float32(float32(u+1)*sw) - 0.5
			iy := float32(float32(w+1)*sh) - 0.5
			d := v.at(0, y, x)
			if !(ix > -2 && iy > -2 && ix < fw32(v.w)+1 && iy < fw32(v.h)+1) {
				for ch := range v.nc {
					dst[d+ch*v.cs] = 0
				}
				continue
			}
			fx, fy := float32(math.Floor(float64(ix))), float32(math.Floor(float64(iy)))
			we, no := ix-fx, iy-fy // distances to the west and north corners
			ea, so := 1-we, 1-no
			wts := [4]float32{float32(so * ea), float32(so * we), float32(no * ea), float32(no * we)} // nw, ne, sw, se
			x0, y0 := int(fx), int(fy)
			var offs [4]int
			var in [4]bool
			for k := range 4 {
				cx, cy := x0+k&1, y0+k>>1
				in[k] = cx >= 0 && cx < v.w && cy >= 0 && cy < v.h
				if in[k] {
					offs[k] = v.at(0, cy, cx)
				}
			}
			var mask float32
			for k := range 4 {
				if in[k] {
					mask = float32(mask + wts[k])
				}
			}
			for ch := range v.nc {
				var s float32
				for k := range 4 {
					if in[k] {
						s = float32(s + float32(float32(src[offs[k]+ch*v.cs])*wts[k]))
					}
				}
				dst[d+ch*v.cs] = roundEven8(float32(s * mask))
			}
		}
	}
}

func fw32(n int) float32 { return float32(n) }

// perspectiveCoeffs is torchvision's _get_perspective_coeffs: the 8 coefficients that map each
// end point to its start point, the 8 x 8 system solved by Gaussian elimination with partial
// pivoting in float64 (torch solves it by least squares, which for 4 points in general position
// is the same solution). ok is false for a singular system.
func perspectiveCoeffs(start, end [4][2]float64) (c [8]float64, ok bool) {
	var a [8][9]float64
	for i := range 4 {
		p1, p2 := end[i], start[i]
		a[2*i] = [9]float64{p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1], p2[0]}
		a[2*i+1] = [9]float64{0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1], p2[1]}
	}
	for col := range 8 {
		piv := col
		for r := col + 1; r < 8; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		if a[piv][col] == 0 {
			return c, false
		}
		a[col], a[piv] = a[piv], a[col]
		for r := range 8 {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for k := col; k < 9; k++ {
				a[r][k] -= f * a[col][k]
			}
		}
	}
	for i := range 8 {
		c[i] = a[i][8] / a[i][i]
	}
	return c, true
}
