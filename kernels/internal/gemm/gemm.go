package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stoke-ml/stoke/kernels/internal/par"
)

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices; op(X) is X or X^T.
// A is m x k (k x m if transA) with leading dimension lda, B is k x n (n x k if transB) with ldb,
// C is m x n with ldc. beta == 0 means C's old contents are ignored (even NaN).
//
// As in the reference BLAS, alpha == 0 or k == 0 leaves C = beta*C without reading A or B, and
// m == 0 or n == 0 returns at once. Elements of c outside the m x n matrix (the gaps a leading
// dimension larger than the width leaves) are never touched.
//
// Invalid arguments are programming errors and panic with a message naming the argument:
// negative dimensions, a leading dimension smaller than the stored row width (or than 1), or a
// slice too short for the matrix it holds.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	check(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	threads, done := share()
	defer done()
	multiply(active.forRows(m), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads)
}

// Source supplies the stored rows of a B operand that the caller never materializes (a
// convolution's column matrix, read from the image as it is packed). Row writes the elements
// [j0, j0+len(dst)) of row i of the stored matrix (B, or B^T when transB) to dst. Sgemm calls it
// from several goroutines at once: it must only read shared state.
type Source interface {
	Row(dst []float32, i, j0 int)
}

// SgemmSource is Sgemm with B supplied by src, stored k x n (n x k if transB), instead of a
// slice. The multiply packs exactly the values Sgemm would pack from the materialized B, so the
// result is the same bit for bit; what it saves is writing B to memory and reading it back.
func SgemmSource(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, src Source, beta float32, c []float32, ldc int) {
	check(transA, transB, m, n, k, a, lda, nil, 0, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	threads, done := share()
	defer done()
	whole := part{kern: active.forRows(m), transA: transA, transB: transB, m1: m, n1: n, k: k,
		alpha: alpha, beta: beta, a: a, src: src, c: c, lda: lda, ldc: ldc}
	whole.multiply(threads)
}

// Transpose writes dst[j*ldd+i] = src[i*lds+j] for i < rows and j < cols, 8x8 blocks at a time
// with AVX where the CPU has it. It panics, like Sgemm, on a slice too short for its matrix.
func Transpose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_, _ = dst[(cols-1)*ldd+rows-1], src[(rows-1)*lds+cols-1]
	rows8, cols8 := 0, cols/8*8
	if transpose8 != nil && cols8 > 0 {
		rows8 = rows / 8 * 8
		for i := 0; i < rows8; i += 8 {
			transpose8(&dst[i], &src[i*lds], lds, cols8/8, ldd)
		}
	}
	for i := range rows {
		j0 := 0
		if i < rows8 {
			j0 = cols8
		}
		for j, v := range src[i*lds+j0 : i*lds+cols] {
			dst[(j0+j)*ldd+i] = v
		}
	}
}

// share returns how many goroutines a multiply starting now may use, and the function to call
// when it ends. Callers that already run several multiplies at once (one per sample, say) share
// the cores among them instead of each splitting over all of them. The result does not depend on
// the split, so this changes speed only.
func share() (threads int, done func()) {
	running := inflight.Add(1)
	return max(1, runtime.GOMAXPROCS(0)/int(running)), decInflight
}

func decInflight() { inflight.Add(-1) }

// inflight counts the Sgemm calls running now.
var inflight atomic.Int32

// check panics, like gonum's BLAS, when the arguments do not describe valid matrices. ldb == 0
// means B comes from a Source: it has no slice to check.
func check(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	checkA(transA, m, k, a, lda, false)
	checkBC(transB, m, n, k, b, ldb, c, ldc)
	checkA(transA, m, k, a, lda, m > 0 && n > 0)
}

// checkA is check's part for A (dimensions not negative): its leading dimension, and its length
// when length is set.
func checkA(transA bool, m, k int, a []float32, lda int, length bool) {
	aRows, aCols := m, k
	if transA {
		aRows, aCols = k, m
	}
	if lda < max(1, aCols) {
		panic(fmt.Sprintf("gemm: lda=%d < max(1, %d)", lda, aCols))
	}
	if length && aRows > 0 && aCols > 0 && len(a) < (aRows-1)*lda+aCols {
		panic(fmt.Sprintf("gemm: len(a)=%d < %d for a %dx%d matrix with lda=%d", len(a), (aRows-1)*lda+aCols, aRows, aCols, lda))
	}
}

