package models

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// Stoke's own models, first written with package train's layers before models were modules of
// package nn; their tensors, their order and their initialization are those models', so
// checkpoints written then load, resume and predict the same:
//
//   - "mlp": flatten - linear 512 - relu - linear 256 - relu - linear classes
//   - "cnn": conv 32 5x5 pad 2 - relu - maxpool 2 - conv 64 5x5 pad 2 - relu - maxpool 2 -
//     flatten - linear 128 - relu - linear classes (the PyTorch peer's network; each relu runs
//     after the maxpool that follows it, on a quarter of the values: ReLU is monotone, so the
//     values and gradients are the same)
//   - "resnet8", "resnet20": the CIFAR ResNets of He et al. (2016) for 28-32 px images: a 3x3
//     stem of 16 channels, then 1 (resnet8) or 3 (resnet20) basic blocks in each of three stages of
//     16, 32 and 64 channels (stride 2 at the start of the last two), global average pooling and a
//     linear layer. Shortcuts that change shape are 1x1 convolutions with BatchNorm (He et al.'s
//     option B).
//   - "resnet18", "resnet50": torchvision's resnet18 and resnet50 (basic and bottleneck blocks,
//     stride on the 3x3 convolution), with one change for small images: when both sides of the
//     input are at most 32 px, the stem is a 3x3 stride-1 convolution without the max pooling
//     (a 7x7 stride-2 stem and a stride-2 pooling would leave a 32 px image 1x1 before the last
//     stage). From 33 px up the layers are exactly torchvision's.
//
// The ResNets' tensors carry torchvision's state_dict names (conv1.weight,
// layer1.0.bn1.running_mean, fc.bias, ...), so an exported model loads into
// torchvision.models.resnet18(num_classes=classes); mlp's and cnn's are "1.linear.weight" and
// so on. Weights that feed a ReLU start He uniform, the others Glorot uniform (the trainer's rule
// for a weight without a distribution of its own).

// maxInput bounds the values of one input image a built-in model is built for (3x2364x2364).
const maxInput = 1 << 24

