package transforms

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// augOp is one operation of torchvision's augmentation spaces (autoaugment.py's _apply_op).
type augOp uint8

const (
	augIdentity augOp = iota
	augShearX
	augShearY
	augTranslateX
	augTranslateY
	augRotate
	augBrightness
	augColor
	augContrast
	augSharpness
	augPosterize
	augSolarize
	augAutoContrast
	augEqualize
	augInvert // AutoAugment's policies only
	numAugOps = augEqualize + 1
)

var augNames = [...]string{"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
	"Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"}

func (o augOp) String() string { return augNames[o] }

// signed reports whether a magnitude of o is negated with probability 1/2.
func (o augOp) signed() bool { return o >= augShearX && o <= augSharpness }

// hasMagnitude reports whether o draws a magnitude (the others have the scalar magnitude 0).
func (o augOp) hasMagnitude() bool { return o >= augShearX && o <= augSolarize }

// augSpace is one of torchvision's _augmentation_space tables: wide is TrivialAugmentWide's,
// otherwise RandAugment's and AutoAugment's (whose translations scale with the image).
type augSpace struct {
	bins int
	wide bool
}

// magnitude is magnitudes[i] of op's table for a w x h image, as the float32 torch value.
func (s augSpace) magnitude(op augOp, i, w, h int) float64 {
	lin := func(end float64) float64 { return float64(linspace32(0, float32(end), s.bins, i)) }
	wide := func(a, b float64) float64 {
		if s.wide {
			return a
		}
		return b
	}
	switch op {
	case augShearX, augShearY:
		return lin(wide(0.99, 0.3))
	case augTranslateX:
		return lin(wide(32, 150.0/331.0*float64(w)))
	case augTranslateY:
		return lin(wide(32, 150.0/331.0*float64(h)))
	case augRotate:
		return lin(wide(135, 30))
	case augBrightness, augColor, augContrast, augSharpness:
		return lin(wide(0.99, 0.9))
	case augPosterize:
		// 8 - (arange(bins) / ((bins - 1) / k)).round().int(), the division in float32.
		k := wide(6, 4)
		return float64(8 - int(math.RoundToEven(float64(float32(i)/float32(float64(s.bins-1)/k)))))
	case augSolarize:
		return float64(linspace32(255, 0, s.bins, i))
	}
	return 0
}

// planAugOp adds op with magnitude mag to p, as torchvision's _apply_op with nearest
// interpolation and no fill. A translation is exact, so while nothing works on the output pixels
// yet it becomes a crop of the geometry, resampled in the same pass; otherwise it is a pixel
// step like the other geometric operations.
func planAugOp(p *Plan, op augOp, mag float64) {
	w, h := p.Size()
	fw, fh := float64(w), float64(h)
	affine := func(m [8]float64) { p.post = append(p.post, pixelOp{kind: opAffine, m: m}) }
	pixel := func(kind uint8, f float64) { p.post = append(p.post, pixelOp{kind: kind, f: f}) }
	switch op {
	case augShearX:
		affine(affineMatrix(-fw*0.5, -fh*0.5, 0, 0, 0, 1, degrees(math.Atan(mag)), 0))
	case augShearY:
		affine(affineMatrix(-fw*0.5, -fh*0.5, 0, 0, 0, 1, 0, degrees(math.Atan(mag))))
	case augTranslateX, augTranslateY:
		tx, ty := int(mag), 0
		if op == augTranslateY {
			tx, ty = 0, int(mag)
		}
		if !p.frozen && len(p.post) == 0 {
			p.Crop(-tx, -ty, w, h)
			return
		}
		affine(affineMatrix(0, 0, 0, float64(tx), float64(ty), 1, 0, 0))
	case augRotate:
		affine(affineMatrix(0, 0, -mag, 0, 0, 1, 0, 0))
	case augBrightness:
		pixel(opBrightnessT, 1+mag)
	case augColor:
		pixel(opSaturationT, 1+mag)
	case augContrast:
		pixel(opContrastT, 1+mag)
	case augSharpness:
		pixel(opSharpness, 1+mag)
	case augPosterize:
		p.post = append(p.post, pixelOp{kind: opPosterize, n: [4]int{int(mag)}})
	case augSolarize:
		pixel(opSolarize, mag)
	case augAutoContrast:
		pixel(opAutoContrast, 0)
	case augEqualize:
		pixel(opEqualize, 0)
	case augInvert:
		pixel(opInvert, 0)
	}
}

