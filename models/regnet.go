package models

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// RegNetConfig is a RegNet's stages as torchvision's BlockParams expands them (bottleneck
// multiplier 1, stride 2 per stage): the blocks, output width and group width of each, the
// squeeze-and-excitation ratio (0: none, RegNetX; 0.25: RegNetY) and the stem's width.
type RegNetConfig struct {
	Depths, Widths, GroupWidths [4]int
	SERatio                     float64
	StemWidth                   int
}

// RegNet is torchvision.models.RegNet (Radosavovic et al., 2020): a 3×3 stride-2 stem, four
// stages of residual bottleneck blocks (1×1, grouped 3×3 with stride 2 in a stage's first block,
// squeeze-and-excitation for RegNetY, 1×1; a projection shortcut where the shape changes),
// global average pooling and a linear head. Its tensors carry torchvision's state_dict names
// (stem.0.weight, trunk_output.block1.block1-0.f.b.0.weight, ...f.se.fc1.bias, fc.weight).
type RegNet struct {
	Stem        nn.Sequential
	TrunkOutput nn.Dict
	FC          *nn.LinearLayer `nn:"fc"`
	name        string
}

// RegNetBlock is torchvision's ResBottleneckBlock: relu(proj(x) + f(x)), proj the identity when
// nil.
type RegNetBlock struct {
	gradCheckpoint
	Proj nn.Sequential
	F    nn.Dict `nn:"f"`
}

// SqueezeExcitation is torchvision.ops.SqueezeExcitation with ReLU and a sigmoid: x scaled per
// channel by sigmoid(fc2(relu(fc1(mean of x over its pixels)))), fc1 and fc2 1×1 convolutions.
type SqueezeExcitation struct {
	FC1 *nn.Conv2dLayer `nn:"fc1"`
	FC2 *nn.Conv2dLayer `nn:"fc2"`
}

// Forward scales x [N C H W] per channel.
func (s *SqueezeExcitation) Forward(x *nn.Tensor) *nn.Tensor {
	return nn.Mul(x, nn.Sigmoid(s.FC2.Forward(nn.ReLU(s.FC1.Forward(nn.GlobalAvgPool(x))))))
}

// convBN is torchvision's Conv2dNormActivation: a k×k convolution without bias ("same" padding),
// a BatchNorm and, if relu, a ReLU.
func convBN(in, out, k, stride, groups int, relu bool) nn.Sequential {
	s := nn.Sequential{nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: (k - 1) / 2, Groups: groups}, false), nn.NewBatchNorm2d(out)}
	if relu {
		s = append(s, nn.Fn(nn.ReLU))
	}
	return s
}

// NewRegNet builds a RegNet for images of c channels and the given number of classes,
// initialized as torchvision's: every convolution's weight normal with std √(2/fan_out), the
// linear head's normal with std 0.01, its bias zeros, the squeeze-and-excitation's biases as
// torch.nn.Conv2d starts them.
func NewRegNet(cfg RegNetConfig, c, classes int, name string) (*RegNet, error) {
	if cfg.StemWidth <= 0 {
		return nil, fmt.Errorf("stem_width %d: want > 0", cfg.StemWidth)
	}
	for i := range 4 {
		d, w, gw := cfg.Depths[i], cfg.Widths[i], cfg.GroupWidths[i]
		if d <= 0 || w <= 0 || gw <= 0 || w%gw != 0 {
			return nil, fmt.Errorf("stage %d: depth %d, width %d, group width %d: want each > 0 and the width a multiple of the group width", i+1, d, w, gw)
		}
	}
	win := cfg.StemWidth
	var trunk nn.Dict
	for i := range 4 {
		w, groups := cfg.Widths[i], cfg.Widths[i]/cfg.GroupWidths[i]
		var stage nn.Dict
		for j := range cfg.Depths[i] {
			stride := 1
			if j == 0 {
				stride = 2
			}
			b := &RegNetBlock{F: nn.Dict{{Name: "a", Module: convBN(win, w, 1, 1, 1, true)}, {Name: "b", Module: convBN(w, w, 3, stride, groups, true)}}}
			if cfg.SERatio > 0 {
				sq := int(math.RoundToEven(cfg.SERatio * float64(win)))
				se := &SqueezeExcitation{FC1: nn.NewConv2d(w, sq, 1, nn.ConvOptions{}, true), FC2: nn.NewConv2d(sq, w, 1, nn.ConvOptions{}, true)}
				torchDefault(se.FC1.Weight, se.FC1.Bias)
				torchDefault(se.FC2.Weight, se.FC2.Bias)
				b.F = append(b.F, nn.Entry{Name: "se", Module: se})
			}
			b.F = append(b.F, nn.Entry{Name: "c", Module: convBN(w, w, 1, 1, 1, false)})
			if win != w || stride != 1 {
				b.Proj = convBN(win, w, 1, stride, 1, false)
			}
			stage = append(stage, nn.Entry{Name: fmt.Sprintf("block%d-%d", i+1, j), Module: b})
			win = w
		}
		trunk = append(trunk, nn.Entry{Name: fmt.Sprintf("block%d", i+1), Module: stage})
	}
	m := &RegNet{
		Stem:        convBN(c, cfg.StemWidth, 3, 2, 1, true),
		TrunkOutput: trunk,
		FC:          nn.NewLinear(win, classes, true),
		name:        name,
	}
	initLayers(m, kaimingFanOut, always(nn.Normal(0.01)))
	return m, nil
}

