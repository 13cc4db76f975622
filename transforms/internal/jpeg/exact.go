package jpeg

// Exact decoding (Options.Exact): what libjpeg-turbo computes with its default decompression
// parameters (JDCT_ISLOW, do_fancy_upsampling, the decoder behind PIL and so torchvision), ported
// from its jidctint.c (jpeg_idct_islow), jdsample.c (h2v1, h1v2 and h2v2 fancy upsampling,
// int_upsample), jdcolor.c (ycc_rgb_convert, ycck_cmyk_convert) and jdapimin.c (the colour space
// a file declares), followed for 4-component files by PIL's CMYK handling (the samples read
// inverted, Adobe's convention, then cmyk2rgb of libImaging/Convert.c). libjpeg-turbo's SIMD
// versions of these compute the same bits as its C ones.

// jpeg_idct_islow's fixed-point constants (CONST_BITS 13, PASS1_BITS 2).
const (
	islowConstBits = 13
	islowPass1Bits = 2

	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_541196100 = 4433
	fix0_765366865 = 6270
	fix0_899976223 = 7373
	fix1_175875602 = 9633
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_562915447 = 20995
	fix3_072711026 = 25172
)

// rangeLimit is libjpeg's range_limit[x & RANGE_MASK] for an IDCT output x (before the +128
// level shift): x wraps to 10 bits, [-512, 511], then is shifted and clamped to a byte.
func rangeLimit(x int32) byte {
	s := ((x+512)&1023 - 512) + 128
	if uint32(s) > 255 {
		return byte(^(s >> 31)) // 0 below, 255 above
	}
	return byte(s)
}

// idctIslow is jpeg_idct_islow on dequantized block b (natural order, b[row*8+col]), storing
// the 8x8 samples to dst with the given stride. b is left as it was. Intermediates are 64-bit
// (JLONG) and the workspace 32-bit, as in the C code.
func idctIslow(dst []byte, stride int, b *block) {
	const (
		d1 = islowConstBits - islowPass1Bits
		d2 = islowConstBits + islowPass1Bits + 3
	)
	var ws [blockSize]int32
	// Pass 1: columns from input into the workspace, scaled up by 2**PASS1_BITS.
	for c := range 8 {
		if b[8+c]|b[16+c]|b[24+c]|b[32+c]|b[40+c]|b[48+c]|b[56+c] == 0 {
			v := b[c] << islowPass1Bits
			for k := range 8 {
				ws[k*8+c] = v
			}
			continue
		}
		z2, z3 := int64(b[16+c]), int64(b[48+c])
		z1 := (z2 + z3) * fix0_541196100
		tmp2 := z1 + z3*-fix1_847759065
		tmp3 := z1 + z2*fix0_765366865
		z2, z3 = int64(b[c]), int64(b[32+c])
		tmp0 := (z2 + z3) << islowConstBits
		tmp1 := (z2 - z3) << islowConstBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		tmp0, tmp1, tmp2, tmp3 = int64(b[56+c]), int64(b[40+c]), int64(b[24+c]), int64(b[8+c])
		o0, o1, o2, o3 := islowOdd(tmp0, tmp1, tmp2, tmp3)

		ws[0*8+c] = int32((tmp10 + o3 + 1<<(d1-1)) >> d1)
		ws[7*8+c] = int32((tmp10 - o3 + 1<<(d1-1)) >> d1)
		ws[1*8+c] = int32((tmp11 + o2 + 1<<(d1-1)) >> d1)
		ws[6*8+c] = int32((tmp11 - o2 + 1<<(d1-1)) >> d1)
		ws[2*8+c] = int32((tmp12 + o1 + 1<<(d1-1)) >> d1)
		ws[5*8+c] = int32((tmp12 - o1 + 1<<(d1-1)) >> d1)
		ws[3*8+c] = int32((tmp13 + o0 + 1<<(d1-1)) >> d1)
		ws[4*8+c] = int32((tmp13 - o0 + 1<<(d1-1)) >> d1)
	}
	// Pass 2: rows from the workspace to the output, descaled by 8 and 2**PASS1_BITS.
	for r := range 8 {
		w := ws[r*8 : r*8+8 : r*8+8]
		out := dst[r*stride : r*stride+8 : r*stride+8]
		if w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := rangeLimit(int32((int64(w[0]) + 1<<(islowPass1Bits+2)) >> (islowPass1Bits + 3)))
			for k := range out {
				out[k] = v
			}
			continue
		}
		z2, z3 := int64(w[2]), int64(w[6])
		z1 := (z2 + z3) * fix0_541196100
		tmp2 := z1 + z3*-fix1_847759065
		tmp3 := z1 + z2*fix0_765366865
		tmp0 := (int64(w[0]) + int64(w[4])) << islowConstBits
		tmp1 := (int64(w[0]) - int64(w[4])) << islowConstBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		o0, o1, o2, o3 := islowOdd(int64(w[7]), int64(w[5]), int64(w[3]), int64(w[1]))

		out[0] = rangeLimit(int32((tmp10 + o3 + 1<<(d2-1)) >> d2))
		out[7] = rangeLimit(int32((tmp10 - o3 + 1<<(d2-1)) >> d2))
		out[1] = rangeLimit(int32((tmp11 + o2 + 1<<(d2-1)) >> d2))
		out[6] = rangeLimit(int32((tmp11 - o2 + 1<<(d2-1)) >> d2))
		out[2] = rangeLimit(int32((tmp12 + o1 + 1<<(d2-1)) >> d2))
		out[5] = rangeLimit(int32((tmp12 - o1 + 1<<(d2-1)) >> d2))
		out[3] = rangeLimit(int32((tmp13 + o0 + 1<<(d2-1)) >> d2))
		out[4] = rangeLimit(int32((tmp13 - o0 + 1<<(d2-1)) >> d2))
	}
}

