package transforms

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// RandomCrop pads the image with padding zero pixels on every side, then crops a size x size box
// placed uniformly at random (top first, then left, as torchvision's RandomCrop draws them):
// RandomCrop(32, 4) with HorizontalFlip(0.5) is the CIFAR training recipe. A padded image smaller
// than size is placed at the top-left and the rest is zero. Without a generator (r nil) the box is
// centred.
func RandomCrop(size, padding int) Transform { return randomCrop{size, padding} }

type randomCrop struct{ size, pad int }

func (t randomCrop) String() string { return fmt.Sprintf("RandomCrop(%d, padding=%d)", t.size, t.pad) }

func (t randomCrop) Plan(p *Plan, r *rand.Rand) error {
	if t.size <= 0 || t.size > maxSide || t.pad < 0 || t.pad > maxSide {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	W, H := p.Size()
	spanX, spanY := max(W+2*t.pad-t.size, 0), max(H+2*t.pad-t.size, 0)
	y, x := spanY/2, spanX/2
	if r != nil {
		y = r.IntN(spanY + 1)
		x = r.IntN(spanX + 1)
	}
	p.Crop(x-t.pad, y-t.pad, t.size, t.size)
	return nil
}

// Rotate90 turns the image k quarter turns counterclockwise (negative k: clockwise), as
// numpy.rot90; an odd k swaps its width and height. Quarter turns are exact: they only change the
// order in which the output is written.
func Rotate90(k int) Transform { return rot90{k: k} }

// RandomRotate90 turns the image by 0, 1, 2 or 3 quarter turns counterclockwise, uniformly at
// random (r.IntN(4)). A non-square output then changes shape from sample to sample, which a
// Loader rejects: use it on square images or before a square crop. Without a generator it does
// nothing.
func RandomRotate90() Transform { return rot90{random: true} }

type rot90 struct {
	k      int
	random bool
}

func (t rot90) String() string {
	if t.random {
		return "RandomRotate90()"
	}
	return fmt.Sprintf("Rotate90(%d)", t.k)
}

func (t rot90) Plan(p *Plan, r *rand.Rand) error {
	k := t.k
	if t.random {
		if r == nil {
			p.geometry()
			return nil
		}
		k = r.IntN(4)
	}
	p.Rotate90(k)
	return nil
}

// RandomRotation turns the image about its centre by an angle drawn uniformly from
// [-degrees, degrees] (counterclockwise for positive angles), keeping its size, with
// nearest-neighbour sampling and zeros where the turned image does not reach: torchvision's
// RandomRotation(degrees) with its defaults. It works on the output pixels, after the geometry, so
// it must come after every crop, resize, flip and quarter turn in Compose (a geometric transform
// after it is ErrInvalid). Without a generator it does nothing.
func RandomRotation(degrees float64) Transform { return rotation{degrees} }

type rotation struct{ deg float64 }

func (t rotation) String() string { return fmt.Sprintf("RandomRotation(%g)", t.deg) }

func (t rotation) Plan(p *Plan, r *rand.Rand) error {
	if !(t.deg >= 0 && t.deg <= 180) {
		return fmt.Errorf("transforms: %v: degrees must be in [0, 180]: %w", t, ErrInvalid)
	}
	p.frozen = true
	if r == nil || t.deg == 0 {
		return nil
	}
	angle := (-t.deg + r.Float64()*2*t.deg) * math.Pi / 180
	p.post = append(p.post, pixelOp{kind: opRotate, f: angle})
	return nil
}
