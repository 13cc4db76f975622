package nn_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/nn"
)

// basicBlock and resnet are torchvision's ResNet, in outline: their StateDict names must be
// torchvision's state_dict keys.
type basicBlock struct {
	Conv1      *nn.Conv2dLayer
	BN1        *nn.BatchNorm2dLayer
	Conv2      *nn.Conv2dLayer
	BN2        *nn.BatchNorm2dLayer
	Downsample nn.Sequential
	scratch    *nn.Tensor // unexported: not a tensor of the module
}

func (b *basicBlock) Forward(x *nn.Tensor) *nn.Tensor {
	y := b.BN2.Forward(b.Conv2.Forward(nn.ReLU(b.BN1.Forward(b.Conv1.Forward(x)))))
	short := x
	if len(b.Downsample) > 0 {
		short = b.Downsample.Forward(x)
	}
	return nn.ReLU(nn.Add(y, short))
}

type resnet struct {
	Conv1  *nn.Conv2dLayer
	Layer1 []*basicBlock
	FC     *nn.LinearLayer
	Cache  *nn.Tensor `nn:"-"`
}

func (r *resnet) Forward(x *nn.Tensor) *nn.Tensor {
	x = r.Conv1.Forward(x)
	for _, b := range r.Layer1 {
		x = b.Forward(x)
	}
	return r.FC.Forward(nn.Flatten(nn.GlobalAvgPool(x)))
}

func block(in, out, stride int) *basicBlock {
	b := &basicBlock{
		Conv1: nn.NewConv2d(in, out, 3, nn.ConvOptions{Stride: stride, Padding: 1}, false), BN1: nn.NewBatchNorm2d(out),
		Conv2: nn.NewConv2d(out, out, 3, nn.ConvOptions{Padding: 1}, false), BN2: nn.NewBatchNorm2d(out),
	}
	if stride != 1 || in != out {
		b.Downsample = nn.Sequential{nn.NewConv2d(in, out, 1, nn.ConvOptions{Stride: stride}, false), nn.NewBatchNorm2d(out)}
	}
	return b
}

func TestStateDictNames(t *testing.T) {
	m := &resnet{Conv1: nn.NewConv2d(3, 4, 3, nn.ConvOptions{Padding: 1}, false), Layer1: []*basicBlock{block(4, 8, 2), block(8, 8, 1)},
		FC: nn.NewLinear(8, 5, true), Cache: nn.Param([]int{1}, nn.Zeros)}
	named, err := nn.StateDict(m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range named {
		got = append(got, n.Name)
	}
	bn := func(p string) []string {
		return []string{p + ".weight", p + ".bias", p + ".running_mean", p + ".running_var"}
	}
	want := []string{"conv1.weight", "layer1.0.conv1.weight"}
	want = append(want, bn("layer1.0.bn1")...)
	want = append(want, "layer1.0.conv2.weight")
	want = append(want, bn("layer1.0.bn2")...)
	want = append(want, "layer1.0.downsample.0.weight")
	want = append(want, bn("layer1.0.downsample.1")...)
	want = append(want, "layer1.1.conv1.weight")
	want = append(want, bn("layer1.1.bn1")...)
	want = append(want, "layer1.1.conv2.weight")
	want = append(want, bn("layer1.1.bn2")...)
	want = append(want, "fc.weight", "fc.bias")
	if !slices.Equal(got, want) {
		t.Errorf("StateDict names\n got %v\nwant %v", got, want)
	}

	// The tree trains: a forward and backward pass of a batch writes every parameter's gradient.
	e := newEnv(t)
	if err := nn.Bind(m, e.a, e.s, 1); err != nil {
		t.Fatal(err)
	}
	g := e.graph(true)
	for _, n := range named {
		g.Attach(n.Tensor)
	}
	x := g.Full(0.5, 2, 3, 6, 6)
	loss := nn.CrossEntropy(m.Forward(g.Input(x.Data(), 2, 3, 6, 6)), e.labels([]int32{1, 4}), 0)
	if err := g.Backward(loss, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range named {
		if !n.Tensor.Trained() {
			continue
		}
		gv := g.Input(n.Tensor.GradData(), n.Tensor.Shape()...)
		host, err := gv.Host(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(host, func(v float32) bool { return v != 0 }) {
			t.Errorf("%s: gradient all zero", n.Name)
		}
	}
}

type Names struct {
	RunningMean, QKVProj, Layer1, FC, ClassToken *nn.Tensor
	Renamed                                      *nn.Tensor `nn:"pos_embedding"`
}

func (*Names) Forward(x *nn.Tensor) *nn.Tensor { return x }

func TestSnakeCaseNames(t *testing.T) {
	v := &Names{}
	for _, p := range []**nn.Tensor{&v.RunningMean, &v.QKVProj, &v.Layer1, &v.FC, &v.ClassToken, &v.Renamed} {
		*p = nn.Param([]int{1}, nn.Zeros)
	}
	named, err := nn.StateDict(nn.Fn(func(x *nn.Tensor) *nn.Tensor { return x }))
	if err != nil || len(named) != 0 {
		t.Errorf("a function module has tensors %v (%v)", named, err)
	}
	named, err = nn.StateDict(&struct {
		*Names // embedded: its tensors are the embedder's
	}{v})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range named {
		got = append(got, n.Name)
	}
	if want := []string{"running_mean", "qkv_proj", "layer1", "fc", "class_token", "pos_embedding"}; !slices.Equal(got, want) {
		t.Errorf("names %v; want %v", got, want)
	}
}
