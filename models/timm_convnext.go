package models

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// TimmConvNeXtConfig is a timm ConvNeXt: its stages' depths and dims, conv_mlp (the smallest
// ones' MLP of 1×1 convolutions on channels-first tensors, with a LayerNorm2d), and the
// create_model keyword arguments drop_rate (the head's dropout) and drop_path_rate (the last
// block's stochastic depth; earlier blocks' rise linearly from 0).
type TimmConvNeXtConfig struct {
	Depths, Dims           [4]int
	ConvMLP                bool
	DropRate, DropPathRate float64
}

// TimmConvNeXt is timm.models.ConvNeXt with its defaults: torchvision's ConvNeXt (the same
// stem, blocks, downsampling and head) under timm's state_dict names (stem.0, stages.N.downsample,
// stages.N.blocks.M.conv_dw, head.norm, head.fc) and with the 1×1-convolution MLP of
// convnext_atto to convnext_nano.
type TimmConvNeXt struct {
	Stem   nn.Sequential
	Stages []*TimmConvNeXtStage
	Head   *TimmNormHead
	name   string
}

// TimmConvNeXtStage is timm's ConvNeXtStage: a downsampling (none in the first stage), then
// blocks.
type TimmConvNeXtStage struct {
	Downsample nn.Sequential
	Blocks     nn.Sequential
}

// TimmConvNeXtBlock is timm's ConvNeXtBlock: x + drop_path(gamma · mlp(norm(conv_dw(x)))), the
// norm and MLP over channels-last tensors (or channels-first with conv_mlp).
type TimmConvNeXtBlock struct {
	gradCheckpoint
	Gamma    *nn.Tensor      // [C]
	ConvDW   *nn.Conv2dLayer `nn:"conv_dw"`
	Norm     nn.Module
	MLP      *TimmMlp
	convMLP  bool
	dropPath float32
}

// TimmNormHead is timm's NormMlpClassifierHead as ConvNeXt uses it: global average pooling, a
// LayerNorm2d, dropout, fc.
type TimmNormHead struct {
	Norm *LayerNorm2d
	FC   *nn.LinearLayer
	drop float32
}

// NewTimmConvNeXt builds a timm ConvNeXt for images of c channels and the given number of
// classes; name is the model's. It starts as timm's (_init_weights): every convolution's and
// linear layer's weight truncated normal with std 0.02, zero biases, the layer scales (gamma)
// 1e-6 (ls_init_value).
func NewTimmConvNeXt(cfg TimmConvNeXtConfig, c, classes int, name string) *TimmConvNeXt {
	total := 0
	for _, d := range cfg.Depths {
		total += d
	}
	d0 := cfg.Dims[0]
	m := &TimmConvNeXt{
		Stem: nn.Sequential{nn.NewConv2d(c, d0, 4, nn.ConvOptions{Stride: 4}, true), newLayerNorm2d(d0)},
		Head: &TimmNormHead{Norm: newLayerNorm2d(cfg.Dims[3]), FC: nn.NewLinear(cfg.Dims[3], classes, true), drop: float32(cfg.DropRate)},
		name: name,
	}
	id := 0
	for i, w := range cfg.Dims {
		s := &TimmConvNeXtStage{}
		if i > 0 {
			s.Downsample = nn.Sequential{newLayerNorm2d(cfg.Dims[i-1]), nn.NewConv2d(cfg.Dims[i-1], w, 2, nn.ConvOptions{Stride: 2}, true)}
		}
		for range cfg.Depths[i] {
			b := &TimmConvNeXtBlock{
				Gamma:    nn.Param([]int{w}, nn.Ones).SetDist(nn.Const(1e-6)),
				ConvDW:   nn.NewConv2d(w, w, 7, nn.ConvOptions{Padding: 3, Groups: w}, true),
				Norm:     layerNorm(w),
				MLP:      &TimmMlp{FC1: nn.NewLinear(w, 4*w, true), FC2: nn.NewLinear(4*w, w, true)},
				convMLP:  cfg.ConvMLP,
				dropPath: float32(cfg.DropPathRate * float64(id) / float64(max(total-1, 1))), // torch.linspace(0, rate, total)
			}
			if cfg.ConvMLP {
				b.Norm = newLayerNorm2d(w)
				b.MLP = &TimmMlp{FC1: nn.NewConv2d(w, 4*w, 1, nn.ConvOptions{}, true), FC2: nn.NewConv2d(4*w, w, 1, nn.ConvOptions{}, true)}
			}
			s.Blocks = append(s.Blocks, b)
			id++
		}
		m.Stages = append(m.Stages, s)
	}
	initLayers(m, always(nn.TruncNormal(0.02)), always(nn.TruncNormal(0.02)))
	return m
}

