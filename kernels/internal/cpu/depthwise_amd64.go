//go:build !noasm

package cpu

import (
	"math"
	"sync"

	"golang.org/x/sys/cpu"
)

// dwAVX2 selects the depthwise kernels of depthwise_amd64.s (the weight gradient's float64 sums
// use FMA: exact products of float32s, so the same sums as mul then add).
var dwAVX2 = hasAVX2 && cpu.X86.HasFMA

// dwLanes is the number of planes (channels of one sample) a depthwise tile interleaves: pixel i
// of the tile's plane l is at [i*dwLanes+l], so that one AVX2 vector holds one pixel of each
// plane and the kernels compute each lane in the Go loops' order.
const dwLanes = 8

// dwTapsAVX2 computes n outputs (out, outStep bytes apart) of a depthwise tile: each starts as
// the 8 floats at init and adds, tap after tap, the rounded product of a tap's weights (ta rows
// of tb taps at w, 32 bytes apart) with its input: output i's first tap reads in + i*inStep,
// each next tap of a row tapCol bytes on, each next row tapRow bytes past the row's end.
//
//go:noescape
func dwTapsAVX2(out, in, w, init *float32, n, outStep, inStep, ta, tb, tapCol, tapRow int)

// dwGradRowAVX2 adds one output row's products to the float64 weight gradients of one kernel
// row (acc: k taps of 8 lanes): for each tap kw, acc[kw] += dy[ox]·x[ox*xstep/32 + kw] (pixels of
// 8 lanes) for ox in [cols[2kw], cols[2kw+1]), in ox order.
//
//go:noescape
func dwGradRowAVX2(acc *float64, dy, x *float32, k int, cols *int, xstep int)

// dwScratch is a depthwise call's packed weights and one parallel part's tiles; pooled, so that
// the kernels allocate nothing in steady state.
type dwScratch struct {
	w, init []float32 // the weights [group][K*K][8] and biases [group][8] of each group of 8 channels
	ok      []bool    // whether a group's tiles may run the assembly (see depthwiseSIMD)
	sub     []float32 // one group's weights in dx's phase order
	in, out []float32 // one tile's input and output
	dense   []float32 // one plane group interleaved, before its rows are spaced out
	acc     []float64 // one group's weight gradient
}

var dwScratches = sync.Pool{New: func() any { return new(dwScratch) }}

// dwPackWeights packs w ([C][K*K]) and bias ([C], or nil: +0) into d.w and d.init by groups of 8
// channels (lanes past C: 0), and sets d.ok for each group: its weights are finite and, with
// checkBias, no bias is -0.
func (d *dwScratch) dwPackWeights(w, bias []float32, c, kk int, checkBias bool) {
	groups := (c + dwLanes - 1) / dwLanes
	d.w, d.init, d.ok = grow(d.w, groups*kk*dwLanes), grow(d.init, groups*dwLanes), grow(d.ok, groups)
	clear(d.w)
	clear(d.init)
	for gi := range groups {
		ok := true
		for l := range min(dwLanes, c-gi*dwLanes) {
			ch := gi*dwLanes + l
			for t, v := range w[ch*kk : (ch+1)*kk] {
				d.w[(gi*kk+t)*dwLanes+l] = v
				ok = ok && !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v))
			}
			if bias != nil {
				d.init[gi*dwLanes+l] = bias[ch]
				ok = ok && !(checkBias && math.Float32bits(bias[ch]) == 1<<31)
			}
		}
		d.ok[gi] = ok
	}
}

// dwTransposeAVX2 transposes n blocks of 8×8 floats: row i of a block from src + i*ss bytes to
// column i, rows ds bytes apart, at dst; each next block sa bytes on in src and da in dst.
//
//go:noescape
func dwTransposeAVX2(dst, src *float32, n, ds, da, ss, sa int)