// islowOdd is the odd part of jpeg_idct_islow (figure 8 of the paper it cites): inputs y7, y5,
// y3, y1, outputs tmp0..tmp3.
func islowOdd(tmp0, tmp1, tmp2, tmp3 int64) (int64, int64, int64, int64) {
	z1 := tmp0 + tmp3
	z2 := tmp1 + tmp2
	z3 := tmp0 + tmp2
	z4 := tmp1 + tmp3
	z5 := (z3 + z4) * fix1_175875602

	tmp0 *= fix0_298631336
	tmp1 *= fix2_053119869
	tmp2 *= fix3_072711026
	tmp3 *= fix1_501321110
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 *= -fix1_961570560
	z4 *= -fix0_390180644

	z3 += z5
	z4 += z5
	return tmp0 + z1 + z3, tmp1 + z2 + z4, tmp2 + z2 + z3, tmp3 + z1 + z4
}

// The tables of jdcolor.c's build_ycc_rgb_table (SCALEBITS 16), indexed by the sample value.
var crR, cbB, crG, cbG = func() (crR, cbB, crG, cbG [256]int32) {
	const half = 1 << 15
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (91881*x + half) >> 16 // FIX(1.40200)
		cbB[i] = (116130*x + half) >> 16
		crG[i] = -46802 * x      // -FIX(0.71414)
		cbG[i] = -22554*x + half // -FIX(0.34414), plus ONE_HALF
	}
	return
}()

// clampByte is libjpeg's sample_range_limit: v clamped to [0, 255].
func clampByte(v int32) byte {
	if uint32(v) > 255 {
		return byte(^(v >> 31))
	}
	return byte(v)
}

// exactPlane is one component's decoded samples in the region, with the number of them that lie
// inside the image (w, h: the plane's downsampled size, libjpeg's downsampled_width and height,
// less the region's start), which bound the edge replication of the upsampling.
type exactPlane struct {
	pix       []byte
	stride    int
	w, h      int
	sx, sy    int // full-resolution pixels per sample
	fancyHori bool
}

