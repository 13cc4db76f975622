package transforms

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stoke-ml/stoke/internal/rng"
)

// TestInterleavedKernelsMatchGeneric checks the step-3 kernels against horizontalN on random
// rows, taps and weights (any int32, so rounding and clipping at both ends are exercised), for
// each channel of the row, the last pixel included.
func TestInterleavedKernelsMatchGeneric(t *testing.T) {
	kernels := map[int]func(dst, src []byte, ws *weights){2: horizontal2Step3, 3: horizontal3Step3, 4: horizontal4Step3}
	r := rand.New(rand.NewPCG(1, 2))
	for k, kern := range kernels {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			for trial := range 200 {
				w := k + r.IntN(300)
				n := 1 + r.IntN(300)
				row := make([]byte, 3*w)
				for i := range row {
					row[i] = byte(r.Uint32())
				}
				ws := weights{k: k, start: make([]int32, n), w: make([]int32, n*k)}
				for j := range n {
					ws.start[j] = int32(r.IntN(w - k + 1))
				}
				ws.start[n-1] = int32(w - k) // the row's last pixel
				for i := range ws.w {
					if trial%2 == 0 {
						ws.w[i] = int32(r.Uint32())
					} else { // weights of the real scale
						ws.w[i] = int32(r.IntN(3<<precBits)) - 1<<precBits
					}
				}
				for c := range 3 {
					got, want := make([]byte, n), make([]byte, n)
					kern(got, row[c:], &ws)
					horizontalN(want, row[c:], 3, &ws)
					if !bytes.Equal(got, want) {
						t.Fatalf("horizontal%dStep3(trial %d, w %d, n %d, channel %d) = %v; want %v", k, trial, w, n, c, got, want)
					}
				}
			}
		})
	}
}

// TestInterleavedMatchesPlanes checks the whole raw path end to end: each channel of an
// interleaved RGB image, transformed, equals that channel transformed alone as a grey image
// (planar rows, the unit-step kernels), for random images, sizes, crops and filters.
func TestInterleavedMatchesPlanes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pipelines := []struct {
		name string
		p    func(h, w int) *Chain
	}{
		{"rrc", func(h, w int) *Chain {
			return Compose(RandomResizedCrop(8+r.IntN(2*max(h, w))), HorizontalFlip(0.5))
		}},
		{"resize-centercrop", func(h, w int) *Chain {
			s := 1 + r.IntN(2*min(h, w))
			return Compose(Resize(s), CenterCrop(1+r.IntN(s+4)))
		}},
		{"bicubic", func(h, w int) *Chain { return Compose(ResizeFilter(1+r.IntN(2*h), Bicubic)) }},
		{"lanczos", func(h, w int) *Chain { return Compose(ResizeFilter(1+r.IntN(2*h), Lanczos)) }},
		{"resizeto", func(h, w int) *Chain { return Compose(ResizeTo(1+r.IntN(2*h), 1+r.IntN(2*w))) }},
	}
	for _, pc := range pipelines {
		t.Run(pc.name, func(t *testing.T) {
			s := rng.NewSample()
			for trial := range 30 {
				h, w := 1+r.IntN(80), 1+r.IntN(80)
				in := hwc(h, w, 3, func(y, x, c int) byte { return byte(r.Uint32()) })
				p := pc.p(h, w)
				shape, err := p.OutShape(Shape{C: 3, H: h, W: w})
				if err != nil {
					t.Fatal(err)
				}
				n := shape.H * shape.W
				got := make([]byte, 3*n)
				s.Reset(7, 0, trial)
				if err := p.NewWorker().Apply(got, in, s.Rand); err != nil {
					t.Fatalf("Apply(%dx%d rgb): %v", w, h, err)
				}
				for c := range 3 {
					grey := Input{Pixels: make([]byte, h*w), H: h, W: w, C: 1}
					for i := range grey.Pixels {
						grey.Pixels[i] = in.Pixels[3*i+c]
					}
					want := make([]byte, n)
					s.Reset(7, 0, trial)
					if err := p.NewWorker().Apply(want, grey, s.Rand); err != nil {
						t.Fatalf("Apply(%dx%d grey): %v", w, h, err)
					}
					if !bytes.Equal(got[c*n:(c+1)*n], want) {
						t.Fatalf("Apply(%dx%d rgb, trial %d) channel %d = %v; want %v", w, h, trial, c, got[c*n:(c+1)*n], want)
					}
				}
			}
		})
	}
}

// TestCopyRow checks copyRow against its definition, dst[o+j*du] = src[j], for forward,
// flipped and interleaved steps and lengths around the 8-byte blocks of the flipped loop.
func TestCopyRow(t *testing.T) {
	for _, du := range []int{1, -1, 3, -3} {
		for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 224} {
			t.Run(fmt.Sprintf("du=%d/n=%d", du, n), func(t *testing.T) {
				src := make([]byte, n)
				for j := range src {
					src[j] = byte(j*7 + 1)
				}
				size := 3*n + 4
				o := 2
				if du < 0 {
					o = size - 3
				}
				got, want := make([]byte, size), make([]byte, size)
				copyRow(got, o, du, src)
				for j, v := range src {
					want[o+j*du] = v
				}
				if !bytes.Equal(got, want) {
					t.Errorf("copyRow(o %d, du %d, %d bytes) = %v; want %v", o, du, n, got, want)
				}
			})
		}
	}
}
