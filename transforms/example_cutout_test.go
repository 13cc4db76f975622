package transforms_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/stoke-ml/stoke/transforms"
)

// Cutout is a user-written transform: it blanks a random size x size square of the output
// (DeVries and Taylor's Cutout), a step the package does not provide.
type Cutout struct{ Size int }

func (c Cutout) String() string { return fmt.Sprintf("Cutout(%d)", c.Size) }

// Plan draws the square's place from the sample's generator (so it depends on the sample, not
// on the worker) and adds a pixel step that blanks it once the output has been resampled.
func (c Cutout) Plan(p *transforms.Plan, r *rand.Rand) error {
	if c.Size <= 0 {
		return fmt.Errorf("%v: %w", c, transforms.ErrInvalid)
	}
	if r == nil { // only the output shape is wanted
		return nil
	}
	w, h := p.Size()
	x0, y0 := r.IntN(w)-c.Size/2, r.IntN(h)-c.Size/2
	p.Pixels(func(m transforms.Image) {
		for y := max(y0, 0); y < min(y0+c.Size, m.H); y++ {
			for x := max(x0, 0); x < min(x0+c.Size, m.W); x++ {
				for ch := range m.C {
					m.Pix[m.Index(ch, y, x)] = 0
				}
			}
		}
	})
	return nil
}

// A transform of your own composes like the package's: here after the CIFAR recipe's padded crop
// and flip. The Loader hands every sample its own generator, seeded from (seed, epoch, sample).
func Example_userTransform() {
	p := transforms.Compose(transforms.RandomCrop(6, 1), transforms.HorizontalFlip(0.5), Cutout{Size: 2})
	in := transforms.Input{Pixels: make([]byte, 6*6), H: 6, W: 6, C: 1}
	for i := range in.Pixels {
		in.Pixels[i] = 9 // a uniform grey image
	}
	dst := make([]byte, 6*6)
	err := p.NewWorker().Apply(dst, in, rand.New(rand.NewPCG(1, 3)))
	fmt.Println(p, err)
	for y := range 6 {
		fmt.Println(dst[6*y : 6*y+6])
	}
	// Output:
	// Compose(RandomCrop(6, padding=1), HorizontalFlip(0.5), Cutout(2)) <nil>
	// [9 9 9 9 9 0]
	// [9 9 9 9 9 0]
	// [9 9 9 9 0 0]
	// [9 9 9 9 0 0]
	// [9 9 9 9 9 0]
	// [9 9 9 9 9 0]
}
