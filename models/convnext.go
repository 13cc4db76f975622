package models

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// ConvNeXtConfig is a ConvNeXt's four stages, torchvision's block_setting: stage i has Depths[i]
// blocks of Widths[i] channels (CNBlockConfig's input_channels and num_layers; a stage's
// out_channels is the next stage's width), and the drop-path probability of the last block
// (earlier blocks' rise linearly from 0).
type ConvNeXtConfig struct {
	Widths, Depths      [4]int
	StochasticDepthProb float64
}

// ConvNeXt is torchvision.models.ConvNeXt (Liu et al., 2022): a 4×4 stride-4 patch stem, four
// stages of blocks (a depthwise 7×7 convolution, a channels-last LayerNorm, an inverted MLP with
// GELU, a learned per-channel layer scale and stochastic depth on the residual branch) joined by
// a LayerNorm and a 2×2 stride-2 convolution, global average pooling, a LayerNorm and a linear
// head. Its tensors carry torchvision's state_dict names (features.1.0.block.0.weight,
// features.1.0.layer_scale, classifier.2.weight).
type ConvNeXt struct {
	Features   nn.Sequential
	Classifier nn.Sequential
	name       string
}

// CNBlock is ConvNeXt's block: x + drop_path(layer_scale · block(x)).
type CNBlock struct {
	gradCheckpoint
	LayerScale *nn.Tensor // [C 1 1]
	Block      nn.Sequential
	dropPath   float32
}

// LayerNorm2d is torchvision's LayerNorm2d: a LayerNorm over the channels of each pixel of an
// [N C H W] tensor (permuted to channels-last and back).
type LayerNorm2d struct {
	Weight, Bias *nn.Tensor
	Eps          float32 `nn:"-"`
}

func newLayerNorm2d(c int) *LayerNorm2d {
	return &LayerNorm2d{Weight: nn.Param([]int{c}, nn.Ones), Bias: nn.Param([]int{c}, nn.Zeros), Eps: 1e-6}
}

// Forward normalizes x [N C H W] over C.
func (l *LayerNorm2d) Forward(x *nn.Tensor) *nn.Tensor {
	x = nn.LayerNorm(nn.Permute(x, 0, 2, 3, 1), l.Weight, l.Bias, l.Eps)
	return nn.Permute(x, 0, 3, 1, 2)
}

// NewConvNeXt builds a ConvNeXt for images of c channels and the given number of classes,
// initialized as torchvision's: every convolution's and linear layer's weight truncated normal
// with std 0.02, zero biases, the layer scales 1e-6 (layer_scale).
func NewConvNeXt(cfg ConvNeXtConfig, c, classes int, name string) (*ConvNeXt, error) {
	for i := range 4 {
		if cfg.Widths[i] <= 0 || cfg.Depths[i] <= 0 {
			return nil, fmt.Errorf("stage %d: width %d, depth %d: want each > 0", i+1, cfg.Widths[i], cfg.Depths[i])
		}
	}
	total := 0
	for _, d := range cfg.Depths {
		total += d
	}
	w0 := cfg.Widths[0]
	feats := nn.Sequential{nn.Sequential{nn.NewConv2d(c, w0, 4, nn.ConvOptions{Stride: 4}, true), newLayerNorm2d(w0)}}
	id := 0
	for i, w := range cfg.Widths {
		var stage nn.Sequential
		for range cfg.Depths[i] {
			p := 0.0
			if total > 1 {
				p = cfg.StochasticDepthProb * float64(id) / float64(total-1)
			}
			stage = append(stage, &CNBlock{
				LayerScale: nn.Param([]int{w, 1, 1}, nn.Ones).SetDist(nn.Const(1e-6)),
				Block: nn.Sequential{
					nn.NewConv2d(w, w, 7, nn.ConvOptions{Padding: 3, Groups: w}, true),
					nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Permute(x, 0, 2, 3, 1) }),
					layerNorm(w),
					nn.NewLinear(w, 4*w, true),
					nn.Fn(nn.GELU),
					nn.NewLinear(4*w, w, true),
					nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Permute(x, 0, 3, 1, 2) }),
				},
				dropPath: float32(p),
			})
			id++
		}
		feats = append(feats, stage)
		if i < 3 {
			feats = append(feats, nn.Sequential{newLayerNorm2d(w), nn.NewConv2d(w, cfg.Widths[i+1], 2, nn.ConvOptions{Stride: 2}, true)})
		}
	}
	last := cfg.Widths[3]
	m := &ConvNeXt{
		Features:   feats,
		Classifier: nn.Sequential{newLayerNorm2d(last), nn.Fn(nn.Flatten), nn.NewLinear(last, classes, true)},
		name:       name,
	}
	initLayers(m, always(nn.TruncNormal(0.02)), always(nn.TruncNormal(0.02)))
	return m, nil
}

func (m *ConvNeXt) String() string { return m.name }

// Forward maps images [N C H W] (normalized) to logits [N classes].
func (m *ConvNeXt) Forward(x *nn.Tensor) *nn.Tensor {
	return m.Classifier.Forward(nn.GlobalAvgPool(m.Features.Forward(x)))
}

// Forward runs the block on x [N C H W].
func (b *CNBlock) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *CNBlock) forward(x *nn.Tensor) *nn.Tensor {
	return nn.Add(nn.DropPath(nn.Mul(b.LayerScale, b.Block.Forward(x)), b.dropPath), x)
}

// convnextBuilder builds name from base (its named configuration; zero for convnext itself).
func convnextBuilder(name string, base ConvNeXtConfig) Builder {
	return func(s string, in Shape, classes int) (*Model, error) {
		cfg := base
		var args []*arg
		if base.Widths == [4]int{} {
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("width_%d", i+1), i: &cfg.Widths[i], required: true})
			}
			for i := range 4 {
				args = append(args, &arg{name: fmt.Sprintf("depth_%d", i+1), i: &cfg.Depths[i], required: true})
			}
		}
		args = append(args, &arg{name: "stochastic_depth_prob", f: &cfg.StochasticDepthProb})
		if err := parseArgs(s, args); err != nil {
			return nil, err
		}
		if in.H < 32 || in.W < 32 {
			return nil, fmt.Errorf("the images are %dx%d; a ConvNeXt downsamples by 32 (want at least 32x32)", in.H, in.W)
		}
		name := spec(name, args)
		m, err := NewConvNeXt(cfg, in.C, classes, name)
		if err != nil {
			return nil, err
		}
		return &Model{Name: name, Module: m}, nil
	}
}

func init() {
	for _, c := range []struct {
		name string
		cfg  ConvNeXtConfig
	}{
		{"convnext", ConvNeXtConfig{}},
		{"convnext_tiny", ConvNeXtConfig{[4]int{96, 192, 384, 768}, [4]int{3, 3, 9, 3}, 0.1}},
		{"convnext_small", ConvNeXtConfig{[4]int{96, 192, 384, 768}, [4]int{3, 3, 27, 3}, 0.4}},
		{"convnext_base", ConvNeXtConfig{[4]int{128, 256, 512, 1024}, [4]int{3, 3, 27, 3}, 0.5}},
		{"convnext_large", ConvNeXtConfig{[4]int{192, 384, 768, 1536}, [4]int{3, 3, 27, 3}, 0.5}},
	} {
		if err := Register(c.name, convnextBuilder(c.name, c.cfg)); err != nil {
			panic(err)
		}
	}
}
