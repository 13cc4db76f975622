package models

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// ResNetConfig is torchvision's ResNet's arguments: the blocks of each of the four stages, basic
// or bottleneck blocks, and the grouped 3×3 convolution of a bottleneck (ResNeXt's groups, and
// width_per_group: 64 is ResNet's, 128 Wide ResNet's).
type ResNetConfig struct {
	Layers                [4]int
	Bottleneck            bool
	Groups, WidthPerGroup int
}

// ResNet is torchvision.models.ResNet (He et al., 2016; ResNeXt, Xie et al., 2017; Wide ResNet,
// Zagoruyko and Komodakis, 2016): a 7×7 stride-2 stem and a 3×3 stride-2 max pooling, four
// stages of residual blocks of 64 to 512 planes (stride 2 on the first 3×3 convolution of the
// last three), global average pooling and a linear head. Its tensors carry torchvision's
// state_dict names (layer1.0.conv1.weight, layer2.0.downsample.1.running_var, fc.bias).
type ResNet struct {
	Conv1                          *nn.Conv2dLayer
	BN1                            *nn.BatchNorm2dLayer `nn:"bn1"`
	Layer1, Layer2, Layer3, Layer4 nn.Sequential
	FC                             *nn.LinearLayer `nn:"fc"`
	name                           string
}

// ResBlock is torchvision's BasicBlock (two 3×3 convolutions; Conv3 and BN3 nil) or Bottleneck
// (1×1, grouped 3×3, 1×1 expanding 4 times), with a projection shortcut (Downsample: a strided
// 1×1 convolution and a BatchNorm) where the shape changes.
type ResBlock struct {
	gradCheckpoint
	Conv1      *nn.Conv2dLayer
	BN1        *nn.BatchNorm2dLayer `nn:"bn1"`
	Conv2      *nn.Conv2dLayer
	BN2        *nn.BatchNorm2dLayer `nn:"bn2"`
	Conv3      *nn.Conv2dLayer
	BN3        *nn.BatchNorm2dLayer `nn:"bn3"`
	Downsample nn.Sequential
}

// NewResNet builds a ResNet for images of c channels and the given number of classes,
// initialized as torchvision's: every convolution's weight kaiming_normal_ (fan_out, ReLU), the
// BatchNorms ones and zeros, the linear head as torch.nn.Linear starts.
func NewResNet(cfg ResNetConfig, c, classes int, name string) (*ResNet, error) {
	for i, n := range cfg.Layers {
		if n <= 0 {
			return nil, fmt.Errorf("layers_%d=%d: want > 0", i+1, n)
		}
	}
	if cfg.Groups <= 0 || cfg.WidthPerGroup <= 0 {
		return nil, fmt.Errorf("groups %d, width_per_group %d: want each > 0", cfg.Groups, cfg.WidthPerGroup)
	}
	if !cfg.Bottleneck && (cfg.Groups != 1 || cfg.WidthPerGroup != 64) {
		return nil, fmt.Errorf("groups %d, width_per_group %d: basic blocks take groups=1 and width_per_group=64 only (as torchvision's BasicBlock)", cfg.Groups, cfg.WidthPerGroup)
	}
	expansion := 1
	if cfg.Bottleneck {
		expansion = 4
	}
	conv := func(in, out, k, stride, groups int) *nn.Conv2dLayer {
		return nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: (k - 1) / 2, Groups: groups}, false)
	}
	inplanes := 64
	stage := func(planes, blocks, stride int) nn.Sequential {
		var s nn.Sequential
		for i := range blocks {
			if i > 0 {
				stride = 1
			}
			b := &ResBlock{}
			if cfg.Bottleneck {
				width := planes * cfg.WidthPerGroup / 64 * cfg.Groups
				b.Conv1, b.BN1 = conv(inplanes, width, 1, 1, 1), nn.NewBatchNorm2d(width)
				b.Conv2, b.BN2 = conv(width, width, 3, stride, cfg.Groups), nn.NewBatchNorm2d(width)
				b.Conv3, b.BN3 = conv(width, planes*4, 1, 1, 1), nn.NewBatchNorm2d(planes*4)
			} else {
				b.Conv1, b.BN1 = conv(inplanes, planes, 3, stride, 1), nn.NewBatchNorm2d(planes)
				b.Conv2, b.BN2 = conv(planes, planes, 3, 1, 1), nn.NewBatchNorm2d(planes)
			}
			if stride != 1 || inplanes != planes*expansion {
				b.Downsample = nn.Sequential{conv(inplanes, planes*expansion, 1, stride, 1), nn.NewBatchNorm2d(planes * expansion)}
			}
			inplanes = planes * expansion
			s = append(s, b)
		}
		return s
	}
	m := &ResNet{
		Conv1:  nn.NewConv2d(c, 64, 7, nn.ConvOptions{Stride: 2, Padding: 3}, false),
		BN1:    nn.NewBatchNorm2d(64),
		Layer1: stage(64, cfg.Layers[0], 1),
		Layer2: stage(128, cfg.Layers[1], 2),
		Layer3: stage(256, cfg.Layers[2], 2),
		Layer4: stage(512, cfg.Layers[3], 2),
		FC:     nn.NewLinear(512*expansion, classes, true),
		name:   name,
	}
	torchDefault(m.FC.Weight, m.FC.Bias)
	initLayers(m, kaimingFanOut, nil)
	return m, nil
}

