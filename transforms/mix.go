package transforms

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stoke-ml/stoke/internal/rng"
)

// Mix is batch-level MixUp and CutMix with torchvision v2's semantics (transforms.v2.MixUp and
// CutMix, the classification references' RandomMixup and RandomCutmix) and timm's choice between
// them (Mixup with switch_prob 0.5): each batch is mixed with probability P; when both alphas are
// set, it gets CutMix or MixUp with probability 1/2 each. Each sample i is mixed with the sample
// before it in the batch (i-1; sample 0 with the last: the batch rolled by one, as torchvision;
// timm pairs i with n-1-i instead), with a weight Lambda drawn from Beta(alpha, alpha), and its
// target becomes Lambda x its own + (1 - Lambda) x its neighbour's (MixParams.SoftTargets).
// MixUp blends whole images; CutMix pastes the neighbour's pixels in a box of about 1 - Lambda of
// the area, centred on a uniform pixel and clipped to the image, and sets Lambda to the share the
// box leaves (timm's correct_lam).
//
// It works on uint8 batches in their host slot, before the copy to the device (loaders.Config.Mix
// applies it there and hands the MixParams on with the batch, for the loss to mix the class ids
// into soft targets). A MixUp blend is rounded to uint8, as timm's FastCollateMixup rounds it,
// within 0.5/255 of torchvision's float blend of the normalized images (normalization is affine,
// so blending commutes with it); CutMix is exact. What a batch gets depends only on (Seed, epoch,
// batch sequence number); loaders.Config.Mix gives each data-parallel rank a Seed of its own.
type Mix struct {
	// MixUpAlpha is the Beta(alpha, alpha) parameter of MixUp's weight; 0 disables MixUp
	// (torchvision's ImageNet recipes: 0.2).
	MixUpAlpha float64
	// CutMixAlpha is CutMix's; 0 disables CutMix (the recipes: 1.0).
	CutMixAlpha float64
	// P is the probability that a batch is mixed at all; 0 means 1, as in the recipes.
	P float64
	// Seed makes the draws of one run: with the Loader's seed, a resumed run mixes as the
	// uninterrupted one.
	Seed uint64
}

// MixParams is what Mix drew for one batch.
type MixParams struct {
	// Mixed is false when the batch is left as it is (Lambda 1).
	Mixed, CutMix bool
	// Lambda is the weight of each sample's own target (and pixels), for MixUp a multiple of
	// 1/65536 (the Beta draw rounded), so that the uint8 blend is exact.
	Lambda float64
	// X1, Y1, X2, Y2 is CutMix's box: columns [X1, X2), rows [Y1, Y2).
	X1, Y1, X2, Y2 int
}

// Enabled reports whether m mixes at all (an alpha is set).
func (m Mix) Enabled() bool { return m.MixUpAlpha > 0 || m.CutMixAlpha > 0 }

// Validate checks the alphas and P.
func (m Mix) Validate() error {
	if !(m.MixUpAlpha >= 0) || !(m.CutMixAlpha >= 0) || math.IsInf(m.MixUpAlpha+m.CutMixAlpha, 0) || !(m.P >= 0 && m.P <= 1) {
		return fmt.Errorf("transforms: Mix{MixUpAlpha: %v, CutMixAlpha: %v, P: %v}: alphas must be finite and >= 0, P in [0, 1]: %w",
			m.MixUpAlpha, m.CutMixAlpha, m.P, ErrInvalid)
	}
	return nil
}

// Params returns what batch seq of epoch gets, for images of shape s.
func (m Mix) Params(epoch, seq int, s Shape) MixParams {
	none := MixParams{Lambda: 1}
	if m.Validate() != nil || !m.Enabled() || s.W <= 0 || s.H <= 0 {
		return none
	}
	r := rand.New(rand.NewPCG(rng.Mix(m.Seed, uint64(epoch), uint64(seq), 5), rng.Mix(m.Seed, uint64(epoch), uint64(seq), 6)))
	cut := m.MixUpAlpha == 0 || (m.CutMixAlpha > 0 && r.IntN(2) == 1)
	p := m.P
	if p == 0 {
		p = 1
	}
	if r.Float64() >= p {
		return none
	}
	if !cut {
		// Lambda in 65536ths: Apply's fixed-point blend is then the float blend, rounded, exactly.
		return MixParams{Mixed: true, Lambda: math.Round(beta(r, m.MixUpAlpha)*mixOne) / mixOne}
	}
	lam := beta(r, m.CutMixAlpha)
	rx, ry := r.IntN(s.W), r.IntN(s.H)
	rad := 0.5 * math.Sqrt(1-lam)
	rw, rh := int(rad*float64(s.W)), int(rad*float64(s.H))
	x1, y1 := max(rx-rw, 0), max(ry-rh, 0)
	x2, y2 := min(rx+rw, s.W), min(ry+rh, s.H)
	return MixParams{Mixed: true, CutMix: true, Lambda: 1 - float64((x2-x1)*(y2-y1))/float64(s.W*s.H), X1: x1, Y1: y1, X2: x2, Y2: y2}
}

