package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// smallResNet has every new piece: BatchNorm, a strided block with a projection shortcut, an
// identity block, global average pooling.
func smallResNet(t testing.TB) *Model { return smallResNetOf(t, 10) }

// smallResNetOf is smallResNet with a head of the given classes.
func smallResNetOf(t testing.TB, classes int) *Model {
	t.Helper()
	m, err := tSequential("small-resnet", img8, classes,
		tConv(1, 4, 3, 1, tNoBias()), tBatchNorm(4), tReLU(),
		tResidual([]tLayer{tConv(4, 8, 3, 1, tStride(2), tNoBias()), tBatchNorm(8), tReLU(), tConv(8, 8, 3, 1, tNoBias()), tBatchNorm(8)},
			[]tLayer{tConv(4, 8, 1, 0, tStride(2), tNoBias()), tBatchNorm(8)}),
		tReLU(),
		tResidual([]tLayer{tConv(8, 8, 3, 1), tBatchNorm(8)}, nil), tReLU(),
		tAvgPool(), tLinear(8, classes))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readF32(t testing.TB, tr *Trainer, v kernels.F32) []float32 {
	t.Helper()
	host := make([]float32, v.Len)
	if err := tr.s.CopyD2H(unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)), v.Buf, 4*v.Off); err != nil {
		t.Fatal(err)
	}
	if err := tr.s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return host
}

// lossAndGrad runs a training-mode forward and backward pass on b without updating the weights
// and returns the loss.
func lossAndGrad(t testing.TB, tr *Trainer, b Batch, mean, std []float32) float64 {
	t.Helper()
	m := tr.m
	if err := tr.checkBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	r := &run{ops: tr.ops, s: tr.s, train: true}
	if err := tr.ops.NormalizeU8(tr.s, m.input.Slice(0, b.N*m.in.Len()), b.Images, m.in.C, m.in.H*m.in.W, mean, std); err != nil {
		t.Fatal(err)
	}
	logits, err := m.forward(r, b.N, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.ops.SoftmaxCrossEntropy(tr.s, m.loss, m.dlogits.Slice(0, b.N*m.classes), logits, b.Labels, b.N, m.classes); err != nil {
		t.Fatal(err)
	}
	if err := m.backward(r, b.N); err != nil {
		t.Fatal(err)
	}
	return float64(readF32(t, tr, m.loss)[0])
}

// TestModelGradients checks the backward pass through BatchNorm (training statistics), residual
// blocks (strided projection and identity), global average pooling and bias-free strided
// convolutions against central differences of the loss, for a sample of every parameter.
func TestModelGradients(t *testing.T) {
	f := newFixture(t, 16)
	tr, err := New(context.Background(), smallResNet(t), f.dev, optim.SGD{LR: 0.1}, Config{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	mean, std := f.train.Normalization()
	for b, err := range f.train.Batches(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		lossAndGrad(t, tr, b, mean, std)
		for _, p := range tr.m.params {
			grad := readF32(t, tr, p.G)
			w := readF32(t, tr, p.W)
			for _, i := range []int{0, len(w) / 2, len(w) - 1} {
				const h float32 = 1e-3 // small: a larger step carries ReLU kinks into the difference
				at := func(v float32) float64 {
					w[i] = v
					if err := upload(tr.s, p.W, slices.Clone(w)); err != nil {
						t.Fatal(err)
					}
					return lossAndGrad(t, tr, b, mean, std)
				}
				old := w[i]
				num := (at(old+h) - at(old-h)) / float64(2*h)
				at(old)
				if d := math.Abs(num - float64(grad[i])); d > 2e-3+0.05*math.Abs(num) {
					t.Errorf("%s[%d]: gradient %v; finite differences %v", p.Name, i, grad[i], num)
				}
			}
		}
		break
	}
}

func TestResNets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Shape
		classes int
		params  int // torchvision's count, or He et al.'s with projection shortcuts
		first   string
	}{
		{"resnet18", Shape{C: 3, H: 224, W: 224}, 1000, 11689512, "conv1.weight [64 3 7 7]"},
		{"resnet50", Shape{C: 3, H: 224, W: 224}, 1000, 25557032, "conv1.weight [64 3 7 7]"},
		{"resnet18", Shape{C: 3, H: 32, W: 32}, 10, 11689512 - 64*3*(49-9) - 513*990, "conv1.weight [64 3 3 3]"},
		// stem 432+32; stage 1: 3x(2x2304+64); stage 2: 4608+64+9216+64+512+64 then 2x(2x9216+128);
		// stage 3: 18432+128+36864+128+2048+128 then 2x(2x36864+256); fc 650.
		{"resnet20", Shape{C: 3, H: 32, W: 32}, 10, 272474, "conv1.weight [16 3 3 3]"},
		{"resnet8", Shape{C: 1, H: 28, W: 28}, 10, 0, "conv1.weight [16 1 3 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewModel(tc.name, tc.in, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			if tc.params != 0 && m.NumParams() != tc.params {
				t.Errorf("NumParams = %d; want %d", m.NumParams(), tc.params)
			}
			p0 := m.params[0]
			if got := fmt.Sprint(p0.Name, " ", p0.Shape); got != tc.first {
				t.Errorf("first tensor %q; want %q", got, tc.first)
			}
			names := map[string]bool{}
			for _, p := range m.tensors() {
				if names[p.Name] {
					t.Fatalf("tensor name %s twice", p.Name)
				}
				names[p.Name] = true
			}
			for _, want := range []string{"bn1.running_var", "layer1.0.conv1.weight", "layer3.0.downsample.1.running_mean", "fc.weight", "fc.bias"} {
				if !names[want] {
					t.Errorf("no tensor %s", want)
				}
			}
		})
	}
}

