//go:build !noasm

package transforms

import "golang.org/x/sys/cpu"

// avx2 selects the AVX2 kernels of simd_amd64.s for the resampling passes and the YCbCr->RGB
// conversion. They compute exactly what the Go loops compute (the same int32
// products and sums, the same shifts and clamps), 8 pixels at a time; the Go loops finish the
// last len%8 pixels. Tests switch it off to compare both paths; build with -tags noasm to leave
// them out.
var avx2 = cpu.X86.HasAVX2

// verticalAVX2 sets dst[j] = clip8(half + Σ_t rows[t][j]*ws[t]) for j < n (n a multiple of 8,
// every row at least n bytes, 1 <= m <= 8).
//
//go:noescape
func verticalAVX2(dst *byte, n int, rows *[8]*byte, ws *[8]int32, m int)

// verticalSIMD runs the vertical pass over the longest multiple of 8 of dst's length and
// returns how many outputs it wrote (0 without AVX2).
func verticalSIMD(dst []byte, rows *[8][]byte, ws *[8]int32, m int) int {
	n := len(dst) &^ 7
	if !avx2 || n == 0 {
		return 0
	}
	var p [8]*byte
	for t := range m {
		p[t] = &rows[t][:n][0]
	}
	verticalAVX2(&dst[0], n, &p, ws, m)
	return n
}

// ycbcrAVX2 converts n pixels (a multiple of 8) as ycbcrRow does. Pixel j goes to rp[o], gp[o],
// bp[o] with o = j for step 1; with step -1 (a flipped row) to o = n-1-j.
//
//go:noescape
func ycbcrAVX2(rp, gp, bp, ys, cbs, crs *byte, n, step int)

// ycbcrSIMD converts the longest multiple of 8 of the row's pixels into the unit-step channel
// rows r, g, b (flipped: written from the end) and returns how many it converted.
func ycbcrSIMD(r, g, b, ys, cbs, crs []byte, flip bool) int {
	n := len(ys) &^ 7
	if !avx2 || n == 0 {
		return 0
	}
	step, o := 1, 0
	if flip {
		step, o = -1, len(r)-n
	}
	_, _, _, _, _ = r[o:][:n], g[o:][:n], b[o:][:n], cbs[:n], crs[:n]
	ycbcrAVX2(&r[o], &g[o], &b[o], &ys[0], &cbs[0], &crs[0], n, step)
	return n
}

// horizontalAVX2 sets dst[j] = clip8(half + Σ_t src[start[j]+t]*wt[t*wstride+j]) for j < n (n a
// multiple of 8, 2 <= k <= 4), reading 4 bytes at every src+start[j].
//
//go:noescape
func horizontalAVX2(dst *byte, n int, src *byte, start, wt *int32, wstride, k int)

// horizontal3AVX2 is horizontalAVX2 for one channel of interleaved RGB (tap t of output j is
// src[3*(start[j]+t)]), reading 4 bytes at src+3*start[j] and, for k > 2, 4 more 6 bytes on.
//
//go:noescape
func horizontal3AVX2(dst *byte, n int, src *byte, start, wt *int32, wstride, k int)

// horizontalSIMD runs the horizontal pass of one row of a plane whose pixels are step bytes
// apart (1: planar, 3: one channel of interleaved RGB) and reports true, or reports false
// (nothing written) without AVX2, for other steps or tap counts, or when src is too short for
// the kernel's 4-byte reads.
func horizontalSIMD(dst, src []byte, step int, ws *weights) bool {
	n, k := len(dst), ws.k
	if !avx2 || k < 2 || k > 4 || len(ws.wt) < k*n || len(ws.start) < n {
		return false
	}
	switch step {
	case 1:
		if int(ws.maxStart)+4 > len(src) {
			return false
		}
	case 3:
		if 3*int(ws.maxStart)+10 > len(src) {
			return false
		}
	default:
		return false
	}
	n8 := n &^ 7
	if n8 > 0 {
		if step == 1 {
			horizontalAVX2(&dst[0], n8, &src[0], &ws.start[0], &ws.wt[0], n, k)
		} else {
			horizontal3AVX2(&dst[0], n8, &src[0], &ws.start[0], &ws.wt[0], n, k)
		}
	}
	if n8 < n {
		tail := weights{start: ws.start[n8:n], w: ws.w[n8*k : n*k], k: k}
		horizontalN(dst[n8:], src, step, &tail)
	}
	return true
}
