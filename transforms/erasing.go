package transforms

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// RandomErasing is torchvision's RandomErasing(p, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)
// on the uint8 output: with probability p, a box of a random area fraction in scale and a
// log-uniform aspect ratio (height over width) in ratio (up to 10 attempts, the first that fits
// strictly inside the image; none: nothing is erased) is set to 0. torchvision's recipes erase after
// Normalize, where 0 is the mean colour: RandomErasingWith with the mean in uint8 (for ImageNet
// {124, 116, 104}) gives that. It acts on the output pixels: geometry after it is ErrInvalid.
// Without a generator it does nothing.
func RandomErasing(p float64) Transform {
	return erasing{p: p, scale: [2]float64{0.02, 0.33}, ratio: [2]float64{0.3, 3.3}}
}

// RandomErasingWith is RandomErasing with the area-fraction range scale (0 <= scale[0] <=
// scale[1] <= 1), the aspect-ratio range ratio (0 < ratio[0] <= ratio[1]) and the value of the
// erased pixels: one byte for every channel, or one per channel (3).
func RandomErasingWith(p float64, scale, ratio [2]float64, value []byte) Transform {
	t := erasing{p: p, scale: scale, ratio: ratio, nv: len(value)}
	copy(t.value[:], value)
	if len(value) == 1 {
		t.value = [3]byte{value[0], value[0], value[0]}
	}
	return t
}

type erasing struct {
	p            float64
	scale, ratio [2]float64
	value        [3]byte
	nv           int
}

func (t erasing) String() string {
	return fmt.Sprintf("RandomErasing(p=%g, scale=%v, ratio=%v, value=%v)", t.p, t.scale, t.ratio, t.value[:max(t.nv, 1)])
}

func (t erasing) Plan(p *Plan, r *rand.Rand) error {
	if !(t.p >= 0 && t.p <= 1) || !(t.scale[0] >= 0 && t.scale[0] <= t.scale[1] && t.scale[1] <= 1) ||
		!(t.ratio[0] > 0 && t.ratio[0] <= t.ratio[1]) || math.IsInf(t.ratio[1], 0) || (t.nv != 0 && t.nv != 1 && t.nv != 3) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	p.frozen = true
	if r == nil || !(r.Float64() < t.p) {
		return nil
	}
	w, h := p.Size()
	area := float64(w * h)
	lr0, lr1 := math.Log(t.ratio[0]), math.Log(t.ratio[1])
	for range 10 {
		ea := area * (t.scale[0] + r.Float64()*(t.scale[1]-t.scale[0]))
		ar := math.Exp(lr0 + r.Float64()*(lr1-lr0))
		eh := int(math.RoundToEven(math.Sqrt(ea * ar)))
		ew := int(math.RoundToEven(math.Sqrt(ea / ar)))
		if !(eh < h && ew < w) {
			continue
		}
		top := r.IntN(h - eh + 1)
		left := r.IntN(w - ew + 1)
		p.post = append(p.post, pixelOp{kind: opErase, n: [4]int{top, left, eh, ew}, v: t.value})
		return nil
	}
	return nil
}

// RandomGrayscale is torchvision's RandomGrayscale(p): with probability p, each pixel of a
// 3-channel output becomes its grey value in all three channels (0.2989 R + 0.587 G + 0.114 B,
// truncated, as rgb_to_grayscale on a uint8 tensor). 1-channel outputs are left as they are. It
// acts on the output pixels, pixel by pixel, so like ColorJitter it may come before geometry (it
// still runs after it). Without a generator it does nothing.
func RandomGrayscale(p float64) Transform { return grayscale{p} }

type grayscale struct{ p float64 }

func (t grayscale) String() string { return fmt.Sprintf("RandomGrayscale(%g)", t.p) }

func (t grayscale) Plan(p *Plan, r *rand.Rand) error {
	if !(t.p >= 0 && t.p <= 1) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	if r != nil && r.Float64() < t.p {
		p.post = append(p.post, pixelOp{kind: opGrayscale})
	}
	return nil
}