// drawAugOp draws op's magnitude (bin i) and sign from r as RandAugment and TrivialAugmentWide
// do (a sign only for signed ops) and adds it to p.
func drawAugOp(p *Plan, r *rand.Rand, s augSpace, op augOp, i int) {
	w, h := p.Size()
	mag := s.magnitude(op, i, w, h)
	if op.signed() && r.IntN(2) == 1 {
		mag = -mag
	}
	planAugOp(p, op, mag)
}

// TrivialAugmentWide is torchvision's TrivialAugmentWide() (31 magnitude bins, nearest
// interpolation, zero fill): one of 14 operations (Identity, ShearX, ShearY, TranslateX,
// TranslateY, Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast,
// Equalize) drawn uniformly, with a magnitude drawn uniformly from its table (shears up to 0.99,
// translations up to 32 pixels, rotations up to 135 degrees, enhancement factors 1 +- 0.99,
// posterize 8 to 2 bits, solarize thresholds 255 to 0) and a random sign where the operation has
// one. It acts on the output pixels, so it comes after the crops and resizes; like
// RandomRotation, geometry after it is ErrInvalid. Without a generator it does nothing.
func TrivialAugmentWide() Transform { return trivialAugment{bins: 31} }

type trivialAugment struct{ bins int }

func (t trivialAugment) String() string { return fmt.Sprintf("TrivialAugmentWide(bins=%d)", t.bins) }

