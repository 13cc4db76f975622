// Package layers holds layers of one's own, each a module of package nn written as its forward
// pass (nn derives the backward pass): a channels-first layer norm (ConvNeXt's LayerNorm2d), a
// squeeze-and-excitation block (SENet's), a transformer encoder block and a low-rank linear
// layer, and two small models of them, se-net and tiny-transformer(heads=N). Importing it
// registers the models (models.Register), so that a program that imports it rebuilds their
// checkpoints by name, and a stoke built with it (../cmd/stoke) trains, predicts and exports
// them:
//
//	package main
//
//	import (
//		_ "example.com/stoke-external/layers"
//		"github.com/stoke-ml/stoke/cli"
//	)
//
//	func main() { cli.Main() }
package layers

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
)

// LayerNorm2d normalizes each pixel's channel vector of x [N C H W] with its mean and biased
// variance, then scales and shifts per channel.
type LayerNorm2d struct {
	Weight, Bias *nn.Tensor
}

func NewLayerNorm2d(c int) *LayerNorm2d {
	return &LayerNorm2d{Weight: nn.Param([]int{c}, nn.Ones), Bias: nn.Param([]int{c}, nn.Zeros)}
}

func (l *LayerNorm2d) Forward(x *nn.Tensor) *nn.Tensor {
	c := l.Weight.Dim(0)
	mean := nn.Mean(x, []int{1}, true)
	xc := nn.Sub(x, mean)
	rstd := nn.Rsqrt(nn.AddScalar(nn.Mean(nn.Mul(xc, xc), []int{1}, true), 1e-6))
	return nn.Add(nn.Mul(nn.Mul(xc, rstd), l.Weight.Reshape(c, 1, 1)), l.Bias.Reshape(c, 1, 1))
}

// SqueezeExcite gates each channel of x [N C H W] by a sigmoid of two linear layers over the
// channels' means: the gate is computed from the same input it multiplies.
type SqueezeExcite struct {
	FC1, FC2 *nn.LinearLayer
}

func NewSqueezeExcite(c, r int) *SqueezeExcite {
	return &SqueezeExcite{FC1: nn.NewLinear(c, c/r, true), FC2: nn.NewLinear(c/r, c, true)}
}

func (m *SqueezeExcite) Forward(x *nn.Tensor) *nn.Tensor {
	s := nn.Mean(x, []int{2, 3}, false) // [N C]
	s = nn.Sigmoid(m.FC2.Forward(nn.ReLU(m.FC1.Forward(s))))
	return nn.Mul(x, s.Reshape(x.Dim(0), x.Dim(1), 1, 1))
}

// TransformerBlock is a pre-norm transformer encoder block over tokens [N T D]: multi-head
// self-attention, then a two-layer MLP of 4x the width, each added to its input. The heads split
// the width, so a head count that does not divide it is the graph's error naming the reshape and
// its shapes.
type TransformerBlock struct {
	LN1       *nn.LayerNormLayer
	QKV, Proj *nn.LinearLayer
	LN2       *nn.LayerNormLayer
	FC1, FC2  *nn.LinearLayer
	Heads     int `nn:"-"`
}

func NewTransformerBlock(width, heads int) *TransformerBlock {
	return &TransformerBlock{LN1: nn.NewLayerNorm(width), QKV: nn.NewLinear(width, 3*width, true), Proj: nn.NewLinear(width, width, true),
		LN2: nn.NewLayerNorm(width), FC1: nn.NewLinear(width, 4*width, true), FC2: nn.NewLinear(4*width, width, true), Heads: heads}
}

func (b *TransformerBlock) Forward(x *nn.Tensor) *nn.Tensor {
	n, t, d := x.Dim(0), x.Dim(1), x.Dim(2)
	heads := func(y *nn.Tensor) *nn.Tensor { // [N T D] to [N heads T D/heads]
		return nn.Permute(y.Reshape(n, t, b.Heads, d/b.Heads), 0, 2, 1, 3)
	}
	qkv := nn.Split(b.QKV.Forward(b.LN1.Forward(x)), 2, d, d, d)
	a := nn.ScaledDotProductAttention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), float32(1/math.Sqrt(float64(d/b.Heads))))
	x = nn.Add(x, b.Proj.Forward(nn.Permute(a, 0, 2, 1, 3).Reshape(n, t, d)))
	return nn.Add(x, b.FC2.Forward(nn.GELU(b.FC1.Forward(b.LN2.Forward(x)))))
}

