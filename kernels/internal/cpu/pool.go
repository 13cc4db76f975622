package cpu

import "math"

// PoolGeom is the shape of a max pooling over NCHW data, with Pad pixels of -Inf on each side.
type PoolGeom struct {
	N, C, H, W, K, Stride, Pad int
}

// OutH is the output height.
func (g PoolGeom) OutH() int { return (g.H+2*g.Pad-g.K)/g.Stride + 1 }

// OutW is the output width.
func (g PoolGeom) OutW() int { return (g.W+2*g.Pad-g.K)/g.Stride + 1 }

// MaxPool2D writes each window's maximum to y and its position within the input plane to arg
// (the first maximum on ties; a NaN wins only as the window's first value: the window's values
// are compared in turn with ordered greater-than). Padding never wins: every window
// holds at least one input pixel when Pad <= K/2.
func MaxPool2D(y []float32, arg []int32, x []float32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	hw, ohw := g.H*g.W, oh*ow
	For(g.N*g.C, hw, func(lo, hi int) {
		if g.K == 2 && g.Stride == 2 && g.Pad == 0 {
			maxPool2x2Planes(y[lo*ohw:hi*ohw], arg[lo*ohw:hi*ohw], x[lo*hw:hi*hw], g.H, g.W, oh, ow)
			return
		}
		for p := lo; p < hi; p++ {
			maxPoolPlane(y[p*ohw:(p+1)*ohw], arg[p*ohw:(p+1)*ohw], x[p*hw:(p+1)*hw], g, oh, ow)
		}
	})
}

// maxPoolPlane is MaxPool2D over one plane, any window, with the window loop's result (see
// maxPool2x2): the first value if it is NaN, else the first maximum in row order of the others (a
// later NaN never wins). That is the first maximum in row order of its rows' first maxima, each
// found from -Inf (so that a NaN leading a row is passed over too, and a row of -Inf and NaN
// gives -Inf at its first place), unless the window's first value is NaN. So each row of a window
// is reduced first, then the rows, and every choice is a bit mask applied to the value and the
// offset, so that no branch depends on the data: resnet18's 3x3 stride-2 pooling of 64 planes of
// 112 px took 5.1 ms with the window loop's branches, 3.5 with the masks.
func maxPoolPlane(yp []float32, ap []int32, plane []float32, g PoolGeom, oh, ow int) {
	negInf := math.Float32bits(float32(math.Inf(-1)))
	// The outputs [in0, in1) of a 3-wide stride-2 window (resnet's stem) lie inside the rows, for
	// maxPoolRow3SIMD.
	in0, in1 := 0, 0
	if g.K == 3 && g.Stride == 2 {
		in0, in1 = (g.Pad+1)/2, min(ow, (g.W-3+g.Pad)/2+1)
	}
	for oy := range oh {
		y0 := oy*g.Stride - g.Pad
		ky0, ky1 := max(0, -y0), min(g.K, g.H-y0)
		ys, as := yp[oy*ow:(oy+1)*ow], ap[oy*ow:(oy+1)*ow]
		for ky := ky0; ky < ky1; ky++ {
			r0 := (y0 + ky) * g.W
			row := plane[r0 : r0+g.W]
			done0, done1 := -1, -1 // the outputs the SIMD row did
			if x0 := 2*in0 - g.Pad; in1 > in0 && maxPoolRow3SIMD(ys[in0:in1], as[in0:in1], row[x0:], r0+x0, ky == ky0) {
				done0, done1 = in0, in1
			}
			for ox := 0; ox < ow; ox++ {
				if ox == done0 {
					ox = done1 - 1
					continue
				}
				x0 := ox*g.Stride - g.Pad
				kx0, kx1 := max(0, -x0), min(g.K, g.W-x0)
				mb, mi := negInf, int32(r0+x0+kx0)
				for kx := kx0; kx < kx1; kx++ {
					v := row[x0+kx]
					m := mask(v > math.Float32frombits(mb))
					mb ^= (mb ^ math.Float32bits(v)) & m
					mi ^= (mi ^ int32(r0+x0+kx)) & int32(m)
				}
				if ky == ky0 {
					ys[ox], as[ox] = math.Float32frombits(mb), mi
					continue
				}
				ob := math.Float32bits(ys[ox])
				m := mask(math.Float32frombits(mb) > ys[ox])
				ys[ox] = math.Float32frombits(ob ^ (ob^mb)&m)
				as[ox] ^= (as[ox] ^ mi) & int32(m)
			}
		}
		// A window whose first value is NaN keeps it.
		r0 := (y0 + ky0) * g.W
		for ox := range ow {
			x0 := ox*g.Stride - g.Pad
			first := r0 + x0 + max(0, -x0)
			if v := plane[first]; v != v {
				ys[ox], as[ox] = v, int32(first)
			}
		}
	}
}