func init() {
	for _, name := range []string{"mlp", "cnn", "resnet8", "resnet20", "resnet18", "resnet50"} {
		err := Register(name, func(args string, in Shape, classes int) (*Model, error) {
			if args != "" {
				return nil, fmt.Errorf("%s takes no arguments, not %q", name, args)
			}
			m, err := builtinModule(name, in, classes)
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

// builtinModule builds the built-in model name for images of shape in.
func builtinModule(name string, in Shape, classes int) (nn.Module, error) {
	if in.C <= 0 || in.H <= 0 || in.W <= 0 || in.Len() > maxInput || classes <= 0 {
		return nil, fmt.Errorf("input %v, %d classes", in, classes)
	}
	switch name {
	case "mlp":
		return nn.Dict{
			{Name: "0.flatten", Module: nn.Fn(nn.Flatten)},
			{Name: "1.linear", Module: he(nn.NewLinear(in.Len(), 512, true))},
			{Name: "2.relu", Module: nn.Fn(nn.ReLU)},
			{Name: "3.linear", Module: he(nn.NewLinear(512, 256, true))},
			{Name: "4.relu", Module: nn.Fn(nn.ReLU)},
			{Name: "5.linear", Module: nn.NewLinear(256, classes, true)},
		}, nil
	case "cnn":
		if in.H < 4 || in.W < 4 {
			return nil, fmt.Errorf("input %v: the cnn's two 2x2 poolings need images of at least 4x4", in)
		}
		pad2 := nn.ConvOptions{Stride: 1, Padding: 2}
		return nn.Dict{
			{Name: "0.conv2d", Module: he(nn.NewConv2d(in.C, 32, 5, pad2, true))},
			{Name: "2.maxpool", Module: nn.MaxPool2dLayer{K: 2, Stride: 2}}, // before 1.relu: see NewModel
			{Name: "1.relu", Module: nn.Fn(nn.ReLU)},
			{Name: "3.conv2d", Module: he(nn.NewConv2d(32, 64, 5, pad2, true))},
			{Name: "5.maxpool", Module: nn.MaxPool2dLayer{K: 2, Stride: 2}},
			{Name: "4.relu", Module: nn.Fn(nn.ReLU)},
			{Name: "6.flatten", Module: nn.Fn(nn.Flatten)},
			{Name: "7.linear", Module: he(nn.NewLinear(64*(in.H/4)*(in.W/4), 128, true))},
			{Name: "8.relu", Module: nn.Fn(nn.ReLU)},
			{Name: "9.linear", Module: nn.NewLinear(128, classes, true)},
		}, nil
	case "resnet8":
		return newResNet(in, classes, 16, 3, 1, []int{16, 32, 64}, []int{1, 1, 1}, false), nil
	case "resnet20":
		return newResNet(in, classes, 16, 3, 1, []int{16, 32, 64}, []int{3, 3, 3}, false), nil
	case "resnet18", "resnet50":
		blocks, bottleneck := []int{2, 2, 2, 2}, false
		if name == "resnet50" {
			blocks, bottleneck = []int{3, 4, 6, 3}, true
		}
		k, stride := 7, 2
		if in.H <= 32 && in.W <= 32 {
			k, stride = 3, 1
		}
		return newResNet(in, classes, 64, k, stride, []int{64, 128, 256, 512}, blocks, bottleneck), nil
	}
	return nil, fmt.Errorf("no built-in model %q", name)
}

// heWeight makes a weight start He (Kaiming) uniform, bound √(6/fan_in): a weight that feeds a
// ReLU.
func heWeight(w *nn.Tensor) {
	s := w.Shape()
	fanIn := prod(s[1:])
	w.SetDist(nn.Uniform(math.Sqrt(6 / float64(fanIn))))
}

func prod(s []int) int {
	p := 1
	for _, v := range s {
		p *= v
	}
	return p
}

// he makes a linear or convolution layer's weight start He uniform and returns the layer.
func he[L interface {
	*nn.LinearLayer | *nn.Conv2dLayer
}](l L) L {
	switch l := any(l).(type) {
	case *nn.LinearLayer:
		heWeight(l.Weight)
	case *nn.Conv2dLayer:
		heWeight(l.Weight)
	}
	return l
}

// newResNet is a ResNet of torchvision's naming: a stem of width channels (a k×k convolution
// with the stride, BatchNorm, ReLU, and a 3x3 stride-2 max pooling when the stride is 2), stages
// "layer1", ... of blocks[i] blocks of widths[i] (the first block of every stage after the first
// with stride 2), global average pooling and the linear "fc". Every convolution's weight starts
// He uniform.
func newResNet(in Shape, classes, width, k, stride int, widths, blocks []int, bottleneck bool) nn.Dict {
	stem := he(nn.NewConv2d(in.C, width, k, nn.ConvOptions{Stride: stride, Padding: k / 2}, false))
	d := nn.Dict{{Name: "conv1", Module: stem}, {Name: "bn1", Module: nn.NewBatchNorm2d(width)}}
	if stride == 2 {
		// The pooling before the ReLU: the same values, the ReLU on a quarter of them.
		d = append(d, nn.Entry{Name: "maxpool", Module: nn.MaxPool2dLayer{K: 3, Stride: 2, Padding: 1}})
	}
	d = append(d, nn.Entry{Name: "relu", Module: nn.Fn(nn.ReLU)})
	c := width
	for stage, w := range widths {
		var layer nn.Sequential
		for i := range blocks[stage] {
			s := 1
			if i == 0 && stage > 0 {
				s = 2
			}
			b := newBlock(c, w, s, bottleneck)
			layer = append(layer, b)
			c = b.out
		}
		d = append(d, nn.Entry{Name: fmt.Sprintf("layer%d", stage+1), Module: layer})
	}
	return append(d,
		nn.Entry{Name: "avgpool", Module: nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) })},
		nn.Entry{Name: "fc", Module: nn.NewLinear(c, classes, true)})
}

// block is torchvision's BasicBlock (two 3x3 convolutions) or Bottleneck (1x1, 3x3 with the
// stride, 1x1 to 4x the width), each convolution followed by BatchNorm, with a 1x1 convolution
// and BatchNorm as the shortcut when the shape changes, and the ReLU after the addition.
type block struct {
	gradCheckpoint
	Conv1      *nn.Conv2dLayer
	Bn1        *nn.BatchNorm2dLayer
	Conv2      *nn.Conv2dLayer
	Bn2        *nn.BatchNorm2dLayer
	Conv3      *nn.Conv2dLayer // a Bottleneck's
	Bn3        *nn.BatchNorm2dLayer
	Downsample nn.Sequential
	out        int
}

func newBlock(in, width, stride int, bottleneck bool) *block {
	conv := func(in, out, k, stride int) *nn.Conv2dLayer {
		return he(nn.NewConv2d(in, out, k, nn.ConvOptions{Stride: stride, Padding: k / 2}, false))
	}
	b := &block{out: width}
	if bottleneck {
		b.out = 4 * width
		b.Conv1, b.Bn1 = conv(in, width, 1, 1), nn.NewBatchNorm2d(width)
		b.Conv2, b.Bn2 = conv(width, width, 3, stride), nn.NewBatchNorm2d(width)
		b.Conv3, b.Bn3 = conv(width, b.out, 1, 1), nn.NewBatchNorm2d(b.out)
	} else {
		b.Conv1, b.Bn1 = conv(in, width, 3, stride), nn.NewBatchNorm2d(width)
		b.Conv2, b.Bn2 = conv(width, width, 3, 1), nn.NewBatchNorm2d(width)
	}
	if stride != 1 || in != b.out {
		b.Downsample = nn.Sequential{conv(in, b.out, 1, stride), nn.NewBatchNorm2d(b.out)}
	}
	return b
}

func (b *block) Forward(x *nn.Tensor) *nn.Tensor { return b.checkpointed(b, x) }

// forward is the block's pass.
func (b *block) forward(x *nn.Tensor) *nn.Tensor {
	h := nn.ReLU(nn.ConvBatchNorm(x, b.Conv1, b.Bn1))
	h = nn.ConvBatchNorm(h, b.Conv2, b.Bn2)
	if b.Conv3 != nil {
		h = nn.ConvBatchNorm(nn.ReLU(h), b.Conv3, b.Bn3)
	}
	s := x
	if b.Downsample != nil {
		s = b.Downsample.Forward(x)
	}
	return nn.ReLU(nn.Add(h, s))
}