// dwPack interleaves live planes of h×w floats (src, one after another) into t: pixel (j, k) of
// plane l at [((j*tw)+off+k)*8+l]; the lanes past live are zeroed, the other pixels of t left
// as they are. dense (h*w*8 floats) is scratch.
func dwPack(t, src, dense []float32, live, h, w, tw, off int) {
	hw := h * w
	if live == dwLanes && hw >= dwLanes {
		_ = src[dwLanes*hw-1]
		if tw == w && off == 0 {
			dense = t[:hw*dwLanes]
		}
		dense = dense[:hw*dwLanes]
		dwTransposeAVX2(&dense[0], &src[0], hw/dwLanes, 4*dwLanes, 4*dwLanes*dwLanes, 4*hw, 4*dwLanes)
		for i := hw &^ (dwLanes - 1); i < hw; i++ {
			for l := range dwLanes {
				dense[i*dwLanes+l] = src[l*hw+i]
			}
		}
		if &dense[0] != &t[0] {
			for j := range h {
				copy(t[(j*tw+off)*dwLanes:][:w*dwLanes], dense[j*w*dwLanes:])
			}
		}
		return
	}
	for l := range dwLanes {
		if l >= live {
			for j := range h {
				d := t[(j*tw+off)*dwLanes+l:]
				for k := range w {
					d[k*dwLanes] = 0
				}
			}
			continue
		}
		plane := src[l*hw : (l+1)*hw]
		for j := range h {
			d := t[(j*tw+off)*dwLanes+l:]
			for k, v := range plane[j*w : (j+1)*w] {
				d[k*dwLanes] = v
			}
		}
	}
}

// dwUnpack copies the first live lanes of the n pixels of t to planes of n floats (dst, one after
// another).
func dwUnpack(dst, t []float32, live, n int) {
	i0 := 0
	if live == dwLanes && n >= dwLanes {
		_, _ = dst[dwLanes*n-1], t[dwLanes*n-1]
		dwTransposeAVX2(&dst[0], &t[0], n/dwLanes, 4*n, 4*dwLanes, 4*dwLanes, 4*dwLanes*dwLanes)
		i0 = n &^ (dwLanes - 1)
	}
	for l := range live {
		plane := dst[l*n : (l+1)*n]
		for i := i0; i < n; i++ {
			plane[i] = t[i*dwLanes+l]
		}
	}
}

// depthwiseSIMD computes DepthwiseConv2D with the assembly, 8 channels of one sample at a time,
// if the CPU has it, and reports whether it did. The tile's input has zero columns around each
// row, and every output of a row adds all K taps of each of its kernel rows that lie inside the
// input (the rows are exact): the taps on padding columns add w·0 = ±0, which leaves every sum as
// the Go loop's (that adds no such tap) as long as no sum is -0 and no weight is infinite or NaN.
// A sum starts from the bias (or +0) and only -0 + -0 is -0, so the groups of channels with a
// non-finite weight or a -0 bias run the Go loop.
func depthwiseSIMD(y, x, w, bias []float32, g DepthwiseGeom) bool {
	oh, ow := g.OutH(), g.OutW()
	if !dwAVX2 || g.N*g.C == 0 || oh <= 0 || ow <= 0 {
		return false
	}
	hw, ohw, kk, s := g.H*g.W, oh*ow, g.K*g.K, g.Stride
	_, _, _ = y[g.N*g.C*ohw-1], x[g.N*g.C*hw-1], w[g.C*kk-1]
	d := dwScratches.Get().(*dwScratch)
	defer dwScratches.Put(d)
	d.dwPackWeights(w, bias, g.C, kk, true)
	groups := (g.C + dwLanes - 1) / dwLanes
	tw := max(g.W+g.Pad, (ow-1)*s+g.K) // the tile's row: Pad zeros, the input row, zeros
	rows, cols := g.tapRanges()
	For(g.N*groups, ohw*kk*dwLanes, func(lo, hi int) {
		t := dwScratches.Get().(*dwScratch)
		defer dwScratches.Put(t)
		t.in, t.out = grow(t.in, g.H*tw*dwLanes), grow(t.out, ohw*dwLanes)
		t.dense = grow(t.dense, hw*dwLanes)
		clear(t.in)
		for it := lo; it < hi; it++ {
			n, gi := it/groups, it%groups
			p0, live := n*g.C+gi*dwLanes, min(dwLanes, g.C-gi*dwLanes)
			if !d.ok[gi] {
				for p := p0; p < p0+live; p++ {
					depthwisePlane(y, x, w, bias, g, p, rows, cols)
				}
				continue
			}
			dwPack(t.in, x[p0*hw:(p0+live)*hw], t.dense, live, g.H, g.W, tw, g.Pad)
			for oy := range oh {
				kh0, kh1 := max(0, g.Pad-oy*s), min(g.K, g.H+g.Pad-oy*s)
				in, wk := &t.in[0], &d.w[0]
				if kh0 < kh1 {
					in, wk = &t.in[(oy*s-g.Pad+kh0)*tw*dwLanes], &d.w[(gi*kk+kh0*g.K)*dwLanes]
				}
				dwTapsAVX2(&t.out[oy*ow*dwLanes], in, wk, &d.init[gi*dwLanes],
					ow, 4*dwLanes, 4*dwLanes*s, max(0, kh1-kh0), g.K, 4*dwLanes, 4*dwLanes*(tw-g.K))
			}
			dwUnpack(y[p0*ohw:(p0+live)*ohw], t.out, live, ohw)
		}
	})
	return true
}