// maxPool2x2Planes is maxPool2x2 over consecutive h×w planes of x (as many as y holds).
func maxPool2x2Planes(y []float32, arg []int32, x []float32, h, w, oh, ow int) {
	planes := len(y) / (oh * ow)
	if maxPool2x2SIMD(y, arg, x, planes, h, w, oh, ow) {
		return
	}
	for p := range planes {
		maxPool2x2(y[p*oh*ow:(p+1)*oh*ow], arg[p*oh*ow:(p+1)*oh*ow], x[p*h*w:(p+1)*h*w], w, oh, ow)
	}
}

// maxPool2x2 is MaxPool2D's 2x2 stride-2 unpadded window (the CNN's pooling) over one plane of
// width w, the outputs that maxPoolRowSIMD leaves in Go, with the general loop's result. That
// loop compares b, c, d in turn with the maximum so far (ordered greater-than: false when either
// is NaN), which after a and b is s = b if b > a, else a. Its last two steps, c then d, take
// cd = (d if d > c, else c) when c > s, and sd = (d if d > s, else s) otherwise: the definition
// written out case by case, so it holds for ties, zeros, infinities and NaN alike. The three
// compares after s are independent, and every choice is a bit mask (mask) applied to the floats'
// bits and the offsets, so that no branch depends on the data: the random signs of activations
// mispredicted the general loop's branches (~15 ns an output, ~6.5 with masks).
func maxPool2x2(y []float32, arg []int32, plane []float32, w, oh, ow int) {
	for oy := range oh {
		r := 2 * oy * w
		row0, row1 := plane[r:r+2*ow], plane[r+w:r+w+2*ow]
		yr, ar := y[oy*ow:(oy+1)*ow], arg[oy*ow:(oy+1)*ow]
		for ox := maxPoolRowSIMD(yr, ar, row0, row1, w, r); ox < len(yr); ox++ {
			j := 2 * ox
			a, b, c, d := row0[j], row0[j+1], row1[j], row1[j+1]
			ab, bb, cb, db := math.Float32bits(a), math.Float32bits(b), math.Float32bits(c), math.Float32bits(d)
			m := mask(b > a)
			sb, si := ab^(ab^bb)&m, int(m&1)
			s := math.Float32frombits(sb)
			m = mask(d > c)
			cdb, cdi := cb^(cb^db)&m, w+int(m&1)
			m = mask(d > s) // sd, in place of s
			sb, si = sb^(sb^db)&m, si^(si^(w+1))&int(int32(m))
			m = mask(c > s)
			sb, si = sb^(sb^cdb)&m, si^(si^cdi)&int(int32(m))
			yr[ox] = math.Float32frombits(sb)
			ar[ox] = int32(r + j + si)
		}
	}
}

// MaxPool2DBackward writes dx with each dy routed to its window's maximum (dx is overwritten;
// arg must be MaxPool2D's for g).
func MaxPool2DBackward(dx, dy []float32, arg []int32, g PoolGeom) {
	oh, ow := g.OutH(), g.OutW()
	hw, ohw := g.H*g.W, oh*ow
	For(g.N*g.C, hw, func(lo, hi int) {
		dxs, dys, as := dx[lo*hw:hi*hw], dy[lo*ohw:hi*ohw], arg[lo*ohw:hi*ohw]
		if g.K == 2 && g.Stride == 2 && g.Pad == 0 && maxPoolBack2x2SIMD(dxs, dys, as, hi-lo, g.H, g.W, oh, ow) {
			// The windows tile the plane but for an odd last row or column.
			for p := range hi - lo {
				clearOutside(dxs[p*hw:(p+1)*hw], g.W, 2*oh, 2*ow)
			}
			return
		}
		for p := range hi - lo {
			plane := dxs[p*hw : (p+1)*hw]
			clear(plane)
			for i, a := range as[p*ohw : (p+1)*ohw] {
				plane[a] += dys[p*ohw+i]
			}
		}
	})
}

// clearOutside clears the values of a plane of width w outside its top-left h×cw corner.
func clearOutside(plane []float32, w, h, cw int) {
	if cw < w {
		for r := 0; r < h; r++ {
			clear(plane[r*w+cw : (r+1)*w])
		}
	}
	clear(plane[h*w:])
}

// mask is all ones if c, else zero.
func mask(c bool) uint32 {
	var m uint32
	if c {
		m = 1
	}
	return -m
}