// checkBC is check's part for B and C (dimensions not negative).
func checkBC(transB bool, m, n, k int, b []float32, ldb int, c []float32, ldc int) {
	bRows, bCols := k, n
	if transB {
		bRows, bCols = n, k
	}
	if ldb != 0 && ldb < max(1, bCols) {
		panic(fmt.Sprintf("gemm: ldb=%d < max(1, %d)", ldb, bCols))
	}
	if ldc < max(1, n) {
		panic(fmt.Sprintf("gemm: ldc=%d < max(1, %d)", ldc, n))
	}
	if m == 0 || n == 0 {
		return
	}
	if ldb != 0 && bRows > 0 && bCols > 0 && len(b) < (bRows-1)*ldb+bCols {
		panic(fmt.Sprintf("gemm: len(b)=%d < %d for a %dx%d matrix with ldb=%d", len(b), (bRows-1)*ldb+bCols, bRows, bCols, ldb))
	}
	if len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: len(c)=%d < %d for a %dx%d matrix with ldc=%d", len(c), (m-1)*ldc+n, m, n, ldc))
	}
}

// scale sets C = beta*C; beta == 0 writes zeros whatever C held.
func scale(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Cache blocking. kcMax bounds the depth of a pass over k so that a kc x 32 sliver of packed B
// (24 KiB) and the A sliver it meets stay in the 48 KiB L1; mcMax and ncMax keep the packed
// mc x kc block of A (144 KiB) and kc x nc block of B (768 KiB) together inside a 1.25 MiB L2
// (a B block in L3 made the wide multiplies of convolutions twice as slow). kcMax is the same
// for every kernel, so that all kernels that use FMA round identically (see the package doc).
const (
	kcMax = 192
	mcMax = 192
	ncMax = 1024
)

// serialWork is the m*n*k below which one goroutine does everything (about 10 us of work for one
// core): starting and joining another costs a few microseconds, which would outweigh what it saves.
const serialWork = 1 << 20

// PassDepth is the depth of each of a multiply's passes over k (the last may be shallower): each
// element of C is the sum, in pass order, of per-pass sums accumulated by FMA from zero in
// increasing k. A kernel outside this package that follows the same passes and the same FMA order
// (the CPU backend's direct convolution) gets the same bits as Sgemm on an FMA CPU.
func PassDepth(k int) int { return kBlock(k) }

// kBlock returns the depth of each pass over k: k cut into equal blocks of at most kcMax. It
// depends on k alone, which is what makes results independent of the partition of C.
func kBlock(k int) int {
	nb := (k + kcMax - 1) / kcMax
	return (k + nb - 1) / nb
}

// part is one goroutine's share of a multiply: the rows [m0, m1) and columns [n0, n1) of C.
type part struct {
	kern           *kernel
	transA, transB bool
	m0, m1, n0, n1 int
	k              int
	alpha, beta    float32
	a, b, c        []float32
	src            Source   // B, when b is nil
	packed         *Packed  // A, when a is nil
	packedB        *PackedB // B, when b is nil and src too
	lda, ldb, ldc  int
}

// call holds the parts of one parallel multiply; pooled so that Sgemm allocates nothing.
type call struct {
	parts []part
}

var callPool = sync.Pool{New: func() any { return new(call) }}

// Part runs part i: the caller and the workers of package par take the parts in turn.
func (cl *call) Part(i int) { cl.parts[i].run() }

// multiply computes C = alpha*op(A)*op(B) + beta*C with kernel kern on up to threads goroutines.
// Arguments must have passed check, with m, n > 0.
func multiply(kern *kernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int,
	threads int) {
	whole := part{kern: kern, transA: transA, transB: transB, m0: 0, m1: m, n0: 0, n1: n, k: k,
		alpha: alpha, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	whole.multiply(threads)
}

// multiply computes the whole product p describes (rows [0, m1), columns [0, n1)) on up to
// threads goroutines.
func (whole *part) multiply(threads int) {
	kern, m, n, k := whole.kern, whole.m1, whole.n1, whole.k
	if whole.alpha == 0 || k == 0 {
		scale(m, n, whole.beta, whole.c, whole.ldc)
		return
	}
	if threads <= 1 || m*n*k < serialWork {
		whole.run()
		return
	}
	pm, pn := grid(kern, m, n, threads)
	if pm*pn == 1 {
		whole.run()
		return
	}
	cl := callPool.Get().(*call)
	if cap(cl.parts) < pm*pn {
		cl.parts = make([]part, pm*pn)
	}
	cl.parts = cl.parts[:pm*pn]
	mt, nt := tiles(m, kern.mr), tiles(n, kern.nr)
	for i := range pm {
		for j := range pn {
			p := &cl.parts[i*pn+j]
			*p = *whole
			p.m0, p.m1 = split(i, pm, mt, kern.mr, m)
			p.n0, p.n1 = split(j, pn, nt, kern.nr, n)
		}
	}
	par.Run(cl, len(cl.parts))
	for i := range cl.parts {
		cl.parts[i] = part{} // drop the references to the caller's matrices
	}
	callPool.Put(cl)
}

// tiles is the number of size-t tiles covering d.
func tiles(d, t int) int { return (d + t - 1) / t }

// split returns the bounds of the i-th of p nearly equal runs of whole tiles of size t covering
// nt tiles (d elements). Only the last run can end in a partial tile.
func split(i, p, nt, t, d int) (lo, hi int) {
	lo = (i * nt / p) * t
	hi = min(((i+1)*nt/p)*t, d)
	return lo, hi
}

// grid chooses how many row and column bands (pm x pn <= threads) to cut C into. Each goroutine
// packs the A rows and B columns of its own band, so a band shared by several goroutines is packed
// several times: the estimate weighs the largest band's multiply-adds against that packing.
func grid(kern *kernel, m, n, threads int) (pm, pn int) {
	mt, nt := tiles(m, kern.mr), tiles(n, kern.nr)
	best := -1
	for i := 1; i <= min(threads, mt); i++ {
		for j := 1; j <= min(threads/i, nt); j++ {
			rm, rn := tiles(mt, i)*kern.mr, tiles(nt, j)*kern.nr
			// Packing an element costs about as much as 8 multiply-adds of the kernel.
			cost := rm*rn + 8*(rm+rn)
			if best < 0 || cost < best {
				best, pm, pn = cost, i, j
			}
		}
	}
	return pm, pn
}

// workspace holds one goroutine's packing buffers and edge tile (up to about 1 MiB), and the rows
// a Source writes before they are packed.
type workspace struct {
	pa, pb []float32
	tile   []float32
	rows   []float32
}

// workspaces keeps released workspaces for reuse. Unlike a sync.Pool it is not emptied by the
// garbage collector, which would make a training loop reallocate its packing buffers after every
// other collection; it keeps at most 4*GOMAXPROCS of them.
var workspaces struct {
	sync.Mutex
	free []*workspace
}

func getWorkspace() *workspace {
	workspaces.Lock()
	defer workspaces.Unlock()
	n := len(workspaces.free)
	if n == 0 {
		return new(workspace)
	}
	ws := workspaces.free[n-1]
	workspaces.free[n-1] = nil
	workspaces.free = workspaces.free[:n-1]
	return ws
}

func putWorkspace(ws *workspace) {
	workspaces.Lock()
	defer workspaces.Unlock()
	if len(workspaces.free) < 4*runtime.GOMAXPROCS(0) {
		workspaces.free = append(workspaces.free, ws)
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// run computes the part's block of C, GotoBLAS style: for each block of columns of B and each
// block of k, pack B; for each block of rows of A, pack A (unless the kernel reads row-major A in
// place) and sweep the micro-kernel over the block.
func (p *part) run() {
	kern := p.kern
	mr, nr := kern.mr, kern.nr
	kc0 := kBlock(p.k)
	nc0 := min(ncMax, tiles(p.n1-p.n0, nr)*nr)
	mc0 := min(mcMax/mr*mr, tiles(p.m1-p.m0, mr)*mr)
	ws := getWorkspace()
	if p.packed == nil {
		ws.pa = grow(ws.pa, mc0*kc0)
	}
	if p.packedB == nil {
		ws.pb = grow(ws.pb, nc0*kc0)
	}
	ws.tile = grow(ws.tile, mr*nr)
	if p.src != nil {
		ws.rows = grow(ws.rows, max(nc0, nr*kc0))
	}
	for jc := p.n0; jc < p.n1; jc += nc0 {
		nc := min(nc0, p.n1-jc)
		for pc := 0; pc < p.k; pc += kc0 {
			kc := min(kc0, p.k-pc)
			beta := p.beta
			if pc > 0 {
				beta = 1 // later passes add to what the first pass stored
			}
			pb := ws.pb
			switch {
			case p.packedB != nil: // parts and blocks start at whole slivers
				pb = p.packedB.data[pc*p.packedB.npad+jc*kc:]
			case p.src != nil:
				packSource(ws.pb, ws.rows, kern, p.transB, p.src, pc, kc, jc, nc)
			default:
				packB(ws.pb, kern, p.transB, p.b, p.ldb, pc, kc, jc, nc)
			}
			for ic := p.m0; ic < p.m1; ic += mc0 {
				mc := min(mc0, p.m1-ic)
				if p.packed != nil { // parts and blocks start at whole slivers
					p.macro(ws, p.packed.data[pc*p.packed.mpad+ic*kc:], pb, ic, mc, 0, jc, nc, pc, kc, beta)
					continue
				}
				// Full slivers of row-major A are packed by the kernel's own packer or, if it
				// has none, read in place; the generic packA does the rest (a partial last
				// sliver, whose missing rows must read as zeros, or all of A^T).
				full, direct := 0, 0
				if !p.transA {
					full = mc / mr * mr
					if kern.packA == nil {
						direct = full
					}
					for s := 0; s < full && kern.packA != nil; s += mr {
						kern.packA(ws.pa[s*kc:(s+mr)*kc], p.a[(ic+s)*p.lda+pc:], p.lda, kc)
					}
				}
				packA(ws.pa[full*kc:], kern, p.transA, p.a, p.lda, ic+full, mc-full, pc, kc)
				p.macro(ws, ws.pa, pb, ic, mc, direct, jc, nc, pc, kc, beta)
			}
		}
	}
	putWorkspace(ws)
}

// macro multiplies the mc x kc block of A at (ic, pc) by the packed kc x nc block of B into C at
// (ic, jc); its first direct rows are read from A in place, the rest from pa, the block packed
// (pb is B's block, packed). Tiles that
// stick out of C run the same kernel on a padded copy, so that every element sees the same
// arithmetic wherever it lies.
func (p *part) macro(ws *workspace, pa, pb []float32, ic, mc, direct, jc, nc, pc, kc int, beta float32) {
	kern := p.kern
	mr, nr := kern.mr, kern.nr
	c, ldc := p.c, p.ldc
	for jr := 0; jr < nc; jr += nr {
		bp := pb[jr*kc : (jr+nr)*kc]
		w := min(nr, nc-jr)
		for ir := 0; ir < mc; ir += mr {
			ap, rs, ps := pa[ir*kc:(ir+mr)*kc], 1, mr
			if ir < direct {
				ap, rs, ps = p.a[(ic+ir)*p.lda+pc:], p.lda, 1
			}
			h := min(mr, mc-ir)
			off := (ic+ir)*ldc + jc + jr
			if h == mr && w == nr {
				kern.fn(kc, ap, rs, ps, bp, c[off:off+(mr-1)*ldc+nr], ldc, p.alpha, beta)
				continue
			}
			t := ws.tile
			if beta != 0 {
				clear(t)
				for i := range h {
					copy(t[i*nr:i*nr+w], c[off+i*ldc:off+i*ldc+w])
				}
			}
			kern.fn(kc, ap, rs, ps, bp, t, nr, p.alpha, beta)
			for i := range h {
				copy(c[off+i*ldc:off+i*ldc+w], t[i*nr:i*nr+w])
			}
		}
	}
}

// packA copies rows [i0, i0+mc) and columns [p0, p0+kc) of op(A) into dst as consecutive mr-row
// slivers, each stored column by column (dst[s*mr*kc + p*mr + r] = op(A)[i0+s*mr+r][p0+p]). Rows
// past mc are zero.
func packA(dst []float32, kern *kernel, trans bool, a []float32, lda, i0, mc, p0, kc int) {
	mr := kern.mr
	if trans {
		// op(A)[i][p] = a[p*lda+i]: row p of A^T fills row p of every sliver.
		for p := range kc {
			packRow(dst, kern, a[(p0+p)*lda+i0:(p0+p)*lda+i0+mc], p, kc, mr)
		}
		return
	}
	for s := 0; s < mc; s += mr {
		d := dst[s*kc : (s+mr)*kc]
		h := min(mr, mc-s)
		for r := range h {
			src := a[(i0+s+r)*lda+p0 : (i0+s+r)*lda+p0+kc]
			for p, v := range src {
				d[p*mr+r] = v
			}
		}
		for r := h; r < mr; r++ {
			for p := range kc {
				d[p*mr+r] = 0
			}
		}
	}
}

// packB copies rows [p0, p0+kc) and columns [j0, j0+nc) of op(B) into dst as consecutive nr-column
// slivers, each stored row by row (dst[s*nr*kc + p*nr + c] = op(B)[p0+p][j0+s*nr+c]). Columns past
// nc are zero.
func packB(dst []float32, kern *kernel, trans bool, b []float32, ldb, p0, kc, j0, nc int) {
	nr := kern.nr
	if !trans {
		// Row by row, so that B is read sequentially: row p of B fills row p of every sliver.
		for p := range kc {
			packRow(dst, kern, b[(p0+p)*ldb+j0:(p0+p)*ldb+j0+nc], p, kc, kern.nr)
		}
		return
	}
	for s := 0; s < nc; s += nr {
		d := dst[s*kc : (s+nr)*kc]
		w := min(nr, nc-s)
		// op(B)[p][j] = b[j*ldb+p]: a transpose.
		if kern.packBT != nil {
			kern.packBT(d, b[(j0+s)*ldb+p0:], ldb, kc, nr, w)
			continue
		}
		for c := range w {
			src := b[(j0+s+c)*ldb+p0 : (j0+s+c)*ldb+p0+kc]
			for p, v := range src {
				d[p*nr+c] = v
			}
		}
		for c := w; c < nr; c++ {
			for p := range kc {
				d[p*nr+c] = 0
			}
		}
	}
}

// packRow copies src, row p of a kc-deep block (of B, or of A^T), into row p of every w-wide
// sliver of dst (zero past the end of src).
func packRow(dst []float32, kern *kernel, src []float32, p, kc, w int) {
	n := len(src)
	full := n / w
	if kern.scatter != nil && w%2 == 0 {
		kern.scatter(dst[p*w:], src, full, kc*w, w, w)
	} else {
		for s := 0; s < full*w; s += w {
			copy(dst[s*kc+p*w:s*kc+p*w+w], src[s:s+w])
		}
	}
	if s := full * w; s < n {
		row := dst[s*kc+p*w : s*kc+p*w+w]
		copy(row, src[s:])
		clear(row[n-s:])
	}
}

// packSource is packB for a B that src supplies: it has the rows (of B, or of B^T when trans)
// written to buf, then packs them from there with packB, so the packed values are the same.
func packSource(dst, buf []float32, kern *kernel, trans bool, src Source, p0, kc, j0, nc int) {
	nr := kern.nr
	if !trans {
		// Row p of B fills row p of every sliver: one row of nc values at a time.
		row := buf[:nc]
		for p := range kc {
			src.Row(row, p0+p, j0)
			packRow(dst, kern, row, p, kc, nr)
		}
		return
	}
	// B^T's rows j0+s .. j0+s+nr-1 (columns of op(B)), kc values each, then transposed.
	for s := 0; s < nc; s += nr {
		w := min(nr, nc-s)
		rows := buf[:w*kc]
		for c := range w {
			src.Row(rows[c*kc:(c+1)*kc], j0+s+c, p0)
		}
		packB(dst[s*kc:], kern, true, rows, kc, 0, kc, 0, w)
	}
}
