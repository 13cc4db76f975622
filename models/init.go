package models

import (
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// Each family's constructor ends with its torchvision or timm constructor's initialization
// (nn.Tensor.SetDist), so that a model trained from scratch starts where theirs does. The layers
// of package nn start otherwise (their Init: a trainer's rule for a weight, zeros for a bias).

// fans are torch's fan_in and fan_out of a weight [out in ...]: its second and its first
// dimension, each times the kernel's size (the dimensions after the second).
func fans(w *nn.Tensor) (in, out float64) {
	k := 1
	for d := 2; d < w.Rank(); d++ {
		k *= w.Dim(d)
	}
	return float64(w.Dim(1) * k), float64(w.Dim(0) * k)
}

// torchDefault starts a layer of weight w and bias b (nil when none) as torch.nn.Linear's and
// Conv2d's reset_parameters do: kaiming_uniform_(a=√5) for the weight and a bias of the same
// bound, each uniform within ±1/√fan_in.
func torchDefault(w, b *nn.Tensor) {
	in, _ := fans(w)
	d := nn.Uniform(1 / math.Sqrt(in))
	w.SetDist(d)
	if b != nil {
		b.SetDist(d)
	}
}

// layerInit is the distribution of a layer's weight w, given its groups (1 for a linear layer).
type layerInit func(w *nn.Tensor, groups int) nn.Dist

// always is d for every layer.
func always(d nn.Dist) layerInit { return func(*nn.Tensor, int) nn.Dist { return d } }

// kaimingFanOut is torch.nn.init.kaiming_normal_(w, mode="fan_out") for a ReLU: normal with
// std √(2/fan_out), whatever the groups.
func kaimingFanOut(w *nn.Tensor, _ int) nn.Dist {
	_, out := fans(w)
	return nn.Normal(math.Sqrt(2 / out))
}

// uniformOut is torchvision's and timm's EfficientNets' linear init: uniform within
// ±1/√out_features.
func uniformOut(w *nn.Tensor, _ int) nn.Dist { return nn.Uniform(1 / math.Sqrt(float64(w.Dim(0)))) }

// xavierUniform is torch.nn.init.xavier_uniform_(w): uniform within ±√(6/(fan_in+fan_out)).
func xavierUniform(w *nn.Tensor) nn.Dist {
	in, out := fans(w)
	return nn.Uniform(math.Sqrt(6 / (in + out)))
}

// initLayers gives the weight of every convolution of m conv's distribution and that of every
// linear layer linear's (nil: leaves those layers as they are); biases and norms keep theirs
// (zeros, ones). It is the loop over self.modules() that ends the constructors of torchvision's
// ConvNeXt, Swin, ResNet, RegNet, MobileNets and EfficientNets and of timm's ConvNeXt,
// EfficientNet and ViT.
func initLayers(m nn.Module, conv, linear layerInit) {
	// nn.Apply fails only for a module tree deeper than 64, which train.Net refuses with the same
	// error.
	_ = nn.Apply(m, func(x nn.Module) {
		switch l := x.(type) {
		case *nn.Conv2dLayer:
			if conv != nil {
				l.Weight.SetDist(conv(l.Weight, max(l.Options.Groups, 1)))
			}
		case *nn.LinearLayer:
			if linear != nil {
				l.Weight.SetDist(linear(l.Weight, 1))
			}
		}
	})
}