// upsample fills dst (w x h samples, stride w) with the full-resolution samples of p as
// libjpeg-turbo's upsampler does: h2v2 and h2v1 fancy (a triangle filter, 3/4 of the nearer
// sample and 1/4 of the further one, with jdsample.c's rounding biases) when p is 2x1 or 2x2
// subsampled and its image is more than 2 samples wide, h1v2 fancy for 1x2, and replication
// (int_upsample) otherwise; samples beyond the image's edge repeat the last one, as libjpeg's
// edge rows and columns do. cs is scratch for one row of column sums.
func upsample(dst []byte, w, h int, p *exactPlane, cs []int32) {
	cw, ch := max(p.w, 1), max(p.h, 1)
	row := func(i int) []byte { i = min(max(i, 0), ch-1); return p.pix[i*p.stride : i*p.stride+cw] }
	for y := range h {
		out := dst[y*w : y*w+w]
		i := min(y/p.sy, ch-1)
		switch {
		case p.sx == 2 && p.sy == 2 && p.fancyHori:
			near, far := row(i), row(i+1)
			if y%2 == 0 {
				far = row(i - 1)
			}
			cs := cs[:cw]
			far = far[:len(cs)]
			for j, v := range near[:len(cs)] {
				cs[j] = 3*int32(v) + int32(far[j])
			}
			fancyH(out, cs, 8, 7, 4)
		case p.sx == 2 && p.sy == 1 && p.fancyHori:
			cs := cs[:cw]
			for j, v := range row(i)[:len(cs)] {
				cs[j] = int32(v)
			}
			fancyH(out, cs, 1, 2, 2)
		case p.sx == 1 && p.sy == 2:
			near, far, bias := row(i), row(i+1), int32(2)
			if y%2 == 0 {
				far, bias = row(i-1), 1
			}
			for x := range out {
				j := min(x, cw-1)
				out[x] = byte((3*int32(near[j]) + int32(far[j]) + bias) >> 2)
			}
		default:
			c := row(i)
			for x := range out {
				out[x] = c[min(x/p.sx, cw-1)]
			}
		}
	}
}

// fancyH is the horizontal half of jdsample.c's h2v1 and h2v2 fancy upsampling: out[2j] is
// (3 cs[j] + cs[j-1] + b0) >> shift and out[2j+1] is (3 cs[j] + cs[j+1] + b1) >> shift, the
// edges of cs repeated; out beyond 2 len(cs) repeats the last sample.
func fancyH(out []byte, cs []int32, b0, b1 int32, shift uint) {
	n := len(cs)
	last := cs[n-1]
	if n == 1 {
		out[0], out[1] = byte((4*last+b0)>>shift), byte((4*last+b1)>>shift)
	} else {
		out[0] = byte((4*cs[0] + b0) >> shift)
		out[1] = byte((3*cs[0] + cs[1] + b1) >> shift)
		for j := 1; j < n-1; j++ {
			t, o := 3*cs[j], out[2*j:2*j+2:2*j+2]
			o[0] = byte((t + cs[j-1] + b0) >> shift)
			o[1] = byte((t + cs[j+1] + b1) >> shift)
		}
		out[2*n-2] = byte((3*last + cs[n-2] + b0) >> shift)
		out[2*n-1] = byte((4*last + b1) >> shift)
	}
	for x := 2 * n; x < len(out); x++ {
		out[x] = out[2*n-1]
	}
}