func (t trivialAugment) Plan(p *Plan, r *rand.Rand) error {
	if t.bins < 2 || t.bins > 1<<16 {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	if r != nil {
		op := augOp(r.IntN(int(numAugOps)))
		i := 0
		if op.hasMagnitude() {
			i = r.IntN(t.bins)
		}
		drawAugOp(p, r, augSpace{bins: t.bins, wide: true}, op, i)
	}
	p.frozen = true
	return nil
}

// RandAugment is torchvision's RandAugment(num_ops=n, magnitude=m) with 31 magnitude bins,
// nearest interpolation and zero fill: n operations drawn uniformly (with replacement) from the
// same 14 as TrivialAugmentWide, each at bin m of RandAugment's tables (shears up to 0.3,
// translations up to 150/331 of the side, rotations up to 30 degrees, factors 1 +- 0.9, posterize
// 8 to 4 bits) with a random sign. torchvision's defaults are n = 2, m = 9. m must be in [0, 31).
// It acts on the output pixels (see TrivialAugmentWide). Without a generator it does nothing.
func RandAugment(n, m int) Transform { return randAugment{n: n, m: m, bins: 31} }

type randAugment struct{ n, m, bins int }

func (t randAugment) String() string {
	return fmt.Sprintf("RandAugment(num_ops=%d, magnitude=%d, bins=%d)", t.n, t.m, t.bins)
}

func (t randAugment) Plan(p *Plan, r *rand.Rand) error {
	if t.n < 0 || t.n > 64 || t.bins < 2 || t.m < 0 || t.m >= t.bins {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	if r != nil {
		for range t.n {
			drawAugOp(p, r, augSpace{bins: t.bins}, augOp(r.IntN(int(numAugOps))), t.m)
		}
	}
	p.frozen = true
	return nil
}

// AutoAugmentPolicy names one of the policies AutoAugment learned.
type AutoAugmentPolicy uint8

const (
	ImageNetPolicy AutoAugmentPolicy = iota // the policy learned on ImageNet (torchvision's default)
	CIFAR10Policy                           // the policy learned on CIFAR-10
	SVHNPolicy                              // the policy learned on SVHN
)

func (p AutoAugmentPolicy) String() string {
	switch p {
	case CIFAR10Policy:
		return "cifar10"
	case SVHNPolicy:
		return "svhn"
	}
	return "imagenet"
}

// AutoAugment is torchvision's AutoAugment(policy) (nearest interpolation, zero fill): one of
// the policy's 25 sub-policies drawn uniformly, each of its two operations applied with its
// probability at its magnitude bin (of 10, RandAugment's tables) with a random sign. It acts on
// the output pixels (see TrivialAugmentWide). Without a generator it does nothing.
func AutoAugment(policy AutoAugmentPolicy) Transform { return autoAugment{policy} }

type autoAugment struct{ policy AutoAugmentPolicy }

func (t autoAugment) String() string { return fmt.Sprintf("AutoAugment(%v)", t.policy) }

// ParseAugment returns the automatic augmentation policy named s, in the words of stoke train
// --augment and train.Recipe.AutoAugment: "trivialaugment" (TrivialAugmentWide()),
// "randaugment" (RandAugment(2, 9), torchvision's defaults), "randaugment:N:M" (RandAugment(N, M):
// 0 <= N <= 64 operations at magnitude 0 <= M <= 30), "autoaugment" (AutoAugment(ImageNetPolicy));
// nil for "none" and "". Any other s is an error wrapping ErrInvalid.
func ParseAugment(s string) (Transform, error) {
	switch {
	case s == "" || s == "none":
		return nil, nil
	case s == "trivialaugment":
		return TrivialAugmentWide(), nil
	case s == "randaugment":
		return RandAugment(2, 9), nil
	case s == "autoaugment":
		return AutoAugment(ImageNetPolicy), nil
	case strings.HasPrefix(s, "randaugment:"):
		if n, m, ok := randAugmentArgs(s); ok {
			return RandAugment(n, m), nil
		}
		return nil, fmt.Errorf("transforms: augmentation %q: want randaugment:N:M with 0 <= N <= 64 operations and a magnitude 0 <= M <= 30: %w", s, ErrInvalid)
	}
	return nil, fmt.Errorf("transforms: augmentation %q: want none, trivialaugment, randaugment, randaugment:N:M or autoaugment: %w", s, ErrInvalid)
}

// randAugmentArgs parses randaugment:N:M.
func randAugmentArgs(s string) (n, m int, ok bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(parts[1])
	m, err2 := strconv.Atoi(parts[2])
	return n, m, err1 == nil && err2 == nil && n >= 0 && n <= 64 && m >= 0 && m <= 30
}

// subPolicy is one (operation, probability, magnitude bin) pair of a policy; bin -1 is None.
type subPolicy [2]struct {
	op  augOp
	p   float64
	bin int
}

func (t autoAugment) Plan(p *Plan, r *rand.Rand) error {
	if t.policy > SVHNPolicy {
		return fmt.Errorf("transforms: %v: unknown policy: %w", t, ErrInvalid)
	}
	if r != nil {
		pol := &autoPolicies[t.policy]
		sp := &pol[r.IntN(len(pol))]
		probs := [2]float64{r.Float64(), r.Float64()}
		signs := [2]int{r.IntN(2), r.IntN(2)}
		s := augSpace{bins: 10}
		for i, o := range sp {
			if probs[i] > o.p {
				continue
			}
			mag := 0.0
			if o.bin >= 0 {
				w, h := p.Size()
				mag = s.magnitude(o.op, o.bin, w, h)
			}
			if o.op.signed() && signs[i] == 0 {
				mag = -mag
			}
			planAugOp(p, o.op, mag)
		}
	}
	p.frozen = true
	return nil
}

func sub(op1 augOp, p1 float64, b1 int, op2 augOp, p2 float64, b2 int) subPolicy {
	var s subPolicy
	s[0].op, s[0].p, s[0].bin = op1, p1, b1
	s[1].op, s[1].p, s[1].bin = op2, p2, b2
	return s
}

const none = -1

// autoPolicies are torchvision 0.14's AutoAugmentPolicy tables, in its order.
var autoPolicies = [3][25]subPolicy{
	ImageNetPolicy: {
		sub(augPosterize, 0.4, 8, augRotate, 0.6, 9),
		sub(augSolarize, 0.6, 5, augAutoContrast, 0.6, none),
		sub(augEqualize, 0.8, none, augEqualize, 0.6, none),
		sub(augPosterize, 0.6, 7, augPosterize, 0.6, 6),
		sub(augEqualize, 0.4, none, augSolarize, 0.2, 4),
		sub(augEqualize, 0.4, none, augRotate, 0.8, 8),
		sub(augSolarize, 0.6, 3, augEqualize, 0.6, none),
		sub(augPosterize, 0.8, 5, augEqualize, 1.0, none),
		sub(augRotate, 0.2, 3, augSolarize, 0.6, 8),
		sub(augEqualize, 0.6, none, augPosterize, 0.4, 6),
		sub(augRotate, 0.8, 8, augColor, 0.4, 0),
		sub(augRotate, 0.4, 9, augEqualize, 0.6, none),
		sub(augEqualize, 0.0, none, augEqualize, 0.8, none),
		sub(augInvert, 0.6, none, augEqualize, 1.0, none),
		sub(augColor, 0.6, 4, augContrast, 1.0, 8),
		sub(augRotate, 0.8, 8, augColor, 1.0, 2),
		sub(augColor, 0.8, 8, augSolarize, 0.8, 7),
		sub(augSharpness, 0.4, 7, augInvert, 0.6, none),
		sub(augShearX, 0.6, 5, augEqualize, 1.0, none),
		sub(augColor, 0.4, 0, augEqualize, 0.6, none),
		sub(augEqualize, 0.4, none, augSolarize, 0.2, 4),
		sub(augSolarize, 0.6, 5, augAutoContrast, 0.6, none),
		sub(augInvert, 0.6, none, augEqualize, 1.0, none),
		sub(augColor, 0.6, 4, augContrast, 1.0, 8),
		sub(augEqualize, 0.8, none, augEqualize, 0.6, none),
	},
	CIFAR10Policy: {
		sub(augInvert, 0.1, none, augContrast, 0.2, 6),
		sub(augRotate, 0.7, 2, augTranslateX, 0.3, 9),
		sub(augSharpness, 0.8, 1, augSharpness, 0.9, 3),
		sub(augShearY, 0.5, 8, augTranslateY, 0.7, 9),
		sub(augAutoContrast, 0.5, none, augEqualize, 0.9, none),
		sub(augShearY, 0.2, 7, augPosterize, 0.3, 7),
		sub(augColor, 0.4, 3, augBrightness, 0.6, 7),
		sub(augSharpness, 0.3, 9, augBrightness, 0.7, 9),
		sub(augEqualize, 0.6, none, augEqualize, 0.5, none),
		sub(augContrast, 0.6, 7, augSharpness, 0.6, 5),
		sub(augColor, 0.7, 7, augTranslateX, 0.5, 8),
		sub(augEqualize, 0.3, none, augAutoContrast, 0.4, none),
		sub(augTranslateY, 0.4, 3, augSharpness, 0.2, 6),
		sub(augBrightness, 0.9, 6, augColor, 0.2, 8),
		sub(augSolarize, 0.5, 2, augInvert, 0.0, none),
		sub(augEqualize, 0.2, none, augAutoContrast, 0.6, none),
		sub(augEqualize, 0.2, none, augEqualize, 0.6, none),
		sub(augColor, 0.9, 9, augEqualize, 0.6, none),
		sub(augAutoContrast, 0.8, none, augSolarize, 0.2, 8),
		sub(augBrightness, 0.1, 3, augColor, 0.7, 0),
		sub(augSolarize, 0.4, 5, augAutoContrast, 0.9, none),
		sub(augTranslateY, 0.9, 9, augTranslateY, 0.7, 9),
		sub(augAutoContrast, 0.9, none, augSolarize, 0.8, 3),
		sub(augEqualize, 0.8, none, augInvert, 0.1, none),
		sub(augTranslateY, 0.7, 9, augAutoContrast, 0.9, none),
	},
	SVHNPolicy: {
		sub(augShearX, 0.9, 4, augInvert, 0.2, none),
		sub(augShearY, 0.9, 8, augInvert, 0.7, none),
		sub(augEqualize, 0.6, none, augSolarize, 0.6, 6),
		sub(augInvert, 0.9, none, augEqualize, 0.6, none),
		sub(augEqualize, 0.6, none, augRotate, 0.9, 3),
		sub(augShearX, 0.9, 4, augAutoContrast, 0.8, none),
		sub(augShearY, 0.9, 8, augInvert, 0.4, none),
		sub(augShearY, 0.9, 5, augSolarize, 0.2, 6),
		sub(augInvert, 0.9, none, augAutoContrast, 0.8, none),
		sub(augEqualize, 0.6, none, augRotate, 0.9, 3),
		sub(augShearX, 0.9, 4, augSolarize, 0.3, 3),
		sub(augShearY, 0.8, 8, augInvert, 0.7, none),
		sub(augEqualize, 0.9, none, augTranslateY, 0.6, 6),
		sub(augInvert, 0.9, none, augEqualize, 0.6, none),
		sub(augContrast, 0.3, 3, augRotate, 0.8, 4),
		sub(augInvert, 0.8, none, augTranslateY, 0.0, 2),
		sub(augShearY, 0.7, 6, augSolarize, 0.4, 8),
		sub(augInvert, 0.6, none, augRotate, 0.8, 4),
		sub(augShearY, 0.3, 7, augTranslateX, 0.9, 3),
		sub(augShearX, 0.1, 6, augInvert, 0.6, none),
		sub(augSolarize, 0.7, 2, augTranslateY, 0.6, 7),
		sub(augShearY, 0.8, 4, augInvert, 0.8, none),
		sub(augShearX, 0.7, 9, augTranslateY, 0.8, 3),
		sub(augShearY, 0.8, 5, augAutoContrast, 0.7, none),
		sub(augShearX, 0.7, 2, augInvert, 0.1, none),
	},
}

// Affine is the parameter ranges of RandomAffine, torchvision's: an angle in degrees drawn from
// Degrees (counterclockwise for positive angles); a translation of up to Translate[0] of the
// width and Translate[1] of the height, each drawn uniformly in +-, rounded to whole pixels; a
// scale from Scale (zero: 1); a shear in degrees parallel to x from Shear[0:2] and to y from
// Shear[2:4] (zeros: none).
type Affine struct {
	Degrees   [2]float64
	Translate [2]float64
	Scale     [2]float64
	Shear     [4]float64
}

// RandomAffine is torchvision's RandomAffine(degrees, translate, scale, shear) with its defaults
// (nearest interpolation, zero fill, the image's centre): one affine map drawn from a's ranges
// (in torchvision's order: angle, translation, scale, shears), applied to the output pixels.
// Geometry after it is ErrInvalid. Without a generator it does nothing.
func RandomAffine(a Affine) Transform { return randomAffine(a) }

type randomAffine Affine

func (t randomAffine) String() string {
	return fmt.Sprintf("RandomAffine(degrees=%v, translate=%v, scale=%v, shear=%v)", t.Degrees, t.Translate, t.Scale, t.Shear)
}

func (t randomAffine) Plan(p *Plan, r *rand.Rand) error {
	ok := t.Degrees[0] <= t.Degrees[1] && t.Degrees[0] >= -360 && t.Degrees[1] <= 360 &&
		t.Translate[0] >= 0 && t.Translate[0] <= 1 && t.Translate[1] >= 0 && t.Translate[1] <= 1 &&
		(t.Scale == [2]float64{} || (t.Scale[0] > 0 && t.Scale[0] <= t.Scale[1] && t.Scale[1] <= 100)) &&
		t.Shear[0] <= t.Shear[1] && t.Shear[2] <= t.Shear[3]
	for _, s := range t.Shear {
		ok = ok && s > -90 && s < 90
	}
	if !ok {
		return fmt.Errorf("transforms: %v: %w", t, ErrInvalid)
	}
	p.frozen = true
	if r == nil {
		return nil
	}
	uniform := func(lo, hi float64) float64 { return lo + r.Float64()*(hi-lo) }
	w, h := p.Size()
	angle := uniform(t.Degrees[0], t.Degrees[1])
	var tx, ty float64
	if t.Translate != [2]float64{} {
		dx, dy := t.Translate[0]*float64(w), t.Translate[1]*float64(h)
		tx = math.RoundToEven(uniform(-dx, dx))
		ty = math.RoundToEven(uniform(-dy, dy))
	}
	scale := 1.0
	if t.Scale != [2]float64{} {
		scale = uniform(t.Scale[0], t.Scale[1])
	}
	var shx, shy float64
	if t.Shear != [4]float64{} {
		shx = uniform(t.Shear[0], t.Shear[1])
		if t.Shear[2] != 0 || t.Shear[3] != 0 {
			shy = uniform(t.Shear[2], t.Shear[3])
		}
	}
	p.post = append(p.post, pixelOp{kind: opAffine, m: affineMatrix(0, 0, angle, tx, ty, scale, shx, shy)})
	return nil
}