// LowRank is a factorized fully connected layer y = (x Vᵀ) Uᵀ, V [rank in], U [out rank]: fewer
// weights than a Linear of in x out when rank is small.
type LowRank struct {
	V, U *nn.Tensor
}

func NewLowRank(in, rank, out int) *LowRank {
	return &LowRank{V: nn.Param([]int{rank, in}, nn.Weight), U: nn.Param([]int{out, rank}, nn.Weight)}
}

func (l *LowRank) Forward(x *nn.Tensor) *nn.Tensor {
	return nn.Linear(nn.Linear(x, l.V, nil), l.U, nil)
}

// SENet builds se-net for images of shape in: conv - LayerNorm2d - ReLU - SqueezeExcite - pool -
// linear. It takes no arguments (stoke train --model se-net).
func SENet(args string, in models.Shape, classes int) (*models.Model, error) {
	if args != "" {
		return nil, fmt.Errorf("se-net takes no arguments, not %q", args)
	}
	return &models.Model{Name: "se-net", Module: nn.Dict{
		{Name: "conv", Module: nn.NewConv2d(in.C, 16, 3, nn.ConvOptions{Stride: 1, Padding: 1}, true)},
		{Name: "norm", Module: NewLayerNorm2d(16)},
		{Name: "relu", Module: nn.Fn(nn.ReLU)},
		{Name: "se", Module: NewSqueezeExcite(16, 4)},
		{Name: "pool", Module: nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) })},
		{Name: "fc", Module: nn.NewLinear(16, classes, true)},
	}}, nil
}

// TinyTransformerArgs are tiny-transformer's arguments, as models.DecodeArgs reads them from its
// name ("tiny-transformer(heads=4)").
type TinyTransformerArgs struct {
	Heads int `json:"heads"`
	Width int `json:"width"`
}

// PositionEmbedding adds a learned vector to each token of x [N T D].
type PositionEmbedding struct {
	Pos *nn.Tensor
}

func (p *PositionEmbedding) Forward(x *nn.Tensor) *nn.Tensor { return nn.Add(x, p.Pos) }

// TinyTransformer builds tiny-transformer for images of shape in: 4x4 patches embedded to the
// width (24 unless given) with a position embedding, one TransformerBlock, the tokens' mean and
// a linear head.
func TinyTransformer(args string, in models.Shape, classes int) (*models.Model, error) {
	a := TinyTransformerArgs{Heads: 4, Width: 24}
	if err := models.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.Heads < 1 || a.Width < 1 || a.Width > 1024 {
		return nil, fmt.Errorf("heads %d, width %d: want at least 1 of each, a width up to 1024", a.Heads, a.Width)
	}
	embed := nn.NewConv2d(in.C, a.Width, 4, nn.ConvOptions{Stride: 4}, true)
	tokens := nn.Fn(func(x *nn.Tensor) *nn.Tensor { // [N D h w] to [N hw D]
		return nn.Permute(x.Reshape(x.Dim(0), x.Dim(1), -1), 0, 2, 1)
	})
	mean := nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Mean(x, []int{1}, false) })
	return &models.Model{Name: fmt.Sprintf("tiny-transformer(heads=%d,width=%d)", a.Heads, a.Width), Module: nn.Dict{
		{Name: "embed", Module: embed},
		{Name: "tokens", Module: tokens},
		{Name: "pos", Module: &PositionEmbedding{Pos: nn.Param([]int{1, (in.H / 4) * (in.W / 4), a.Width}, nn.Embedding)}},
		{Name: "block", Module: NewTransformerBlock(a.Width, a.Heads)},
		{Name: "mean", Module: mean},
		{Name: "head", Module: nn.NewLinear(a.Width, classes, true)},
	}}, nil
}

func init() {
	err := models.Register("se-net", SENet)
	if err == nil {
		err = models.Register("tiny-transformer", TinyTransformer)
	}
	if err != nil {
		panic(err) // a name taken twice: a programming error, found at start
	}
}
