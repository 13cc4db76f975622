package transforms

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// GridPad is the gap in pixels around and between the tiles of a Grid (torchvision's make_grid
// padding); GridLabelHeight is the height of the strip under each tile that holds its label.
const (
	GridPad         = 2
	GridLabelHeight = 13
)

// Grid lays out n uint8 CHW images of shape s, one after the other in pixels (as a loader's
// batch holds them), as an RGBA picture of cols tiles a row (0: 8, torchvision's make_grid
// default; at most n), on black, a gray image drawn as RGB. labels, if not nil, has one text
// per image (a class name or number), written in white in a strip of GridLabelHeight pixels
// under its tile and cut at the tile's width. It returns the picture and each tile's rectangle in
// it: tile i holds image i's pixels unchanged.
func Grid(pixels []byte, n int, s Shape, labels []string, cols int) (*image.RGBA, []image.Rectangle, error) {
	switch {
	case s.C != 1 && s.C != 3 || s.H <= 0 || s.W <= 0:
		return nil, nil, fmt.Errorf("transforms: grid of %v images: %w", s, ErrShape)
	case n <= 0 || len(pixels) != n*s.Len():
		return nil, nil, fmt.Errorf("transforms: grid of %d images %v: %d bytes, want %d: %w", n, s, len(pixels), max(n, 0)*s.Len(), ErrShape)
	case labels != nil && len(labels) != n:
		return nil, nil, fmt.Errorf("transforms: grid of %d images: %d labels: %w", n, len(labels), ErrInvalid)
	case cols < 0:
		return nil, nil, fmt.Errorf("transforms: grid of %d columns: %w", cols, ErrInvalid)
	}
	if cols == 0 {
		cols = 8
	}
	cols = min(cols, n)
	rows := (n + cols - 1) / cols
	cellW, cellH := s.W+GridPad, s.H+GridPad
	if labels != nil {
		cellH += GridLabelHeight
	}
	const maxSide = 1 << 15
	if w, h := GridPad+cols*cellW, GridPad+rows*cellH; w > maxSide || h > maxSide {
		return nil, nil, fmt.Errorf("transforms: grid of %d images %v: %dx%d pixels, over %d a side: %w", n, s, w, h, maxSide, ErrShape)
	}
	img := image.NewRGBA(image.Rect(0, 0, GridPad+cols*cellW, GridPad+rows*cellH))
	draw.Draw(img, img.Rect, image.NewUniform(color.Black), image.Point{}, draw.Src)
	tiles := make([]image.Rectangle, n)
	plane := s.H * s.W
	for i := range n {
		x0, y0 := GridPad+(i%cols)*cellW, GridPad+(i/cols)*cellH
		tiles[i] = image.Rect(x0, y0, x0+s.W, y0+s.H)
		src := pixels[i*s.Len() : (i+1)*s.Len()]
		for y := range s.H {
			row := img.Pix[img.PixOffset(x0, y0+y):]
			for x := range s.W {
				k := y*s.W + x
				r, g, b := src[k], src[k], src[k]
				if s.C == 3 {
					g, b = src[plane+k], src[2*plane+k]
				}
				row[4*x], row[4*x+1], row[4*x+2], row[4*x+3] = r, g, b, 255
			}
		}
		if labels != nil {
			strip := img.SubImage(image.Rect(x0, y0+s.H, x0+s.W, y0+s.H+GridLabelHeight)).(*image.RGBA)
			d := font.Drawer{Dst: strip, Src: image.NewUniform(color.White), Face: basicfont.Face7x13,
				Dot: fixed.P(x0, y0+s.H+basicfont.Face7x13.Ascent)}
			d.DrawString(labels[i])
		}
	}
	return img, tiles, nil
}
