package train

import (
	"context"
	"fmt"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

func ExampleNewModel() {
	m, err := NewModel("mlp", Shape{C: 1, H: 28, W: 28}, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m)
	fmt.Println(m.NumParams(), "parameters")
	// Output:
	// mlp 1x28x28->10
	// 535818 parameters
}

// ExampleTrainer_Fit trains a small network on synthetic 8x8 images held in memory. With real
// data, the Data sources are train.FromLoader(loader) over loaders built with the trainer's Stream.
func ExampleTrainer_Fit() {
	ctx := context.Background()
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	m, _ := Net("tiny", Shape{C: 1, H: 8, W: 8}, 10,
		nn.Sequential{nn.Fn(nn.Flatten), nn.NewLinear(64, 32, true), nn.Fn(nn.ReLU), nn.NewLinear(32, 10, true)})
	tr, err := New(ctx, m, dev, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 1, Schedule: optim.Cosine(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	imgs, labels := synthetic(1000, 1)
	trainData := newMemData(dev, imgs, labels, Shape{C: 1, H: 8, W: 8}, 32, true, 1)
	defer trainData.close()
	timgs, tlabels := synthetic(200, 2)
	testData := newMemData(dev, timgs, tlabels, Shape{C: 1, H: 8, W: 8}, 100, false, 0)
	defer testData.close()

	res, err := tr.Fit(ctx, trainData, testData)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("epochs:", res.Epochs, "accuracy above 90%:", res.TestAcc > 0.9)
	// Output: epochs: 2 accuracy above 90%: true
}

// resBlock is a residual block of one's own, a module of package nn: its tensors are named after
// its fields ("conv1.weight", "bn1.running_mean", "shortcut.0.weight"), and nn derives its
// backward pass.
type resBlock struct {
	Conv1, Conv2 *nn.Conv2dLayer
	BN1, BN2     *nn.BatchNorm2dLayer
	Shortcut     nn.Sequential // empty: the identity
}

func newResBlock(in, out, stride int) *resBlock {
	b := &resBlock{
		Conv1: nn.NewConv2d(in, out, 3, nn.ConvOptions{Stride: stride, Padding: 1}, false), BN1: nn.NewBatchNorm2d(out),
		Conv2: nn.NewConv2d(out, out, 3, nn.ConvOptions{Stride: 1, Padding: 1}, false), BN2: nn.NewBatchNorm2d(out),
	}
	if stride != 1 || in != out {
		b.Shortcut = nn.Sequential{nn.NewConv2d(in, out, 1, nn.ConvOptions{Stride: stride}, false), nn.NewBatchNorm2d(out)}
	}
	return b
}

func (b *resBlock) Forward(x *nn.Tensor) *nn.Tensor {
	h := b.BN2.Forward(b.Conv2.Forward(nn.ReLU(b.BN1.Forward(b.Conv1.Forward(x)))))
	s := x
	if len(b.Shortcut) > 0 {
		s = b.Shortcut.Forward(x)
	}
	return nn.ReLU(nn.Add(h, s))
}

// ExampleNet builds a small residual network of one's own: a stem, a downsampling block with a
// projection shortcut, an identity block, global average pooling and a classifier.
func ExampleNet() {
	net := nn.Dict{
		{Name: "stem", Module: nn.Sequential{nn.NewConv2d(3, 16, 3, nn.ConvOptions{Stride: 1, Padding: 1}, false), nn.NewBatchNorm2d(16), nn.Fn(nn.ReLU)}},
		{Name: "block1", Module: newResBlock(16, 32, 2)},
		{Name: "block2", Module: newResBlock(32, 32, 1)},
		{Name: "pool", Module: nn.Fn(func(x *nn.Tensor) *nn.Tensor { return nn.Flatten(nn.GlobalAvgPool(x)) })},
		{Name: "fc", Module: nn.NewLinear(32, 10, true)},
	}
	m, err := Net("my-resnet", Shape{C: 3, H: 32, W: 32}, 10, net)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.NumParams(), "parameters")
	for _, p := range m.Params()[:3] {
		fmt.Println(p.Name, p.Shape, "decayed:", p.Decayed())
	}
	fmt.Println(m.Params()[len(m.Params())-3].Name)
	// Output:
	// 33882 parameters
	// stem.0.weight [16 3 3 3] decayed: true
	// stem.1.weight [16] decayed: false
	// stem.1.bias [16] decayed: false
	// block2.bn2.bias
}