func (m *ResNet) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *ResNet) Forward(x *nn.Tensor) *nn.Tensor {
	x = nn.MaxPool2d(nn.ReLU(nn.ConvBatchNorm(x, m.Conv1, m.BN1)), 3, 2, 1)
	x = m.Layer4.Forward(m.Layer3.Forward(m.Layer2.Forward(m.Layer1.Forward(x))))
	return m.FC.Forward(nn.Flatten(nn.GlobalAvgPool(x)))
}

// Forward runs the block on x [N C H W].
func (b *ResBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *ResBlock) forward(x *nn.Tensor) *nn.Tensor {
	y := nn.ConvBatchNorm(nn.ReLU(nn.ConvBatchNorm(x, b.Conv1, b.BN1)), b.Conv2, b.BN2)
	if b.Conv3 != nil {
		y = nn.ConvBatchNorm(nn.ReLU(y), b.Conv3, b.BN3)
	}
	if b.Downsample != nil {
		x = b.Downsample.Forward(x)
	}
	return nn.ReLU(nn.Add(y, x))
}

// resnetBuilder builds name from base (its named configuration; zero for resnet itself, whose
// arguments are torchvision's ResNet's).
func resnetBuilder(name string, base ResNetConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		var args []*arg
		bottleneck := 1
		if base.Layers == [4]int{} {
			cfg.Groups, cfg.WidthPerGroup = 1, 64
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("layers_%d", i+1), i: &cfg.Layers[i], required: true})
			}
			args = append(args, &arg{name: "bottleneck", i: &bottleneck}, &arg{name: "groups", i: &cfg.Groups},
				&arg{name: "width_per_group", i: &cfg.WidthPerGroup})
		}
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if base.Layers == [4]int{} {
			if bottleneck > 1 {
				return nil, fmt.Errorf("argument bottleneck=%d: want 1 (Bottleneck blocks) or 0 (BasicBlock)", bottleneck)
			}
			cfg.Bottleneck = bottleneck == 1
		}
		name := spec(name, args)
		m, err := NewResNet(cfg, in.C, classes, name)
		if err != nil {
			return nil, err
		}
		return &Model{Name: name, Module: m}, nil
	}
}

func init() {
	for _, c := range []struct {
		name string
		cfg  ResNetConfig
	}{
		{"resnet", ResNetConfig{}},
		// resnet18 and resnet50 are train's own (NewModel).
		{"resnet34", ResNetConfig{[4]int{3, 4, 6, 3}, false, 1, 64}},
		{"resnet101", ResNetConfig{[4]int{3, 4, 23, 3}, true, 1, 64}},
		{"resnet152", ResNetConfig{[4]int{3, 8, 36, 3}, true, 1, 64}},
		{"resnext50_32x4d", ResNetConfig{[4]int{3, 4, 6, 3}, true, 32, 4}},
		{"resnext101_32x8d", ResNetConfig{[4]int{3, 4, 23, 3}, true, 32, 8}},
		{"resnext101_64x4d", ResNetConfig{[4]int{3, 4, 23, 3}, true, 64, 4}},
		{"wide_resnet50_2", ResNetConfig{[4]int{3, 4, 6, 3}, true, 1, 128}},
		{"wide_resnet101_2", ResNetConfig{[4]int{3, 4, 23, 3}, true, 1, 128}},
	} {
		if err := Register(c.name, resnetBuilder(c.name, c.cfg)); err != nil {
			panic(err)
		}
	}
}
