package models

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// MobileNetV2 is torchvision.models.MobileNetV2 (Sandler et al., 2018): a strided stem, inverted
// residual blocks (a 1×1 expansion, a depthwise 3×3 convolution, a linear 1×1 projection, ReLU6
// between), a 1×1 convolution to the last channels, global average pooling, dropout and a linear
// head. Its tensors carry torchvision's state_dict names ("features.1.conv.0.0.weight").
type MobileNetV2 struct {
	Features, Classifier nn.Sequential
}

// MobileNetV2Block is torchvision's mobilenetv2.InvertedResidual: Conv, plus its input when the
// block keeps the shape.
type MobileNetV2Block struct {
	gradCheckpoint
	Conv     nn.Sequential
	residual bool
}

// MobileNetV3 is torchvision.models.MobileNetV3 (Howard et al., 2019): MobileNetV2's inverted
// residuals with 3×3 or 5×5 depthwise kernels, ReLU or Hardswish, and squeeze-and-excitation with
// a Hardsigmoid gate in some blocks; the head is linear, Hardswish, dropout, linear.
type MobileNetV3 struct {
	Features, Classifier nn.Sequential
	name                 string
}

// MobileNetV3Block is torchvision's mobilenetv3.InvertedResidual: Block, plus its input when the
// block keeps the shape.
type MobileNetV3Block struct {
	gradCheckpoint
	Block    nn.Sequential
	residual bool
}

// mbSqueezeExcitation is torchvision.ops.SqueezeExcitation: x scaled per channel by
// gate(fc2(act(fc1(mean of x over H and W)))), fc1 and fc2 1×1 convolutions with biases.
type mbSqueezeExcitation struct {
	FC1, FC2  *nn.Conv2dLayer
	act, gate func(*nn.Tensor) *nn.Tensor
}

func (s *mbSqueezeExcitation) Forward(x *nn.Tensor) *nn.Tensor {
	scale := s.gate(s.FC2.Forward(s.act(s.FC1.Forward(nn.GlobalAvgPool(x)))))
	return nn.Mul(x, scale)
}

func newSqueezeExcitation(c, squeeze int, act, gate func(*nn.Tensor) *nn.Tensor) *mbSqueezeExcitation {
	return &mbSqueezeExcitation{FC1: nn.NewConv2d(c, squeeze, 1, nn.ConvOptions{}, true),
		FC2: nn.NewConv2d(squeeze, c, 1, nn.ConvOptions{}, true), act: act, gate: gate}
}

// mbNorm is a BatchNorm2d with the given eps and momentum.
func mbNorm(c int, eps, momentum float32) *nn.BatchNorm2dLayer {
	b := nn.NewBatchNorm2d(c)
	b.Eps, b.Momentum = eps, momentum
	return b
}

// mbConvNormAct is torchvision.ops.Conv2dNormActivation with BatchNorm: a k×k convolution
// without bias ("same" padding), the norm and the activation (none when act is nil).
func mbConvNormAct(in, out, k, stride, groups int, bn func(int) *nn.BatchNorm2dLayer, act func(*nn.Tensor) *nn.Tensor) nn.Sequential {
	s := nn.Sequential{nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: (k - 1) / 2, Groups: groups}, false), bn(out)}
	if act != nil {
		s = append(s, nn.Fn(act))
	}
	return s
}

// mbDivisible is torchvision's _make_divisible: v rounded to the nearest multiple of divisor, at
// least minValue (divisor when 0), and not below 90% of v.
func mbDivisible(v float64, divisor, minValue int) int {
	if minValue == 0 {
		minValue = divisor
	}
	n := max(minValue, int(v+float64(divisor)/2)/divisor*divisor)
	if float64(n) < 0.9*v {
		n += divisor
	}
	return n
}