// dwPhase is one phase of dx for stride s: the inputs (ry + i*s, rx + j*s), which the kernel
// taps (kr + a*s, kc + b*s), a < na, b < nb, read.
type dwPhase struct {
	ry, rx, kr, kc, na, nb int
	sub                    int // its weights' offset in dwScratch.sub: [na][nb][8]
}

// dwPhases returns g's dx phases and the columns around dy's rows that they read: dy's tile rows
// are lpad zeros, a row of dy, zeros, tw pixels in all.
func dwPhases(g DepthwiseGeom) (ph []dwPhase, lpad, tw int) {
	s, ow := g.Stride, g.OutW()
	lo, hi, sub := 0, ow-1, 0
	for ry := range s {
		for rx := range s {
			p := dwPhase{ry: ry, rx: rx, kr: (ry + g.Pad) % s, kc: (rx + g.Pad) % s, sub: sub}
			p.na, p.nb = max(0, (g.K-p.kr+s-1)/s), max(0, (g.K-p.kc+s-1)/s)
			if nj := (g.W - rx + s - 1) / s; nj > 0 && p.nb > 0 {
				o := (rx + g.Pad - p.kc) / s // dy's column for input rx and tap kc
				lo, hi = min(lo, o-(p.nb-1)), max(hi, o+nj-1)
			}
			sub += p.na * p.nb * dwLanes
			ph = append(ph, p)
		}
	}
	return ph, -lo, hi - lo + 1
}