func (m *TimmConvNeXt) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *TimmConvNeXt) Forward(x *nn.Tensor) *nn.Tensor {
	x = m.Stem.Forward(x)
	for _, s := range m.Stages {
		x = s.Forward(x)
	}
	return m.Head.Forward(x)
}

// Forward downsamples x [N C H W] and runs the blocks.
func (s *TimmConvNeXtStage) Forward(x *nn.Tensor) *nn.Tensor {
	return s.Blocks.Forward(s.Downsample.Forward(x))
}

// Forward runs the block on x [N C H W].
func (b *TimmConvNeXtBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *TimmConvNeXtBlock) forward(x *nn.Tensor) *nn.Tensor {
	y := b.ConvDW.Forward(x)
	if b.convMLP {
		y = b.MLP.Forward(b.Norm.Forward(y))
	} else {
		y = nn.Permute(b.MLP.Forward(b.Norm.Forward(nn.Permute(y, 0, 2, 3, 1))), 0, 3, 1, 2)
	}
	y = nn.Mul(y, b.Gamma.Reshape(-1, 1, 1))
	return nn.Add(nn.DropPath(y, b.dropPath), x)
}

// Forward pools x [N C H W] and classifies it.
func (h *TimmNormHead) Forward(x *nn.Tensor) *nn.Tensor {
	x = nn.Flatten(h.Norm.Forward(nn.GlobalAvgPool(x)))
	return h.FC.Forward(nn.Dropout(x, h.drop))
}

// timmConvNeXts are timm's ConvNeXt configurations.
var timmConvNeXts = []struct {
	name string
	cfg  TimmConvNeXtConfig
}{
	{"convnext_atto", TimmConvNeXtConfig{Depths: [4]int{2, 2, 6, 2}, Dims: [4]int{40, 80, 160, 320}, ConvMLP: true}},
	{"convnext_femto", TimmConvNeXtConfig{Depths: [4]int{2, 2, 6, 2}, Dims: [4]int{48, 96, 192, 384}, ConvMLP: true}},
	{"convnext_pico", TimmConvNeXtConfig{Depths: [4]int{2, 2, 6, 2}, Dims: [4]int{64, 128, 256, 512}, ConvMLP: true}},
	{"convnext_nano", TimmConvNeXtConfig{Depths: [4]int{2, 2, 8, 2}, Dims: [4]int{80, 160, 320, 640}, ConvMLP: true}},
	{"convnext_tiny", TimmConvNeXtConfig{Depths: [4]int{3, 3, 9, 3}, Dims: [4]int{96, 192, 384, 768}}},
	{"convnext_small", TimmConvNeXtConfig{Depths: [4]int{3, 3, 27, 3}, Dims: [4]int{96, 192, 384, 768}}},
	{"convnext_base", TimmConvNeXtConfig{Depths: [4]int{3, 3, 27, 3}, Dims: [4]int{128, 256, 512, 1024}}},
}

func init() {
	for _, c := range timmConvNeXts {
		err := Register(timmPrefix+c.name, func(s string, in Shape, classes int) (*Model, error) {
			cfg := c.cfg
			args := []*arg{{name: "drop_rate", f: &cfg.DropRate}, {name: "drop_path_rate", f: &cfg.DropPathRate}}
			if err := parseArgs(s, args); err != nil {
				return nil, err
			}
			if in.H < 32 || in.W < 32 {
				return nil, fmt.Errorf("the images are %dx%d; a ConvNeXt downsamples by 32 (want at least 32x32)", in.H, in.W)
			}
			name := spec(timmPrefix+c.name, args)
			return &Model{Name: name, Module: NewTimmConvNeXt(cfg, in.C, classes, name)}, nil
		})
		if err != nil {
			panic(err)
		}
	}
}
