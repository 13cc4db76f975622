//go:build linux && amd64

package cpu

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

// guarded returns n floats that end where an inaccessible page begins (and start right after
// one when atStart), so that an access one float outside them faults.
func guarded(t *testing.T, n int, atStart bool) []float32 {
	t.Helper()
	page := syscall.Getpagesize()
	size := (4*n+page-1)/page*page + 2*page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	off := size - page - 4*n
	if atStart {
		off = page
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), n)
}

// TestSIMDGuardPages runs the assembly's row copies, row sums and block loops on slices that end
// against (or start right after) an inaccessible page, for every length around the blocks: a
// masked tail or block that touches a float outside its slice faults.
func TestSIMDGuardPages(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	fill := func(v []float32) []float32 {
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		return v
	}
	for _, atStart := range []bool{false, true} {
		for w := 0; w <= 41; w++ {
			for _, n := range []int{1, 3} {
				ds, ss := w+1, w+2
				dl, sl := max((n-1)*ds+w, 1), max((n-1)*ss+w, 1)
				dst, src := guarded(t, dl, atStart), fill(guarded(t, sl, atStart))
				copyRows(dst, src, n, w, ds, ss)
				addRows(dst, src, n, w, ds, ss)
				if w > 0 {
					src2 := fill(guarded(t, (n-1)*(2*w+1)+2*w-1, atStart))
					copyRows2(dst, src2, n, w, ds, 2*w+1)
				}
			}
			x, y := fill(guarded(t, w, atStart)), guarded(t, w, atStart)
			addConst(y, x, 0.5)
			reluSIMD(y, x)
			reluGradSIMD(guarded(t, w, atStart), x, y)
			scaleShiftSIMD(y, x, 2, 1)
			bnDxSIMD(guarded(t, w, atStart), x, y, 1, 2, 3, 4, 5)
			var s sums
			sumAddSIMD(&s, x)
			sumSquaresSIMD(&s, x, 0.1)
			sumProductsSIMD(&s, x, y, 0.1, 2)
			if w > 0 {
				yp, ap := guarded(t, w, atStart), unsafe.Slice((*int32)(unsafe.Pointer(&guarded(t, w, atStart)[0])), w)
				row0, row1 := fill(guarded(t, 2*w, atStart)), fill(guarded(t, 2*w, atStart))
				maxPoolRowSIMD(yp, ap, row0, row1, 2*w, 0)
			}
		}
	}
}