// Apply mixes the n uint8 CHW images of shape s in images (one after the other) in place, as
// Params(epoch, seq, s) says, and returns the parameters. It allocates one image of scratch
// when it mixes. A Loader's Config.Collate calls it as
// m.Apply(hb.Images, hb.N, hb.Shape, hb.Epoch, hb.Seq).
func (m Mix) Apply(images []byte, n int, s Shape, epoch, seq int) (MixParams, error) {
	if err := m.Validate(); err != nil {
		return MixParams{}, err
	}
	if n < 0 || s.Len() <= 0 || len(images) < n*s.Len() {
		return MixParams{}, fmt.Errorf("transforms: Mix of %d images of %v in %d bytes: %w", n, s, len(images), ErrShape)
	}
	p := m.Params(epoch, seq, s)
	if !p.Mixed || n < 2 {
		return MixParams{Lambda: 1}, nil
	}
	sz := s.Len()
	last := append([]byte(nil), images[(n-1)*sz:n*sz]...) // sample 0's neighbour, before it changes
	for i := n - 1; i >= 0; i-- {
		dst := images[i*sz : (i+1)*sz]
		src := last
		if i > 0 {
			src = images[(i-1)*sz : i*sz]
		}
		if p.CutMix {
			for c := range s.C {
				for y := p.Y1; y < p.Y2; y++ {
					o := (c*s.H + y) * s.W
					copy(dst[o+p.X1:o+p.X2], src[o+p.X1:o+p.X2])
				}
			}
			continue
		}
		// round(Lambda*v + (1-Lambda)*src): both weights are exact in 65536ths, so this is the
		// float expression with its half rounded up, in integers (at most 255*65536 + 32768).
		w := uint32(p.Lambda * mixOne)
		src = src[:len(dst)]
		for k, v := range dst {
			dst[k] = byte((w*uint32(v) + (mixOne-w)*uint32(src[k]) + mixOne/2) >> 16)
		}
	}
	return p, nil
}

// SoftTargets writes the batch's soft targets into dst (n rows of classes float32): Lambda on
// each sample's own label, 1 - Lambda added on its neighbour's (labels[i-1]; labels[n-1] for
// sample 0), as torchvision's one-hot targets mixed. A label outside [0, classes) is an error.
func (p MixParams) SoftTargets(dst []float32, labels []int32, classes int) error {
	n := len(labels)
	if classes <= 0 || len(dst) < n*classes {
		return fmt.Errorf("transforms: SoftTargets of %d labels, %d classes into %d values: %w", n, classes, len(dst), ErrShape)
	}
	lam := p.Lambda
	if !p.Mixed {
		lam = 1
	}
	clear(dst[:n*classes])
	for i, l := range labels {
		prev := labels[(i+n-1)%n]
		if l < 0 || int(l) >= classes || prev < 0 || int(prev) >= classes {
			return fmt.Errorf("transforms: SoftTargets: label %d of sample %d not in [0, %d): %w", l, i, classes, ErrInvalid)
		}
		row := dst[i*classes : (i+1)*classes]
		row[l] += float32(lam)
		row[prev] += float32(1 - lam)
	}
	return nil
}

// mixOne is MixUp's weight 1 in its fixed-point blend: Lambda is a multiple of 1/mixOne.
const mixOne = 1 << 16

// beta draws from Beta(a, a) as X / (X + Y) of two Gamma(a) draws.
func beta(r *rand.Rand, a float64) float64 {
	x, y := gamma(r, a), gamma(r, a)
	if x+y == 0 {
		return 0.5
	}
	return x / (x + y)
}

// gamma draws from Gamma(a, 1): Marsaglia and Tsang's method, boosted for a < 1.
func gamma(r *rand.Rand, a float64) float64 {
	if a < 1 {
		return gamma(r, a+1) * math.Pow(r.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