// finishExact turns the decoded component planes into full-resolution R, G, B planes (or the one
// gray plane) as libjpeg-turbo and PIL would, into buffers of the Decoder, and fills m.
func (dec *Decoder) finishExact(m *Image) {
	d := &dec.d
	*m = Image{Width: d.width, Height: d.height, Comps: 1, Scale: 1}
	hmax, vmax := d.comp[0].h, d.comp[0].v
	stride := d.stride[0]
	rows := len(d.pix[0]) / stride
	x0, y0 := d.rx0*hmax*8, d.ry0*vmax*8
	full := Plane{X0: x0, Y0: y0, Stride: stride, SubX: 1, SubY: 1,
		W: min(d.width, d.rx1*hmax*8) - x0, H: min(d.height, d.ry1*vmax*8) - y0}
	if d.nComp == 1 {
		full.Pix = d.pix[0]
		m.Planes[0] = full
		return
	}
	var planes [maxComponents][]byte
	for i := range d.nComp {
		c := d.comp[i]
		sx, sy := hmax/c.h, vmax/c.v
		if sx == 1 && sy == 1 {
			planes[i] = d.pix[i]
			continue
		}
		dw := (d.width*c.h + hmax - 1) / hmax // downsampled_width
		dh := (d.height*c.v + vmax - 1) / vmax
		p := exactPlane{pix: d.pix[i], stride: d.stride[i], sx: sx, sy: sy, fancyHori: dw > 2,
			w: min(dw-d.rx0*c.h*8, d.stride[i]), h: min(dh-d.ry0*c.v*8, len(d.pix[i])/d.stride[i])}
		buf := dec.up[i]
		if cap(buf) < stride*rows {
			buf = make([]byte, stride*rows)
		}
		buf = buf[:stride*rows]
		dec.up[i] = buf
		if cap(dec.colsum) < p.w {
			dec.colsum = make([]int32, p.w)
		}
		upsample(buf, stride, rows, &p, dec.colsum[:max(p.w, 1)])
		planes[i] = buf
	}
	n := stride * rows
	r, g, b := planes[0][:n], planes[1][:n], planes[2][:n]
	switch {
	case d.nComp == 3 && d.colorTransform():
		g, b = g[:len(r)], b[:len(r)]
		for k, y := range r {
			cb, cr := g[k], b[k]
			r[k] = clampByte(int32(y) + crR[cr])
			g[k] = clampByte(int32(y) + (cbG[cb]+crG[cr])>>16)
			b[k] = clampByte(int32(y) + cbB[cb])
		}
	case d.nComp == 4:
		kk := planes[3][:n]
		ycck := d.colorTransform()
		for k := range r {
			c, mm, yy := r[k], g[k], b[k]
			if ycck { // ycck_cmyk_convert
				y, cb, cr := int32(c), mm, yy
				c = clampByte(255 - (y + crR[cr]))
				mm = clampByte(255 - (y + (cbG[cb]+crG[cr])>>16))
				yy = clampByte(255 - (y + cbB[cb]))
			}
			// PIL reads the samples inverted ("CMYK;I"), then cmyk2rgb: nk - nk*c/255 for each
			// channel with nk = 255 - k, which on the inverted samples is k - k*(255-c)/255.
			nk := int32(kk[k])
			r[k] = cmykChannel(255-int32(c), nk)
			g[k] = cmykChannel(255-int32(mm), nk)
			b[k] = cmykChannel(255-int32(yy), nk)
		}
	}
	m.Comps, m.RGB = 3, true
	for i := range 3 {
		m.Planes[i] = full
		m.Planes[i].Pix = planes[i]
	}
}

// cmykChannel is CLIP8(nk - MULDIV255(c, nk)) of PIL's cmyk2rgb.
func cmykChannel(c, nk int32) byte {
	t := c*nk + 128
	return clampByte(nk - ((t>>8)+t)>>8)
}

// colorTransform reports whether libjpeg would convert the colour (jdapimin.c's
// default_decompress_parms): for 3 components YCbCr rather than RGB, for 4 YCCK rather than CMYK.
func (d *decoder) colorTransform() bool {
	if d.nComp == 4 {
		return d.adobeTransformValid && d.adobeTransform != adobeTransformUnknown
	}
	switch {
	case d.jfif:
		return true
	case d.adobeTransformValid:
		return d.adobeTransform != adobeTransformUnknown
	}
	return !(d.comp[0].c == 'R' && d.comp[1].c == 'G' && d.comp[2].c == 'B')
}