func (m *RegNet) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *RegNet) Forward(x *nn.Tensor) *nn.Tensor {
	x = m.TrunkOutput.Forward(m.Stem.Forward(x))
	return m.FC.Forward(nn.Flatten(nn.GlobalAvgPool(x)))
}

// Forward runs the block on x [N C H W].
func (b *RegNetBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *RegNetBlock) forward(x *nn.Tensor) *nn.Tensor {
	y := b.F.Forward(x)
	if b.Proj != nil {
		x = b.Proj.Forward(x)
	}
	return nn.ReLU(nn.Add(x, y))
}

// regnetBuilder builds name from base (its named configuration; zero for regnet itself).
func regnetBuilder(name string, base RegNetConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		var args []*arg
		groupWidth := 0
		if base.StemWidth == 0 {
			cfg.StemWidth = 32
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("depth_%d", i+1), i: &cfg.Depths[i], required: true})
			}
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("width_%d", i+1), i: &cfg.Widths[i], required: true})
			}
			args = append(args, &arg{name: "group_width", i: &groupWidth, required: true}, &arg{name: "se_ratio", f: &cfg.SERatio},
				&arg{name: "stem_width", i: &cfg.StemWidth})
		}
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if base.StemWidth == 0 {
			for i, w := range cfg.Widths {
				cfg.GroupWidths[i] = min(groupWidth, w) // torchvision's adjustment
			}
		}
		name := spec(name, args)
		m, err := NewRegNet(cfg, in.C, classes, name)
		if err != nil {
			return nil, err
		}
		return &Model{Name: name, Module: m}, nil
	}
}

func init() {
	type stages = [4]int
	for _, c := range []struct {
		name string
		cfg  RegNetConfig
	}{
		{"regnet", RegNetConfig{}},
		// torchvision's BlockParams.from_init_params(depth, w_0, w_a, w_m, group_width, se_ratio),
		// expanded.
		{"regnet_y_400mf", RegNetConfig{stages{1, 3, 6, 6}, stages{48, 104, 208, 440}, stages{8, 8, 8, 8}, 0.25, 32}},
		{"regnet_y_800mf", RegNetConfig{stages{1, 3, 8, 2}, stages{64, 144, 320, 784}, stages{16, 16, 16, 16}, 0.25, 32}},
		{"regnet_y_1_6gf", RegNetConfig{stages{2, 6, 17, 2}, stages{48, 120, 336, 888}, stages{24, 24, 24, 24}, 0.25, 32}},
		{"regnet_y_3_2gf", RegNetConfig{stages{2, 5, 13, 1}, stages{72, 216, 576, 1512}, stages{24, 24, 24, 24}, 0.25, 32}},
		{"regnet_y_8gf", RegNetConfig{stages{2, 4, 10, 1}, stages{224, 448, 896, 2016}, stages{56, 56, 56, 56}, 0.25, 32}},
		{"regnet_y_16gf", RegNetConfig{stages{2, 4, 11, 1}, stages{224, 448, 1232, 3024}, stages{112, 112, 112, 112}, 0.25, 32}},
		{"regnet_y_32gf", RegNetConfig{stages{2, 5, 12, 1}, stages{232, 696, 1392, 3712}, stages{232, 232, 232, 232}, 0.25, 32}},
		{"regnet_y_128gf", RegNetConfig{stages{2, 7, 17, 1}, stages{528, 1056, 2904, 7392}, stages{264, 264, 264, 264}, 0.25, 32}},
		{"regnet_x_400mf", RegNetConfig{stages{1, 2, 7, 12}, stages{32, 64, 160, 400}, stages{16, 16, 16, 16}, 0, 32}},
		{"regnet_x_800mf", RegNetConfig{stages{1, 3, 7, 5}, stages{64, 128, 288, 672}, stages{16, 16, 16, 16}, 0, 32}},
		{"regnet_x_1_6gf", RegNetConfig{stages{2, 4, 10, 2}, stages{72, 168, 408, 912}, stages{24, 24, 24, 24}, 0, 32}},
		{"regnet_x_3_2gf", RegNetConfig{stages{2, 6, 15, 2}, stages{96, 192, 432, 1008}, stages{48, 48, 48, 48}, 0, 32}},
		{"regnet_x_8gf", RegNetConfig{stages{2, 5, 15, 1}, stages{80, 240, 720, 1920}, stages{80, 120, 120, 120}, 0, 32}},
		{"regnet_x_16gf", RegNetConfig{stages{2, 6, 13, 1}, stages{256, 512, 896, 2048}, stages{128, 128, 128, 128}, 0, 32}},
		{"regnet_x_32gf", RegNetConfig{stages{2, 7, 13, 1}, stages{336, 672, 1344, 2520}, stages{168, 168, 168, 168}, 0, 32}},
	} {
		if err := Register(c.name, regnetBuilder(c.name, c.cfg)); err != nil {
			panic(err)
		}
	}
}
