package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/nn"
)

// EfficientNet is torchvision.models.EfficientNet, V1 (Tan and Le, 2019) and V2 (Tan and Le,
// 2021): a strided stem, stages of MBConv blocks (V2's first stages FusedMBConv), a 1×1
// convolution, global average pooling, dropout and a linear head, SiLU throughout. Its tensors
// carry torchvision's state_dict names ("features.1.0.block.0.0.weight").
type EfficientNet struct {
	Features, Classifier nn.Sequential
	name                 string
}

// MBConv is torchvision's MBConv (a 1×1 expansion, a depthwise convolution, squeeze-and-excitation
// with a sigmoid gate, a linear 1×1 projection) or FusedMBConv (one k×k convolution for expansion
// and depthwise, then the projection): Block, plus its input through stochastic depth when the
// block keeps the shape.
type MBConv struct {
	gradCheckpoint
	Block    nn.Sequential
	residual bool
	dropPath float32
}

// Forward runs the block on x [N C H W].
func (b *MBConv) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *MBConv) forward(x *nn.Tensor) *nn.Tensor {
	y := b.Block.Forward(x)
	if b.residual {
		return nn.Add(nn.DropPath(y, b.dropPath), x)
	}
	return y
}

// mbStage is a row of torchvision's EfficientNet configurations: _MBConvConfig's expand_ratio,
// kernel, stride, input and output channels, layers, and FusedMBConv rather than MBConv.
type mbStage struct {
	expand          float64
	kernel, stride  int
	in, out, layers int
	fused           bool
}

// efficientNets are torchvision's named EfficientNets: width and depth multipliers of V1's
// stages (V2's are their own), the head's dropout, the BatchNorm eps and momentum, and the last
// convolution's channels (0: 4 times the last stage's).
var efficientNets = map[string]struct {
	v2                     bool
	width, depth           float64
	dropout, eps, momentum float32
	last                   int
}{
	"efficientnet_b0":   {false, 1.0, 1.0, 0.2, 1e-5, 0.1, 0},
	"efficientnet_b1":   {false, 1.0, 1.1, 0.2, 1e-5, 0.1, 0},
	"efficientnet_b2":   {false, 1.1, 1.2, 0.3, 1e-5, 0.1, 0},
	"efficientnet_b3":   {false, 1.2, 1.4, 0.3, 1e-5, 0.1, 0},
	"efficientnet_b4":   {false, 1.4, 1.8, 0.4, 1e-5, 0.1, 0},
	"efficientnet_b5":   {false, 1.6, 2.2, 0.4, 1e-3, 0.01, 0},
	"efficientnet_b6":   {false, 1.8, 2.6, 0.5, 1e-3, 0.01, 0},
	"efficientnet_b7":   {false, 2.0, 3.1, 0.5, 1e-3, 0.01, 0},
	"efficientnet_v2_s": {true, 1, 1, 0.2, 1e-3, 0.1, 1280},
	"efficientnet_v2_m": {true, 1, 1, 0.3, 1e-3, 0.1, 1280},
	"efficientnet_v2_l": {true, 1, 1, 0.4, 1e-3, 0.1, 1280},
}

// efficientNetStages are the stages of V1 (before the multipliers) and of each V2.
var efficientNetStages = map[string][]mbStage{
	"v1": {{1, 3, 1, 32, 16, 1, false}, {6, 3, 2, 16, 24, 2, false}, {6, 5, 2, 24, 40, 2, false}, {6, 3, 2, 40, 80, 3, false},
		{6, 5, 1, 80, 112, 3, false}, {6, 5, 2, 112, 192, 4, false}, {6, 3, 1, 192, 320, 1, false}},
	"efficientnet_v2_s": {{1, 3, 1, 24, 24, 2, true}, {4, 3, 2, 24, 48, 4, true}, {4, 3, 2, 48, 64, 4, true},
		{4, 3, 2, 64, 128, 6, false}, {6, 3, 1, 128, 160, 9, false}, {6, 3, 2, 160, 256, 15, false}},
	"efficientnet_v2_m": {{1, 3, 1, 24, 24, 3, true}, {4, 3, 2, 24, 48, 5, true}, {4, 3, 2, 48, 80, 5, true},
		{4, 3, 2, 80, 160, 7, false}, {6, 3, 1, 160, 176, 14, false}, {6, 3, 2, 176, 304, 18, false}, {6, 3, 1, 304, 512, 5, false}},
	"efficientnet_v2_l": {{1, 3, 1, 32, 32, 4, true}, {4, 3, 2, 32, 64, 7, true}, {4, 3, 2, 64, 96, 7, true},
		{4, 3, 2, 96, 192, 10, false}, {6, 3, 1, 192, 224, 19, false}, {6, 3, 2, 224, 384, 25, false}, {6, 3, 1, 384, 640, 7, false}},
}

// NewEfficientNet builds torchvision's efficientnet_b0 to _b7 or efficientnet_v2_s, _m or _l
// (arch) for images of c channels, with stochastic depth rising linearly over the blocks to
// stochasticDepth. It starts as torchvision's: every convolution's weight kaiming_normal_
// (fan_out), the linear head's uniform within ±1/√classes, zero biases, the BatchNorms ones and
// zeros.
func NewEfficientNet(arch string, stochasticDepth float64, c, classes int) (*EfficientNet, error) {
	conf, ok := efficientNets[arch]
	if !ok {
		return nil, fmt.Errorf("efficientnet %q: want efficientnet_b0 to _b7 or efficientnet_v2_s, _m or _l", arch)
	}
	stages := efficientNetStages[arch]
	if !conf.v2 {
		stages = efficientNetV1(conf.width, conf.depth)
	}
	return newEfficientNet(arch, stages, conf.last, conf.dropout, stochasticDepth, conf.eps, conf.momentum, c, classes), nil
}

