package transforms

import (
	"errors"
	"image"
	"testing"
)

// TestGrid: each tile holds its image's pixels (gray drawn as RGB), the picture has the documented
// size, labels write white pixels under their tile only, and bad shapes are refused.
func TestGrid(t *testing.T) {
	for _, s := range []Shape{{C: 3, H: 5, W: 7}, {C: 1, H: 6, W: 4}} {
		n := 5
		pix := make([]byte, n*s.Len())
		for i := range pix {
			pix[i] = byte(i*7 + 3)
		}
		img, tiles, err := Grid(pix, n, s, []string{"0", "1", "cat", "3", "dog"}, 3)
		if err != nil {
			t.Fatal(err)
		}
		wantW, wantH := GridPad+3*(s.W+GridPad), GridPad+2*(s.H+GridPad+GridLabelHeight)
		if b := img.Bounds(); b != image.Rect(0, 0, wantW, wantH) {
			t.Fatalf("%v: bounds %v, want %dx%d", s, b, wantW, wantH)
		}
		plane := s.H * s.W
		for i, r := range tiles {
			if r.Dx() != s.W || r.Dy() != s.H {
				t.Fatalf("%v: tile %d is %v", s, i, r)
			}
			for y := range s.H {
				for x := range s.W {
					c := img.RGBAAt(r.Min.X+x, r.Min.Y+y)
					k := i*s.Len() + y*s.W + x
					want := [3]byte{pix[k], pix[k], pix[k]}
					if s.C == 3 {
						want = [3]byte{pix[k], pix[k+plane], pix[k+2*plane]}
					}
					if [3]byte{c.R, c.G, c.B} != want || c.A != 255 {
						t.Fatalf("%v: tile %d pixel (%d,%d) = %v, want %v", s, i, x, y, c, want)
					}
				}
			}
			white := 0
			for y := r.Max.Y; y < r.Max.Y+GridLabelHeight; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					if img.RGBAAt(x, y).R > 128 {
						white++
					}
				}
			}
			if white == 0 {
				t.Fatalf("%v: tile %d has no label drawn", s, i)
			}
		}
		if c := img.RGBAAt(wantW-1, wantH-1); c.R != 0 || c.A != 255 { // the missing 6th tile
			t.Fatalf("%v: empty cell pixel %v, want opaque black", s, c)
		}
	}
	img, _, err := Grid(make([]byte, 2*12), 2, Shape{C: 3, H: 2, W: 2}, nil, 0)
	if err != nil || img.Bounds() != image.Rect(0, 0, GridPad+2*(2+GridPad), GridPad+2+GridPad) {
		t.Fatalf("unlabelled grid: %v, %v", img.Bounds(), err)
	}
	for _, bad := range []struct {
		pix    int
		n      int
		s      Shape
		labels []string
	}{
		{12, 2, Shape{C: 3, H: 2, W: 2}, nil},
		{8, 2, Shape{C: 2, H: 2, W: 1}, nil},
		{24, 2, Shape{C: 3, H: 2, W: 2}, []string{"a"}},
		{0, 0, Shape{C: 3, H: 2, W: 2}, nil},
	} {
		if _, _, err := Grid(make([]byte, bad.pix), bad.n, bad.s, bad.labels, 0); !errors.Is(err, ErrShape) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Grid(%d bytes, %d, %v, %v) = %v", bad.pix, bad.n, bad.s, bad.labels, err)
		}
	}
}