// depthwiseBackwardSIMD computes DepthwiseConv2DBackward with the assembly, 8 channels at a time
// (a parallel item: every sample of the channels), if the CPU has it, and reports whether it
// did. dx is computed as an output of dy by phases of the stride (see dwPhase): each input adds
// the taps of the kernel rows that read it (exact rows) in row-major order, columns of zeros
// around dy's rows standing for the taps past its edges, which add ±0: the Go loop's sums, as in
// depthwiseSIMD (a sum starts from +0; groups with a non-finite weight run the Go loop). dw's
// sums are the Go loop's, in its order; dbias is the Go loop's.
func depthwiseBackwardSIMD(dx, dw, dbias, dy, x, w []float32, g DepthwiseGeom) bool {
	oh, ow := g.OutH(), g.OutW()
	if !dwAVX2 || g.N*g.C == 0 || oh <= 0 || ow <= 0 {
		return false
	}
	hw, ohw, kk, s, k := g.H*g.W, oh*ow, g.K*g.K, g.Stride, g.K
	_, _, _, _ = dy[g.N*g.C*ohw-1], x[g.N*g.C*hw-1], w[g.C*kk-1], dw[g.C*kk-1]
	if dx != nil {
		_ = dx[g.N*g.C*hw-1]
	}
	d := dwScratches.Get().(*dwScratch)
	defer dwScratches.Put(d)
	d.dwPackWeights(w, nil, g.C, kk, false)
	groups := (g.C + dwLanes - 1) / dwLanes
	rows, cols := g.tapRanges()
	phases, lpad, dtw := dwPhases(g)
	xtw := max(g.W+g.Pad, (ow-1)*s+g.K)
	zero := make([]float32, dwLanes)
	For(groups, g.N*ohw*kk*dwLanes*2, func(lo, hi int) {
		t := dwScratches.Get().(*dwScratch)
		defer dwScratches.Put(t)
		// t.in: x's tile (as depthwiseSIMD's), then dy's; t.out: dx's.
		xl := g.H * xtw * dwLanes
		t.in, t.out = grow(t.in, xl+oh*dtw*dwLanes), grow(t.out, hw*dwLanes)
		t.acc, t.sub = grow(t.acc, kk*dwLanes), grow(t.sub, kk*dwLanes)
		t.dense = grow(t.dense, max(hw, ohw)*dwLanes)
		clear(t.in)
		xt, dyt := t.in[:xl], t.in[xl:]
		for gi := lo; gi < hi; gi++ {
			live, wg := min(dwLanes, g.C-gi*dwLanes), d.w[gi*kk*dwLanes:(gi+1)*kk*dwLanes]
			for _, p := range phases {
				for a := range p.na {
					for b := range p.nb {
						copy(t.sub[p.sub+(a*p.nb+b)*dwLanes:][:dwLanes], wg[((p.kr+a*s)*k+p.kc+b*s)*dwLanes:])
					}
				}
			}
			clear(t.acc)
			for n := range g.N {
				p0 := n*g.C + gi*dwLanes
				dwPack(dyt, dy[p0*ohw:(p0+live)*ohw], t.dense, live, oh, ow, dtw, lpad)
				dwPack(xt, x[p0*hw:(p0+live)*hw], t.dense, live, g.H, g.W, xtw, g.Pad)
				for kh := range k {
					for oy := rows[2*kh]; oy < rows[2*kh+1]; oy++ {
						dwGradRowAVX2(&t.acc[kh*k*dwLanes], &dyt[(oy*dtw+lpad)*dwLanes], &xt[(oy*s-g.Pad+kh)*xtw*dwLanes],
							k, &cols[0], 4*dwLanes*s)
					}
				}
				if dx == nil {
					continue
				}
				if !d.ok[gi] {
					for p := p0; p < p0+live; p++ {
						depthwiseGradPlane(dx, dy, w, g, p, rows, cols)
					}
					continue
				}
				for _, p := range phases {
					nj := (g.W - p.rx + s - 1) / s
					if nj <= 0 {
						continue
					}
					o := (p.rx + g.Pad - p.kc) / s
					for iy := p.ry; iy < g.H; iy += s {
						oyb := (iy + g.Pad - p.kr) / s // dy's row for tap row kr
						a0, a1 := max(0, oyb-oh+1), min(p.na, oyb+1)
						in, wk, ta := &dyt[0], &t.sub[0], 0
						if a0 < a1 && p.nb > 0 {
							in, wk, ta = &dyt[((oyb-a0)*dtw+lpad+o)*dwLanes], &t.sub[p.sub+a0*p.nb*dwLanes], a1-a0
						}
						dwTapsAVX2(&t.out[(iy*g.W+p.rx)*dwLanes], in, wk, &zero[0],
							nj, 4*dwLanes*s, 4*dwLanes, ta, p.nb, -4*dwLanes, 4*dwLanes*(p.nb-dtw))
					}
				}
				dwUnpack(dx[p0*hw:(p0+live)*hw], t.out, live, hw)
			}
			for l := range live {
				for i := range kk {
					dw[(gi*dwLanes+l)*kk+i] = float32(t.acc[i*dwLanes+l])
				}
				if dbias != nil {
					depthwiseBiasGrad(dbias, dy, g, gi*dwLanes+l)
				}
			}
		}
	})
	return true
}
