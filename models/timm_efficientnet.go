package models

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// TimmEfficientNet is timm.models.EfficientNet as timm's efficientnet_b0 to _b3 build it:
// torchvision's EfficientNet V1 (the same stages, channel and depth scaling, squeeze-and-
// excitation, stochastic depth and SiLU) under timm's state_dict names (conv_stem, bn1,
// blocks.N.M.conv_pw/bn1/conv_dw/bn2/se.conv_reduce/se.conv_expand/conv_pwl/bn3, conv_head, bn2,
// classifier).
type TimmEfficientNet struct {
	ConvStem   *nn.Conv2dLayer
	BN1        *nn.BatchNorm2dLayer
	Blocks     nn.Sequential // of stages, each an nn.Sequential of blocks
	ConvHead   *nn.Conv2dLayer
	BN2        *nn.BatchNorm2dLayer
	Classifier *nn.LinearLayer
	drop       float32
	name       string
}

// TimmDepthwiseSeparable is timm's DepthwiseSeparableConv, the first stage's block (expansion
// ratio 1): conv_dw, bn1 and SiLU, squeeze-and-excitation, conv_pw and bn2, plus the input
// through stochastic depth when the block keeps the shape.
type TimmDepthwiseSeparable struct {
	gradCheckpoint
	ConvDW   *nn.Conv2dLayer
	BN1      *nn.BatchNorm2dLayer
	SE       *TimmSqueezeExcite
	ConvPW   *nn.Conv2dLayer
	BN2      *nn.BatchNorm2dLayer
	residual bool
	dropPath float32
}

// TimmInvertedResidual is timm's InvertedResidual (MBConv): conv_pw, bn1 and SiLU (expansion),
// conv_dw, bn2 and SiLU, squeeze-and-excitation, conv_pwl and bn3 (projection), plus the input
// through stochastic depth when the block keeps the shape.
type TimmInvertedResidual struct {
	gradCheckpoint
	ConvPW   *nn.Conv2dLayer
	BN1      *nn.BatchNorm2dLayer
	ConvDW   *nn.Conv2dLayer
	BN2      *nn.BatchNorm2dLayer
	SE       *TimmSqueezeExcite
	ConvPWL  *nn.Conv2dLayer
	BN3      *nn.BatchNorm2dLayer
	residual bool
	dropPath float32
}

// TimmSqueezeExcite is timm's SqueezeExcite: torchvision's squeeze-and-excitation (SiLU, a
// sigmoid gate), whose code it shares, under the names conv_reduce and conv_expand.
type TimmSqueezeExcite struct {
	ConvReduce, ConvExpand *nn.Conv2dLayer
	se                     *mbSqueezeExcitation // over ConvReduce's and ConvExpand's tensors
}

func newTimmSqueezeExcite(c, squeeze int) *TimmSqueezeExcite {
	s := newSqueezeExcitation(c, squeeze, nn.SiLU, nn.Sigmoid)
	return &TimmSqueezeExcite{ConvReduce: s.FC1, ConvExpand: s.FC2, se: s}
}

