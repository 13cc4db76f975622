package train

import (
	"fmt"
	"math"

	"github.com/stoke-ml/stoke/nn"
)

// Small models for the tests, written as a list of layers: an nn.Dict whose tensors are named
// "<index>.<kind>.weight" (the built-in mlp's and cnn's naming), the weights that feed a ReLU He
// initialized as NewModel's are.

type tLayer struct {
	kind string
	m    nn.Module
}

// flatLinear is nn's Linear over its input read flat; its tensors are the Linear's.
type flatLinear struct{ *nn.LinearLayer }

func (l flatLinear) Forward(x *nn.Tensor) *nn.Tensor { return l.LinearLayer.Forward(nn.Flatten(x)) }

func tLinear(in, out int) tLayer {
	return tLayer{"linear", flatLinear{nn.NewLinear(in, out, true)}}
}

type tConvOpt func(*nn.ConvOptions, *bool)

func tStride(s int) tConvOpt { return func(o *nn.ConvOptions, _ *bool) { o.Stride = s } }
func tNoBias() tConvOpt      { return func(_ *nn.ConvOptions, bias *bool) { *bias = false } }

func tConv(inC, outC, k, pad int, opts ...tConvOpt) tLayer {
	o, bias := nn.ConvOptions{Stride: 1, Padding: pad}, true
	for _, f := range opts {
		f(&o, &bias)
	}
	return tLayer{"conv2d", nn.NewConv2d(inC, outC, k, o, bias)}
}

// tModule is a layer of any module, of the given kind.
func tModule(kind string, m nn.Module) tLayer { return tLayer{kind, m} }

func tReLU() tLayer         { return tLayer{"relu", nn.Fn(nn.ReLU)} }
func tFlatten() tLayer      { return tLayer{"flatten", nn.Fn(nn.Flatten)} }
func tMaxPool(k int) tLayer { return tLayer{"maxpool", nn.MaxPool2dLayer{K: k, Stride: k}} }
func tBatchNorm(c int) tLayer {
	return tLayer{"batchnorm", nn.NewBatchNorm2d(c)}
}
func tDropout(p float32) tLayer { return tLayer{"dropout", nn.DropoutLayer{P: p}} }
func tAvgPool() tLayer {
	return tLayer{"avgpool", nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) })}
}

// tResidual is main(x) + shortcut(x) (the identity for no shortcut), its weights He initialized.
func tResidual(main, shortcut []tLayer) tLayer {
	b := residual{Main: tDict(main), Shortcut: tDict(shortcut)}
	for _, l := range append(append([]tLayer(nil), main...), shortcut...) {
		heLayer(l.m)
	}
	return tLayer{"residual", b}
}

type residual struct{ Main, Shortcut nn.Dict }

func (b residual) Forward(x *nn.Tensor) *nn.Tensor {
	h, s := b.Main.Forward(x), x
	if len(b.Shortcut) > 0 {
		s = b.Shortcut.Forward(x)
	}
	return nn.Add(h, s)
}

func tDict(layers []tLayer) nn.Dict {
	d := nn.Dict{}
	for i, l := range layers {
		d = append(d, nn.Entry{Name: fmt.Sprintf("%d.%s", i, l.kind), Module: l.m})
	}
	return d
}

// heWeight makes a weight start He uniform, as models' built-in ones do.
func heWeight(w *nn.Tensor) {
	s := w.Shape()
	w.SetDist(nn.Uniform(math.Sqrt(6 / float64(prod(s[1:])))))
}

func heLayer(m nn.Module) {
	switch l := m.(type) {
	case flatLinear:
		heWeight(l.Weight)
	case *nn.Conv2dLayer:
		heWeight(l.Weight)
	}
}

// tSequential is the model of layers applied in order.
func tSequential(name string, in Shape, classes int, layers ...tLayer) (*Model, error) {
	return Net(name, in, classes, tNet(layers...))
}

// tNet is the module of layers applied in order.
func tNet(layers ...tLayer) nn.Dict {
	for i, l := range layers {
		for _, next := range layers[i+1:] {
			if next.kind == "relu" {
				heLayer(l.m)
				break
			}
			if next.kind != "batchnorm" && (next.kind == "linear" || next.kind == "conv2d" || next.kind == "residual") {
				break
			}
		}
	}
	return tDict(layers)
}
