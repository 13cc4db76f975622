// Package layers holds layers written as forward passes over package nn's ops, with no backward
// code: a channels-first layer norm (ConvNeXt's LayerNorm2d) and a squeeze-and-excitation block
// (SENet's), and a small model of them, se-net. Importing it registers the layers
// (train.RegisterLayer) and the model (train.RegisterModel), so that a program that imports it
// rebuilds their checkpoints, and a stoke built with it (../cmd/stoke) trains, predicts and
// exports them:
//
//	package main
//
//	import (
//		_ "example.com/stoke-external/layers"
//		"github.com/stoke-ml/stoke/cli"
//	)
//
//	func main() { cli.Main() }
package layers

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/train"
)

// LayerNorm2d normalizes each pixel's channel vector of x [N C H W] with its mean and biased
// variance, then scales and shifts per channel.
type LayerNorm2d struct {
	Weight, Bias *nn.Tensor
	C            int
}

func NewLayerNorm2d(c int) *LayerNorm2d {
	return &LayerNorm2d{Weight: nn.Param([]int{c}, nn.Ones), Bias: nn.Param([]int{c}, nn.Zeros), C: c}
}

func (l *LayerNorm2d) String() string { return fmt.Sprintf("layernorm2d %d", l.C) }

func (l *LayerNorm2d) Forward(x *nn.Tensor) *nn.Tensor {
	mean := nn.Mean(x, []int{1}, true)
	xc := nn.Sub(x, mean)
	rstd := nn.Rsqrt(nn.AddScalar(nn.Mean(nn.Mul(xc, xc), []int{1}, true), 1e-6))
	return nn.Add(nn.Mul(nn.Mul(xc, rstd), l.Weight.Reshape(l.C, 1, 1)), l.Bias.Reshape(l.C, 1, 1))
}

// SqueezeExcite gates each channel of x [N C H W] by a sigmoid of two linear layers over the
// channels' means: the gate is computed from the same input it multiplies.
type SqueezeExcite struct {
	FC1, FC2 *nn.LinearLayer
	C, R     int `nn:"-"`
}

func NewSqueezeExcite(c, r int) *SqueezeExcite {
	return &SqueezeExcite{FC1: nn.NewLinear(c, c/r, true), FC2: nn.NewLinear(c/r, c, true), C: c, R: r}
}

func (m *SqueezeExcite) String() string { return fmt.Sprintf("squeezeexcite %d/%d", m.C, m.R) }

func (m *SqueezeExcite) Forward(x *nn.Tensor) *nn.Tensor {
	n := x.Dim(0)
	s := nn.Mean(x, []int{2, 3}, false) // [N C]
	s = nn.Sigmoid(m.FC2.Forward(nn.ReLU(m.FC1.Forward(s))))
	return nn.Mul(x, s.Reshape(n, m.C, 1, 1))
}

// SENet builds se-net for images of shape in: conv - LayerNorm2d - ReLU - SqueezeExcite - pool -
// linear. It takes no arguments (stoke train --model se-net).
func SENet(args string, in train.Shape, classes int) (*train.Model, error) {
	if args != "" {
		return nil, fmt.Errorf("se-net takes no arguments, not %q", args)
	}
	return train.Sequential("se-net", in, classes, train.Conv2D(in.C, 16, 3, 1), train.Custom(train.NN(NewLayerNorm2d(16))), train.ReLU(),
		train.Custom(train.NN(NewSqueezeExcite(16, 4))), train.GlobalAvgPool(), train.Flatten(), train.Linear(16, classes))
}

func init() {
	err := train.RegisterLayer("layernorm2d", func(desc string) (train.Module, error) {
		var c int
		if _, err := fmt.Sscanf(desc, "layernorm2d %d", &c); err != nil {
			return nil, err
		}
		return train.NN(NewLayerNorm2d(c)), nil
	})
	if err == nil {
		err = train.RegisterLayer("squeezeexcite", func(desc string) (train.Module, error) {
			var c, r int
			if _, err := fmt.Sscanf(desc, "squeezeexcite %d/%d", &c, &r); err != nil {
				return nil, err
			}
			return train.NN(NewSqueezeExcite(c, r)), nil
		})
	}
	if err == nil {
		err = train.RegisterModel("se-net", SENet)
	}
	if err != nil {
		panic(err) // a name taken twice: a programming error, found at start
	}
}