// NewMobileNetV2 builds torchvision's mobilenet_v2 for images of c channels: the channels scaled
// by widthMult and rounded to multiples of roundNearest, dropout before the head. It starts as
// torchvision's: every convolution's weight kaiming_normal_ (fan_out), the linear layers' normal
// with std 0.01, zero biases, the BatchNorms ones and zeros.
func NewMobileNetV2(widthMult float64, roundNearest int, dropout float32, c, classes int) (*MobileNetV2, error) {
	if !(widthMult > 0) || roundNearest < 1 {
		return nil, fmt.Errorf("width_mult %g and round_nearest %d: want both > 0", widthMult, roundNearest)
	}
	bn := func(c int) *nn.BatchNorm2dLayer { return mbNorm(c, 1e-5, 0.1) }
	in := mbDivisible(32*widthMult, roundNearest, 0)
	last := mbDivisible(1280*max(1, widthMult), roundNearest, 0)
	m := &MobileNetV2{Features: nn.Sequential{mbConvNormAct(c, in, 3, 2, 1, bn, nn.ReLU6)}}
	for _, s := range [][4]int{{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}} {
		t, out := s[0], mbDivisible(float64(s[1])*widthMult, roundNearest, 0)
		for i := range s[2] {
			stride := 1
			if i == 0 {
				stride = s[3]
			}
			hidden := in * t
			var conv nn.Sequential
			if t != 1 {
				conv = append(conv, mbConvNormAct(in, hidden, 1, 1, 1, bn, nn.ReLU6))
			}
			conv = append(conv, mbConvNormAct(hidden, hidden, 3, stride, hidden, bn, nn.ReLU6),
				nn.NewConv2d(hidden, out, 1, nn.ConvOptions{}, false), bn(out))
			m.Features = append(m.Features, &MobileNetV2Block{Conv: conv, residual: stride == 1 && in == out})
			in = out
		}
	}
	m.Features = append(m.Features, mbConvNormAct(in, last, 1, 1, 1, bn, nn.ReLU6))
	m.Classifier = nn.Sequential{nn.DropoutLayer{P: dropout}, nn.NewLinear(last, classes, true)}
	initLayers(m, kaimingFanOut, always(nn.Normal(0.01)))
	return m, nil
}

func (m *MobileNetV2) String() string { return "mobilenet_v2" }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *MobileNetV2) Forward(x *nn.Tensor) *nn.Tensor {
	return m.Classifier.Forward(nn.Flatten(nn.GlobalAvgPool(m.Features.Forward(x))))
}

// Forward runs the block on x [N C H W].
func (b *MobileNetV2Block) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *MobileNetV2Block) forward(x *nn.Tensor) *nn.Tensor {
	if b.residual {
		return nn.Add(x, b.Conv.Forward(x))
	}
	return b.Conv.Forward(x)
}

// mobileNetV3Blocks are torchvision's bneck_conf rows (input, kernel, expanded, out, SE,
// Hardswish, stride) of mobilenet_v3_large and mobilenet_v3_small, and their last channels.
var mobileNetV3Blocks = map[string]struct {
	rows [][7]int
	last int
}{
	"mobilenet_v3_large": {[][7]int{
		{16, 3, 16, 16, 0, 0, 1}, {16, 3, 64, 24, 0, 0, 2}, {24, 3, 72, 24, 0, 0, 1},
		{24, 5, 72, 40, 1, 0, 2}, {40, 5, 120, 40, 1, 0, 1}, {40, 5, 120, 40, 1, 0, 1},
		{40, 3, 240, 80, 0, 1, 2}, {80, 3, 200, 80, 0, 1, 1}, {80, 3, 184, 80, 0, 1, 1}, {80, 3, 184, 80, 0, 1, 1},
		{80, 3, 480, 112, 1, 1, 1}, {112, 3, 672, 112, 1, 1, 1},
		{112, 5, 672, 160, 1, 1, 2}, {160, 5, 960, 160, 1, 1, 1}, {160, 5, 960, 160, 1, 1, 1},
	}, 1280},
	"mobilenet_v3_small": {[][7]int{
		{16, 3, 16, 16, 1, 0, 2}, {16, 3, 72, 24, 0, 0, 2}, {24, 3, 88, 24, 0, 0, 1},
		{24, 5, 96, 40, 1, 1, 2}, {40, 5, 240, 40, 1, 1, 1}, {40, 5, 240, 40, 1, 1, 1},
		{40, 5, 120, 48, 1, 1, 1}, {48, 5, 144, 48, 1, 1, 1},
		{48, 5, 288, 96, 1, 1, 2}, {96, 5, 576, 96, 1, 1, 1}, {96, 5, 576, 96, 1, 1, 1},
	}, 1024},
}