// TestPredict: Predict's classes give Evaluate's accuracy (both in evaluation mode, on the
// running statistics), the logits of a batch do not depend on its neighbours (no batch statistics
// at evaluation), and PredictBatch agrees with Predict.
func TestPredict(t *testing.T) {
	f := newFixture(t, 600)
	_, tr := fit(t, f, smallResNet(t), optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 2, LabelSmoothing: 0.1})
	ctx := context.Background()
	acc, err := tr.Evaluate(ctx, f.test)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tr.Predict(ctx, f.test)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 200 || len(p.Logits) != 200*10 || p.Classes != 10 {
		t.Fatalf("Predict: %d samples, %d logits, %d classes; want 200, 2000, 10", p.Len(), len(p.Logits), p.Classes)
	}
	if got := p.Accuracy(); got != acc || acc < 0.5 {
		t.Fatalf("Predict accuracy %v, Evaluate %v; want equal and >= 0.5 (chance is 0.1)", got, acc)
	}
	for i, l := range p.Labels {
		if l != f.test.labels[i] {
			t.Fatalf("label %d = %d; want %d (data order)", i, l, f.test.labels[i])
		}
	}
	mean, std := f.test.Normalization()
	for b, err := range f.test.Batches(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		one := Batch{Images: b.Images.Slice(b.Shape.Len(), 2*b.Shape.Len()), Labels: b.Labels.Slice(1, 2), N: 1, Shape: b.Shape}
		q, err := tr.PredictBatch(context.Background(), one, mean, std)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if d := math.Abs(float64(q.Logits[j] - p.Logits[10+j])); d > 1e-5 {
				t.Fatalf("sample 1 alone: logit %d = %v; in its batch %v", j, q.Logits[j], p.Logits[10+j])
			}
		}
		break
	}
}

func TestConfigRefused(t *testing.T) {
	dev := openCPU(t)
	for _, cfg := range []Config{{LabelSmoothing: 1}, {LabelSmoothing: -0.1}, {Precision: "fp8"}, {Precision: "BF16"}} {
		tr, err := New(context.Background(), smallResNet(t), dev, optim.SGD{LR: 0.1}, cfg)
		if !errors.Is(err, ErrConfig) {
			if tr != nil {
				tr.Close()
			}
			t.Fatalf("New with %+v: error %v; want ErrConfig", cfg, err)
		}
	}
	if _, err := New(context.Background(), smallResNet(t), dev, optim.SGD{LR: 0.1}, Config{Precision: "fp8"}); err == nil || !strings.Contains(err.Error(), "want fp32, bf16 or fp16") {
		t.Fatalf("precision fp8: error %v; want it to name the precisions", err)
	}
}

// TestNetRefuses: a module that does not fit its input or classes is refused with ErrModel,
// naming the model and the cause.
func TestNetRefuses(t *testing.T) {
	in := Shape{C: 4, H: 4, W: 4}
	for _, c := range []struct {
		name   string
		in     Shape
		module nn.Module
		want   string
	}{
		{"another number of classes", in, nn.Sequential{nn.Fn(nn.Flatten), nn.NewLinear(64, 5, true)},
			"m: output shape [1 5] for one image; want 10 classes"},
		{"a layer that does not take its input", in, nn.Sequential{nn.NewConv2d(3, 4, 1, nn.ConvOptions{Stride: 1}, true), nn.Fn(nn.Flatten), nn.NewLinear(64, 10, true)},
			"m: nn: conv2d of input [1 4 4 4], weight [4 3 1 1]"},
		{"no module", in, nil, "m: input 4x4x4, 10 classes"},
		{"an empty input", Shape{C: 4, H: 0, W: 4}, nn.Sequential{nn.Fn(nn.Flatten), nn.NewLinear(0, 10, true)}, "m: input 4x0x4"},
	} {
		_, err := Net("m", c.in, 10, c.module)
		if !errors.Is(err, ErrModel) || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: %v; want ErrModel and %q", c.name, err, c.want)
		}
	}
}