// NewTimmEfficientNet builds timm's efficientnet_b0 to _b3 (arch) for images of c channels, with
// dropRate the head's dropout and stochastic depth rising linearly over the blocks from 0 to
// dropPathRate (block i of n: dropPathRate·i/n, as timm and torchvision both do). It starts as
// timm's (_init_weight_goog): every convolution's weight normal with std √(2/fan_out), fan_out
// divided by the groups, the classifier's uniform within ±1/√classes, zero biases, the
// BatchNorms ones and zeros.
func NewTimmEfficientNet(arch string, dropRate, dropPathRate float64, c, classes int, name string) (*TimmEfficientNet, error) {
	conf, ok := efficientNets[arch]
	if !ok || conf.v2 {
		return nil, fmt.Errorf("efficientnet %q: want efficientnet_b0 to _b7", arch)
	}
	// timm's round_channels and ceil depth scaling are torchvision's adjust_channels and adjust_depth.
	stages := make([]mbStage, len(efficientNetStages["v1"]))
	total := 0
	for i, s := range efficientNetStages["v1"] {
		s.in, s.out = mbDivisible(float64(s.in)*conf.width, 8, 0), mbDivisible(float64(s.out)*conf.width, 8, 0)
		s.layers = int(math.Ceil(float64(s.layers) * conf.depth))
		stages[i] = s
		total += s.layers
	}
	bn := func(c int) *nn.BatchNorm2dLayer { return mbNorm(c, conf.eps, conf.momentum) }
	conv := func(in, out, k, stride, groups int) *nn.Conv2dLayer {
		return nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: (k - 1) / 2, Groups: groups}, false)
	}
	stem, last := stages[0].in, mbDivisible(1280*conf.width, 8, 0) // round_chs_fn(32), round_chs_fn(1280)
	m := &TimmEfficientNet{
		ConvStem: conv(c, stem, 3, 2, 1), BN1: bn(stem),
		ConvHead: conv(stages[len(stages)-1].out, last, 1, 1, 1), BN2: bn(last),
		Classifier: nn.NewLinear(last, classes, true), drop: float32(dropRate), name: name,
	}
	id := 0
	for _, s := range stages {
		var stage nn.Sequential
		for i := range s.layers {
			in, stride := s.in, s.stride
			if i > 0 {
				in, stride = s.out, 1
			}
			residual, dp := stride == 1 && in == s.out, float32(dropPathRate*float64(id)/float64(total))
			se := newTimmSqueezeExcite(mbDivisible(float64(in)*s.expand, 8, 0), max(1, in/4))
			if s.expand == 1 {
				stage = append(stage, &TimmDepthwiseSeparable{ConvDW: conv(in, in, s.kernel, stride, in), BN1: bn(in), SE: se,
					ConvPW: conv(in, s.out, 1, 1, 1), BN2: bn(s.out), residual: residual, dropPath: dp})
			} else {
				exp := mbDivisible(float64(in)*s.expand, 8, 0)
				stage = append(stage, &TimmInvertedResidual{ConvPW: conv(in, exp, 1, 1, 1), BN1: bn(exp),
					ConvDW: conv(exp, exp, s.kernel, stride, exp), BN2: bn(exp), SE: se,
					ConvPWL: conv(exp, s.out, 1, 1, 1), BN3: bn(s.out), residual: residual, dropPath: dp})
			}
			id++
		}
		m.Blocks = append(m.Blocks, stage)
	}
	initLayers(m, func(w *nn.Tensor, groups int) nn.Dist {
		_, out := fans(w)
		return nn.Normal(math.Sqrt(2 / float64(int(out)/groups)))
	}, uniformOut)
	return m, nil
}

func (m *TimmEfficientNet) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *TimmEfficientNet) Forward(x *nn.Tensor) *nn.Tensor {
	x = m.Blocks.Forward(nn.SiLU(m.BN1.Forward(m.ConvStem.Forward(x))))
	x = nn.Flatten(nn.GlobalAvgPool(nn.SiLU(m.BN2.Forward(m.ConvHead.Forward(x)))))
	return m.Classifier.Forward(nn.Dropout(x, m.drop))
}

// Forward runs the block on x [N C H W].
func (b *TimmDepthwiseSeparable) Forward(x *nn.Tensor) *nn.Tensor {
	return b.checkpointed(b, x)
}

// forward is the block's pass.
func (b *TimmDepthwiseSeparable) forward(x *nn.Tensor) *nn.Tensor {
	y := b.SE.Forward(nn.SiLU(b.BN1.Forward(b.ConvDW.Forward(x))))
	return timmResidual(b.BN2.Forward(b.ConvPW.Forward(y)), x, b.residual, b.dropPath)
}

// Forward runs the block on x [N C H W].
func (b *TimmInvertedResidual) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *TimmInvertedResidual) forward(x *nn.Tensor) *nn.Tensor {
	y := nn.SiLU(b.BN1.Forward(b.ConvPW.Forward(x)))
	y = b.SE.Forward(nn.SiLU(b.BN2.Forward(b.ConvDW.Forward(y))))
	return timmResidual(b.BN3.Forward(b.ConvPWL.Forward(y)), x, b.residual, b.dropPath)
}

// timmResidual is y, plus x with y through stochastic depth when the block keeps the shape.
func timmResidual(y, x *nn.Tensor, residual bool, dropPath float32) *nn.Tensor {
	if !residual {
		return y
	}
	return nn.Add(nn.DropPath(y, dropPath), x)
}

// Forward scales x [N C H W] per channel by its gate.
func (s *TimmSqueezeExcite) Forward(x *nn.Tensor) *nn.Tensor { return s.se.Forward(x) }

func init() {
	for _, arch := range []string{"efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3"} {
		err := Register(timmPrefix+arch, func(s string, in Shape, classes int) (*Model, error) {
			var drop, dropPath float64
			args := []*arg{{name: "drop_rate", f: &drop}, {name: "drop_path_rate", f: &dropPath}}
			if err := parseArgs(s, args); err != nil {
				return nil, err
			}
			name := spec(timmPrefix+arch, args)
			m, err := NewTimmEfficientNet(arch, drop, dropPath, in.C, classes, name)
			if err != nil {
				return nil, err
			}
			return &Model{Name: name, Module: m}, nil
		})
		if err != nil {
			panic(err)
		}
	}
}