// NewMobileNetV3 builds torchvision's mobilenet_v3_large or mobilenet_v3_small (arch) for images
// of c channels: the channels scaled by widthMult, those of the last three blocks and the head
// halved when reducedTail is set (torchvision's reduced_tail), dropout in the head. It starts as
// NewMobileNetV2's model does.
func NewMobileNetV3(arch string, widthMult float64, reducedTail bool, dropout float32, c, classes int) (*MobileNetV3, error) {
	conf, ok := mobileNetV3Blocks[arch]
	if !ok {
		return nil, fmt.Errorf("mobilenet v3 %q: want mobilenet_v3_large or mobilenet_v3_small", arch)
	}
	if !(widthMult > 0) {
		return nil, fmt.Errorf("width_mult %g: want > 0", widthMult)
	}
	adjust := func(ch int) int { return mbDivisible(float64(ch)*widthMult, 8, 0) }
	bn := func(c int) *nn.BatchNorm2dLayer { return mbNorm(c, 1e-3, 0.01) }
	div := 1
	if reducedTail {
		div = 2
	}
	m := &MobileNetV3{name: arch, Features: nn.Sequential{mbConvNormAct(c, adjust(conf.rows[0][0]), 3, 2, 1, bn, nn.Hardswish)}}
	tail := len(conf.rows) - 3
	for i, r := range conf.rows {
		if i >= tail {
			r[3] /= div
		}
		if i > tail {
			r[0], r[2] = r[0]/div, r[2]/div
		}
		in, k, exp, out, stride := adjust(r[0]), r[1], adjust(r[2]), adjust(r[3]), r[6]
		act := nn.ReLU
		if r[5] == 1 {
			act = nn.Hardswish
		}
		var block nn.Sequential
		if exp != in {
			block = append(block, mbConvNormAct(in, exp, 1, 1, 1, bn, act))
		}
		block = append(block, mbConvNormAct(exp, exp, k, stride, exp, bn, act))
		if r[4] == 1 {
			block = append(block, newSqueezeExcitation(exp, mbDivisible(float64(exp/4), 8, 0), nn.ReLU, nn.Hardsigmoid))
		}
		block = append(block, mbConvNormAct(exp, out, 1, 1, 1, bn, nil))
		m.Features = append(m.Features, &MobileNetV3Block{Block: block, residual: stride == 1 && in == out})
	}
	lastIn := adjust(conf.rows[len(conf.rows)-1][3] / div)
	last := adjust(conf.last / div)
	m.Features = append(m.Features, mbConvNormAct(lastIn, 6*lastIn, 1, 1, 1, bn, nn.Hardswish))
	m.Classifier = nn.Sequential{nn.NewLinear(6*lastIn, last, true), nn.Fn(nn.Hardswish),
		nn.DropoutLayer{P: dropout}, nn.NewLinear(last, classes, true)}
	initLayers(m, kaimingFanOut, always(nn.Normal(0.01)))
	return m, nil
}

func (m *MobileNetV3) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *MobileNetV3) Forward(x *nn.Tensor) *nn.Tensor {
	return m.Classifier.Forward(nn.Flatten(nn.GlobalAvgPool(m.Features.Forward(x))))
}

// Forward runs the block on x [N C H W].
func (b *MobileNetV3Block) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *MobileNetV3Block) forward(x *nn.Tensor) *nn.Tensor {
	if b.residual {
		return nn.Add(b.Block.Forward(x), x)
	}
	return b.Block.Forward(x)
}

func init() {
	register := func(name string, build Builder) {
		if err := Register(name, build); err != nil {
			panic(err)
		}
	}
	register("mobilenet_v2", func(s string, in Shape, classes int) (*Model, error) {
		width, round, dropout := 1.0, 8, 0.2
		args := []*arg{{name: "width_mult", f: &width, hi: 4}, {name: "round_nearest", i: &round}, {name: "dropout", f: &dropout}}
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		m, err := NewMobileNetV2(width, round, float32(dropout), in.C, classes)
		if err != nil {
			return nil, err
		}
		return &Model{Name: spec("mobilenet_v2", args), Module: m}, nil
	})
	for _, name := range []string{"mobilenet_v3_large", "mobilenet_v3_small"} {
		register(name, func(s string, in Shape, classes int) (*Model, error) {
			width, reduced, dropout := 1.0, 0, 0.2
			args := []*arg{{name: "width_mult", f: &width, hi: 4}, {name: "reduced_tail", i: &reduced}, {name: "dropout", f: &dropout}}
			if err := parseArgs(s, args); err != nil {
				return nil, err
			}
			if reduced > 1 {
				return nil, fmt.Errorf("argument reduced_tail=%d: want 0 or 1 (False or True)", reduced)
			}
			m, err := NewMobileNetV3(name, width, reduced == 1, float32(dropout), in.C, classes)
			if err != nil {
				return nil, err
			}
			return &Model{Name: spec(name, args), Module: m}, nil
		})
	}
}
