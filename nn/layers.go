package nn

// The built-in modules, torch.nn's, with its tensor names.

// LinearLayer is torch.nn.Linear: y = x·Weightᵀ + Bias, Weight [out in], Bias [out] or nil.
type LinearLayer struct {
	Weight, Bias *Tensor
}

// NewLinear returns a Linear layer from in to out features, with a bias when bias is set.
func NewLinear(in, out int, bias bool) *LinearLayer {
	l := &LinearLayer{Weight: Param([]int{out, in}, Weight)}
	if bias {
		l.Bias = Param([]int{out}, Zeros)
	}
	return l
}

// Forward applies the layer to x [..., in].
func (l *LinearLayer) Forward(x *Tensor) *Tensor { return Linear(x, l.Weight, l.Bias) }

// Conv2dLayer is torch.nn.Conv2d with dilation 1: Weight [out in/groups kh kw], Bias [out] or nil.
type Conv2dLayer struct {
	Weight, Bias *Tensor
	Options      ConvOptions `nn:"-"`
}

// NewConv2d returns a convolution from in to out channels with a k×k kernel.
func NewConv2d(in, out, k int, o ConvOptions, bias bool) *Conv2dLayer {
	c := &Conv2dLayer{Weight: Param([]int{out, in / max(o.Groups, 1), k, k}, Weight), Options: o}
	if bias {
		c.Bias = Param([]int{out}, Zeros)
	}
	return c
}

// Forward applies the convolution to x [N in H W].
func (c *Conv2dLayer) Forward(x *Tensor) *Tensor { return Conv2d(x, c.Weight, c.Bias, c.Options) }

// BatchNorm2dLayer is torch.nn.BatchNorm2d (momentum 0.1, eps 1e-5 by default): it also
// normalizes [N C] inputs, as BatchNorm1d does.
type BatchNorm2dLayer struct {
	Weight, Bias            *Tensor
	RunningMean, RunningVar *Tensor
	Momentum, Eps           float32 `nn:"-"`
}

// NewBatchNorm2d returns a batch norm over c channels with PyTorch's defaults.
func NewBatchNorm2d(c int) *BatchNorm2dLayer {
	return &BatchNorm2dLayer{
		Weight: Param([]int{c}, Ones), Bias: Param([]int{c}, Zeros),
		RunningMean: Buffer([]int{c}, Zeros), RunningVar: Buffer([]int{c}, Ones),
		Momentum: 0.1, Eps: 1e-5,
	}
}

// Forward normalizes x (see BatchNorm).
func (b *BatchNorm2dLayer) Forward(x *Tensor) *Tensor {
	return BatchNorm(x, b.RunningMean, b.RunningVar, b.Weight, b.Bias, b.Momentum, b.Eps)
}

// LayerNormLayer is torch.nn.LayerNorm over the last dimension.
type LayerNormLayer struct {
	Weight, Bias *Tensor
	Eps          float32 `nn:"-"`
}

// NewLayerNorm returns a layer norm over vectors of d elements (eps 1e-5, PyTorch's default).
func NewLayerNorm(d int) *LayerNormLayer {
	return &LayerNormLayer{Weight: Param([]int{d}, Ones), Bias: Param([]int{d}, Zeros), Eps: 1e-5}
}

// Forward normalizes x along its last dimension.
func (l *LayerNormLayer) Forward(x *Tensor) *Tensor { return LayerNorm(x, l.Weight, l.Bias, l.Eps) }

// MaxPool2dLayer is torch.nn.MaxPool2d.
type MaxPool2dLayer struct{ K, Stride, Padding int }

// Forward pools x (see MaxPool2d).
func (p MaxPool2dLayer) Forward(x *Tensor) *Tensor { return MaxPool2d(x, p.K, p.Stride, p.Padding) }

// DropoutLayer is torch.nn.Dropout.
type DropoutLayer struct{ P float32 }

// Forward drops elements of x in training (see Dropout).
func (d DropoutLayer) Forward(x *Tensor) *Tensor { return Dropout(x, d.P) }
