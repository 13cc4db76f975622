package train

import (
	"fmt"

	"github.com/stoke-ml/stoke/nn"
)

// The package's layers are modules of package nn: each is its forward pass over nn's ops, whose
// backward pass the graph derives (NN), under the description checkpoints know it by. Their
// tensors, parameter order, initialization and descriptions are those of the hand-written
// layers they replace, so checkpoints written before load and resume unchanged.

// builtin is one of the package's layers: an nn module, its description ("linear 784->512") and
// the per-sample input shapes it takes.
type builtin struct {
	nn.Module
	desc  string
	check func(in []int) error // refuses an input shape the description does not take
	block bool                 // a Residual: check's errors name the block and its layers already
}

func (b builtin) String() string { return b.desc }

func (b builtin) checkInput(in []int) error {
	if b.check == nil {
		return nil
	}
	if err := b.check(in); err != nil && !b.block {
		return fmt.Errorf("train: %s: %w", b.desc, err)
	} else if err != nil {
		return err
	}
	return nil
}

func newBuiltin(desc string, m nn.Module, check func(in []int) error) Layer {
	return Custom(NN(builtin{Module: m, desc: desc, check: check}))
}

// kindOf is the kind of one of the package's layers ("relu", "maxpool"); "" for another layer.
func kindOf(l Layer) string {
	c, ok := l.(*custom)
	if !ok {
		return ""
	}
	n, ok := c.m.(*nnModule)
	if !ok {
		return ""
	}
	if _, ok := n.m.(builtin); !ok {
		return ""
	}
	return layerKind(l)
}

// chw checks an input of [C H W] per sample, with c channels when c > 0.
func chw(c int) func(in []int) error {
	return func(in []int) error {
		if len(in) != 3 || (c > 0 && in[0] != c) {
			if c > 0 {
				return fmt.Errorf("input shape %v; want [%d H W]", in, c)
			}
			return fmt.Errorf("input shape %v; want [C H W]", in)
		}
		return nil
	}
}

// Linear is a fully connected layer y = x Wᵀ + b with W of shape [out in] (PyTorch's layout). Its
// input must have in elements per sample (any shape; it is read flat).
func Linear(in, out int) Layer {
	return newBuiltin(fmt.Sprintf("linear %d->%d", in, out), flatLinear{nn.NewLinear(max(in, 0), max(out, 0), true)},
		func(shape []int) error {
			if in <= 0 || out <= 0 {
				return fmt.Errorf("sizes must be positive")
			}
			if prod(shape) != in {
				return fmt.Errorf("input shape %v has %d elements; want %d", shape, prod(shape), in)
			}
			return nil
		})
}

// flatLinear is nn's Linear over its input read flat; its tensors are the Linear's.
type flatLinear struct{ *nn.LinearLayer }

func (l flatLinear) Forward(x *nn.Tensor) *nn.Tensor { return l.LinearLayer.Forward(nn.Flatten(x)) }

// convSpec is a Conv2D's settings.
type convSpec struct {
	stride int
	noBias bool
}

// ConvOption changes a Conv2D from its defaults (stride 1, with a bias).
type ConvOption func(*convSpec)

// Stride makes the convolution step s pixels (output (H+2*pad-k)/s + 1, as PyTorch's).
func Stride(s int) ConvOption { return func(c *convSpec) { c.stride = s } }

// NoBias leaves out the bias (a convolution followed by BatchNorm2D needs none).
func NoBias() ConvOption { return func(c *convSpec) { c.noBias = true } }

// Conv2D is a 2-D convolution with outC filters of k×k over inC input channels, zero padding pad
// on each side, stride 1 and a bias per filter unless opts say otherwise. Input and output are
// [C H W] per sample.
func Conv2D(inC, outC, k, pad int, opts ...ConvOption) Layer {
	c := convSpec{stride: 1}
	for _, o := range opts {
		o(&c)
	}
	desc := fmt.Sprintf("conv2d %d->%d %dx%d pad %d", inC, outC, k, k, pad)
	if c.stride != 1 {
		desc += fmt.Sprintf(" stride %d", c.stride)
	}
	if c.noBias {
		desc += " no bias"
	}
	conv := nn.NewConv2d(max(inC, 0), max(outC, 0), max(k, 0), nn.ConvOptions{Stride: c.stride, Padding: pad}, !c.noBias)
	return newBuiltin(desc, conv, func(in []int) error {
		if c.stride < 1 {
			return fmt.Errorf("stride must be positive")
		}
		return chw(inC)(in)
	})
}

// ReLU is max(x, 0), elementwise (NaN gives 0). Followed by a MaxPool2D in a Sequential model, it
// runs after the pooling, to the same values (see Sequential).
func ReLU() Layer { return newBuiltin("relu", nn.Fn(nn.ReLU), nil) }

// MaxPool2D takes the maximum of each k×k window, stride k (a partial window at the edge is
// dropped, as in PyTorch). Input and output are [C H W] per sample.
func MaxPool2D(k int) Layer { return maxPool2D(k, k, 0) }

// maxPool2D is a k×k max pooling with a stride and zero padding (torchvision's ResNet stem: 3,
// 2, 1).
func maxPool2D(k, stride, pad int) Layer {
	desc := fmt.Sprintf("maxpool %dx%d", k, k)
	if stride != k || pad != 0 {
		desc += fmt.Sprintf(" stride %d pad %d", stride, pad)
	}
	return newBuiltin(desc, nn.MaxPool2dLayer{K: k, Stride: stride, Padding: pad}, chw(0))
}

// Flatten reshapes each sample to one dimension; it moves no data.
func Flatten() Layer { return newBuiltin("flatten", nn.Fn(nn.Flatten), nil) }

// GlobalAvgPool averages each channel of a [C H W] input over its pixels, giving [C] per sample
// (PyTorch's AdaptiveAvgPool2d(1) followed by flatten).
func GlobalAvgPool() Layer {
	return newBuiltin("avgpool", nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) }), chw(0))
}

// BatchNorm2D normalizes each of c channels of [C H W] inputs as PyTorch's nn.BatchNorm2d(c):
// while training, with the batch's mean and variance over samples and pixels, moving running
// estimates with momentum 0.1; in evaluation, with the running estimates; then scales and shifts
// by a learned weight (initially 1) and bias (initially 0), which get no weight decay. The
// running statistics are checkpointed and exported with the weights. With
// Config.SyncBatchNorm, the statistics are the whole data-parallel batch's.
func BatchNorm2D(c int) Layer {
	return newBuiltin(fmt.Sprintf("batchnorm %d", c), nn.NewBatchNorm2d(max(c, 0)), func(in []int) error {
		if c <= 0 {
			return fmt.Errorf("input shape %v; want [%d H W]", in, c)
		}
		return chw(c)(in)
	})
}

// Dropout zeroes each element with probability p while training and scales the others by
// 1/(1-p); in evaluation, or in a frozen part of the model (Config.FreezeBackbone, FreezeUpTo), it
// passes its input through. The mask is a function of the trainer's seed, the step and the
// layer, so runs (and resumed runs) repeat exactly.
func Dropout(p float32) Layer {
	return newBuiltin(fmt.Sprintf("dropout %g", p), nn.DropoutLayer{P: p}, func([]int) error {
		if !(p >= 0 && p < 1) {
			return fmt.Errorf("p must be in [0,1)")
		}
		return nil
	})
}
