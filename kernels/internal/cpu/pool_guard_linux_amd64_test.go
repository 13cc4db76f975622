//go:build linux && amd64

package cpu

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestPoolGuardPages runs the 2x2 poolings' SIMD kernels (each this CPU runs) on arrays that end against (or start
// right after) an inaccessible page, for every width around the blocks of 16 outputs: a masked
// block that reads or writes a float outside its array faults.
func TestPoolGuardPages(t *testing.T) {
	for _, path := range poolPaths(t) {
		path.set()
		r := rand.New(rand.NewPCG(53, 54))
		for _, atStart := range []bool{false, true} {
			for w := 2; w <= 36; w++ {
				for _, h := range []int{2, 5} {
					planes, oh, ow := 2, h/2, w/2
					n, in := planes*oh*ow, planes*h*w
					x := tieValues(r, guarded(t, in, atStart))
					y, arg := guarded(t, n, atStart), unsafe.Slice((*int32)(unsafe.Pointer(&guarded(t, n, atStart)[0])), n)
					maxPool2x2SIMD(y, arg, x, planes, h, w, oh, ow)
					maxPoolRef(y, arg, x, PoolGeom{N: planes, C: 1, H: h, W: w, K: 2, Stride: 2}) // valid indices whatever the path
					maxPoolBack2x2SIMD(guarded(t, in, atStart), tieValues(r, guarded(t, n, atStart)), arg, planes, h, w, oh, ow)
				}
			}
		}
	}
}
