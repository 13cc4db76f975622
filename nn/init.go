package nn

import (
	"math"
	"math/rand/v2"
)

// Init says what a parameter or buffer is, and so how it starts unless SetDist gives it a
// distribution of its own: Bind and trainers fill it so. A trainer also takes weight decay from
// it: a Weight decays, the others do not.
type Init uint8

const (
	// Weight is a random weight of shape [out in ...] (PyTorch's layout), uniform within
	// ±√(6/fan_in) (He) for the package's Bind; a trainer applies its own rule (train's: He or
	// Glorot) to a Weight.
	Weight Init = iota + 1
	// Zeros starts at 0 (a bias, a running mean).
	Zeros
	// Ones starts at 1 (a norm's scale, a running variance).
	Ones
	// Embedding is a learned embedding added to or put among the activations (a position
	// embedding, a class token, a table of relative position biases): normal with std 0.02, as
	// torchvision's ViT and timm's start theirs, and, in a trainer, without weight decay (timm's
	// no_weight_decay).
	Embedding
)

// bindDist is Bind's distribution for a tensor of shape with no Dist of its own.
func (i Init) bindDist(shape []int) Dist {
	switch i {
	case Weight:
		fanIn := 1
		if len(shape) > 1 {
			fanIn = prod(shape[1:])
		}
		return Uniform(math.Sqrt(6 / float64(max(fanIn, 1))))
	case Ones:
		return Const(1)
	case Embedding:
		return Normal(0.02)
	}
	return Const(0)
}

// Dist is a distribution a tensor's initial values are drawn from, one of torch.nn.init's fills:
// what a model's constructor gives a tensor whose start its Init does not say (torchvision's and
// timm's constructors initialize each layer their own way). The zero Dist is none.
type Dist struct {
	kind distKind
	v    float64 // the constant, the standard deviation or the bound
}

type distKind uint8

const (
	distConst distKind = iota + 1
	distNormal
	distTruncNormal
	distUniform
)

// Const is the value v everywhere (torch.nn.init.constant_).
func Const(v float64) Dist { return Dist{distConst, v} }

// Normal is normal with mean 0 and standard deviation std (torch.nn.init.normal_).
func Normal(std float64) Dist { return Dist{distNormal, std} }

// TruncNormal is Normal(std) redrawn outside [−2, 2]: torch.nn.init.trunc_normal_ with its
// default bounds, which are absolute, not in standard deviations.
func TruncNormal(std float64) Dist { return Dist{distTruncNormal, std} }

// Uniform is uniform within ±bound (torch.nn.init.uniform_(−bound, bound)).
func Uniform(bound float64) Dist { return Dist{distUniform, bound} }

// Fill writes values drawn from d with r to dst; for the zero Dist it writes nothing and
// returns false.
func (d Dist) Fill(dst []float32, r *rand.Rand) bool {
	switch d.kind {
	case distConst:
		for i := range dst {
			dst[i] = float32(d.v)
		}
	case distNormal:
		for i := range dst {
			dst[i] = float32(d.v * r.NormFloat64())
		}
	case distTruncNormal:
		for i := range dst {
			x := d.v * r.NormFloat64()
			for math.Abs(x) > 2 {
				x = d.v * r.NormFloat64()
			}
			dst[i] = float32(x)
		}
	case distUniform:
		for i := range dst {
			dst[i] = float32((2*r.Float64() - 1) * d.v)
		}
	default:
		return false
	}
	return true
}

// SetDist makes a parameter or buffer start with values drawn from d instead of its Init's
// (torch.nn.init's fills in a model's constructor) and returns it; it does nothing to a graph's
// tensor.
func (t *Tensor) SetDist(d Dist) *Tensor {
	if t.p != nil {
		t.p.dist = d
	}
	return t
}

// Dist is the distribution SetDist gave the tensor; the zero Dist when none.
func (t *Tensor) Dist() Dist {
	if t.p == nil {
		return Dist{}
	}
	return t.p.dist
}