// GaussianBlur is torchvision's GaussianBlur(size, sigma=(sigmaMin, sigmaMax)): a size x size
// Gaussian kernel (size odd, 1 to 255) of a standard deviation drawn uniformly from [sigmaMin,
// sigmaMax] (0 < sigmaMin <= sigmaMax; torchvision's default range is 0.1 to 2), with reflected
// borders, rounded to the nearest value. It acts on the output pixels: geometry after it is
// ErrInvalid. Without a generator the mean of the range is used.
func GaussianBlur(size int, sigmaMin, sigmaMax float64) Transform {
	return blur{size, sigmaMin, sigmaMax}
}

type blur struct {
	size   int
	lo, hi float64
}

func (t blur) String() string {
	return fmt.Sprintf("GaussianBlur(%d, sigma=(%g, %g))", t.size, t.lo, t.hi)
}

func (t blur) Plan(p *Plan, r *rand.Rand) error {
	if t.size < 1 || t.size%2 == 0 || t.size > maxBlurKernel || !(t.lo > 0 && t.lo <= t.hi) || math.IsInf(t.hi, 0) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	p.frozen = true // its borders are those of the output
	sigma := (t.lo + t.hi) / 2
	if r != nil {
		sigma = t.lo + r.Float64()*(t.hi-t.lo)
	}
	p.post = append(p.post, pixelOp{kind: opBlur, n: [4]int{t.size}, f: sigma})
	return nil
}

// ColorJitterHue is ColorJitter with hue: the hue of each pixel shifted by a factor drawn
// uniformly from [-hue, hue] (0 <= hue <= 0.5) through HSV, as adjust_hue on a uint8 tensor
// (float32, truncated). The four parts run in a random order, as torchvision's ColorJitter; hue
// 0 is ColorJitter exactly (the same draws and output). 1-channel outputs keep their hue.
func ColorJitterHue(brightness, contrast, saturation, hue float64) Transform {
	return jitter{brightness, contrast, saturation, hue}
}

// RandomPerspective is torchvision's RandomPerspective(distortion, p) with its defaults (bilinear
// interpolation, fill 0): with probability p, each corner of the output moves inwards by up to
// distortion (in [0, 1]) of half the side, drawn as torchvision draws it, and the image is warped
// so that its corners land there; outside, zero. As torchvision with a fill, a pixel near the
// border is its bilinear value times the share of its sample that lies inside. It acts on the
// output pixels: geometry after it is ErrInvalid. Without a generator it does nothing.
func RandomPerspective(distortion, p float64) Transform { return perspective{distortion, p} }

type perspective struct{ d, p float64 }

func (t perspective) String() string { return fmt.Sprintf("RandomPerspective(%g, p=%g)", t.d, t.p) }

func (t perspective) Plan(p *Plan, r *rand.Rand) error {
	if !(t.d >= 0 && t.d <= 1) || !(t.p >= 0 && t.p <= 1) {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	p.frozen = true
	if r == nil || !(r.Float64() < t.p) {
		return nil
	}
	w, h := p.Size()
	dx, dy := int(t.d*float64(w/2)), int(t.d*float64(h/2))
	in := func(lo, hi int) float64 { return float64(lo + r.IntN(hi-lo)) } // torch.randint(lo, hi)
	var end [4][2]float64
	end[0] = [2]float64{in(0, dx+1), in(0, dy+1)}
	end[1] = [2]float64{in(w-dx-1, w), in(0, dy+1)}
	end[2] = [2]float64{in(w-dx-1, w), in(h-dy-1, h)}
	end[3] = [2]float64{in(0, dx+1), in(h-dy-1, h)}
	start := perspectiveCorners(w, h)
	c, ok := perspectiveCoeffs(start, end)
	if !ok { // a degenerate quadrilateral (a 1-pixel side): leave the image
		return nil
	}
	p.post = append(p.post, pixelOp{kind: opPerspective, m: c})
	return nil
}

// perspectiveCorners are torchvision's start points: the image's corner pixels, clockwise from
// the top-left.
func perspectiveCorners(w, h int) [4][2]float64 {
	return [4][2]float64{{0, 0}, {float64(w - 1), 0}, {float64(w - 1), float64(h - 1)}, {0, float64(h - 1)}}
}