// NewEfficientNetV1 builds the EfficientNet V1 of width and depth multipliers widthMult and
// depthMult, as torchvision's EfficientNet(_efficientnet_conf("efficientnet_b0", width_mult,
// depth_mult)[0], dropout, stochastic_depth_prob) builds it (BatchNorm eps 1e-5, momentum 0.1, as
// efficientnet_b0 to _b4): efficientnet_b0 is widthMult 1, depthMult 1, dropout 0.2, and a
// fraction of each (0.25, 0.25) a model for small images and datasets.
func NewEfficientNetV1(widthMult, depthMult float64, dropout float32, stochasticDepth float64, c, classes int) (*EfficientNet, error) {
	if !(widthMult > 0) || !(depthMult > 0) {
		return nil, fmt.Errorf("efficientnet: width_mult %g and depth_mult %g: want both above 0", widthMult, depthMult)
	}
	return newEfficientNet("efficientnet", efficientNetV1(widthMult, depthMult), 0, dropout, stochasticDepth, 1e-5, 0.1, c, classes), nil
}

// efficientNetV1 is V1's stages under MBConvConfig's adjust_channels and adjust_depth.
func efficientNetV1(width, depth float64) []mbStage {
	stages := slices.Clone(efficientNetStages["v1"])
	for i, s := range stages {
		s.in, s.out = mbDivisible(float64(s.in)*width, 8, 0), mbDivisible(float64(s.out)*width, 8, 0)
		s.layers = int(math.Ceil(float64(s.layers) * depth))
		stages[i] = s
	}
	return stages
}

// newEfficientNet builds torchvision's EfficientNet over stages: last is the last convolution's
// channels (0: 4 times the last stage's), eps and momentum its BatchNorms'.
func newEfficientNet(name string, stages []mbStage, last int, dropout float32, stochasticDepth float64, eps, momentum float32,
	c, classes int) *EfficientNet {
	bn := func(c int) *nn.BatchNorm2dLayer { return mbNorm(c, eps, momentum) }
	m := &EfficientNet{name: name, Features: nn.Sequential{mbConvNormAct(c, stages[0].in, 3, 2, 1, bn, nn.SiLU)}}
	total := 0
	for _, s := range stages {
		total += s.layers
	}
	id := 0
	for _, s := range stages {
		var stage nn.Sequential
		for i := range s.layers {
			in, stride := s.in, s.stride
			if i > 0 {
				in, stride = s.out, 1
			}
			exp := mbDivisible(float64(in)*s.expand, 8, 0)
			var block nn.Sequential
			switch {
			case s.fused && exp != in:
				block = nn.Sequential{mbConvNormAct(in, exp, s.kernel, stride, 1, bn, nn.SiLU), mbConvNormAct(exp, s.out, 1, 1, 1, bn, nil)}
			case s.fused:
				block = nn.Sequential{mbConvNormAct(in, s.out, s.kernel, stride, 1, bn, nn.SiLU)}
			default:
				if exp != in {
					block = append(block, mbConvNormAct(in, exp, 1, 1, 1, bn, nn.SiLU))
				}
				block = append(block, mbConvNormAct(exp, exp, s.kernel, stride, exp, bn, nn.SiLU),
					newSqueezeExcitation(exp, max(1, in/4), nn.SiLU, nn.Sigmoid), mbConvNormAct(exp, s.out, 1, 1, 1, bn, nil))
			}
			stage = append(stage, &MBConv{Block: block, residual: stride == 1 && in == s.out,
				dropPath: float32(stochasticDepth * float64(id) / float64(total))})
			id++
		}
		m.Features = append(m.Features, stage)
	}
	lastIn := stages[len(stages)-1].out
	if last == 0 {
		last = 4 * lastIn
	}
	m.Features = append(m.Features, mbConvNormAct(lastIn, last, 1, 1, 1, bn, nn.SiLU))
	m.Classifier = nn.Sequential{nn.DropoutLayer{P: dropout}, nn.NewLinear(last, classes, true)}
	initLayers(m, kaimingFanOut, uniformOut)
	return m
}

func (m *EfficientNet) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *EfficientNet) Forward(x *nn.Tensor) *nn.Tensor {
	return m.Classifier.Forward(nn.Flatten(nn.GlobalAvgPool(m.Features.Forward(x))))
}

func init() {
	for name := range efficientNets {
		err := Register(name, func(s string, in Shape, classes int) (*Model, error) {
			sd := 0.2
			args := []*arg{{name: "stochastic_depth_prob", f: &sd}}
			if err := parseArgs(s, args); err != nil {
				return nil, err
			}
			m, err := NewEfficientNet(name, sd, in.C, classes)
			if err != nil {
				return nil, err
			}
			return &Model{Name: spec(name, args), Module: m}, nil
		})
		if err != nil {
			panic(err)
		}
	}
	err := Register("efficientnet", func(s string, in Shape, classes int) (*Model, error) {
		width, depth, dropout, sd := 1.0, 1.0, 0.2, 0.2
		args := []*arg{{name: "width_mult", f: &width, hi: 4}, {name: "depth_mult", f: &depth, hi: 4},
			{name: "dropout", f: &dropout}, {name: "stochastic_depth_prob", f: &sd}}
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		m, err := NewEfficientNetV1(width, depth, float32(dropout), sd, in.C, classes)
		if err != nil {
			return nil, err
		}
		return &Model{Name: spec("efficientnet", args), Module: m}, nil
	})
	if err != nil {
		panic(err)
	}
}
