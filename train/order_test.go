package train

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
)

// TestBuiltinNames: the built-in cnn and resnet18 keep the tensor names checkpoints and exports
// carry.
func TestBuiltinNames(t *testing.T) {
	for _, tc := range []struct {
		model string
		in    Shape
		want  string
	}{
		{"cnn", Shape{C: 1, H: 28, W: 28}, "0.conv2d.weight 0.conv2d.bias 3.conv2d.weight 3.conv2d.bias 7.linear.weight 7.linear.bias 9.linear.weight 9.linear.bias"},
		{"mlp", Shape{C: 1, H: 28, W: 28}, "1.linear.weight 1.linear.bias 3.linear.weight 3.linear.bias 5.linear.weight 5.linear.bias"},
		{"resnet8", Shape{C: 1, H: 28, W: 28}, "conv1.weight bn1.weight bn1.bias layer1.0.conv1.weight layer1.0.bn1.weight layer1.0.bn1.bias"},
	} {
		m, err := NewModel(tc.model, tc.in, 10)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range m.Params() {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, " "); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: parameter names %s; want %s...", tc.model, got, tc.want)
		}
		if want := tc.model + " " + tc.in.String() + "->10"; m.String() != want {
			t.Errorf("String() = %q; want %q", m.String(), want)
		}
	}
}

var img10 = Shape{C: 1, H: 10, W: 10}

// poolNet is conv 1x1 - relu - maxpool 2 - conv 3x3 - batchnorm - relu - maxpool 3x3 stride 2
// pad 1 (a ResNet stem's, whose 5x5 input leaves windows on the padding at the bottom and right)
// - flatten - linear over 1x10x10 images, with each ReLU run after its pooling unless written
// (as the built-in cnn and ResNets run theirs); the tensors are the same in the same order, and
// are initialized alike. The probes see the inputs of the two poolings.
func poolNet(t testing.TB, written bool) (*Model, [2]*probe) {
	t.Helper()
	probes := [2]*probe{{}, {}}
	relu := tReLU()
	pair := func(pool tLayer, p *probe) []tLayer {
		if written {
			return []tLayer{relu, tModule("probe", p), pool}
		}
		return []tLayer{tModule("probe", p), pool, relu}
	}
	ls := append([]tLayer{tConv(1, 4, 1, 0)}, pair(tMaxPool(2), probes[0])...)
	ls = append(ls, tConv(4, 4, 3, 1), tBatchNorm(4))
	ls = append(ls, pair(tModule("maxpool", nn.MaxPool2dLayer{K: 3, Stride: 2, Padding: 1}), probes[1])...)
	ls = append(ls, tFlatten(), tLinear(4*3*3, 10))
	m, err := tSequential("poolnet", img10, 10, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return m, probes
}

// probe passes its input through and keeps it.
type probe struct{ x *nn.Tensor }

func (p *probe) Forward(x *nn.Tensor) *nn.Tensor { p.x = x; return x }

// tiedImages are n 10x10 images of four grey levels, every eighth one flat, so that pooling
// windows often tie at their maximum, and labels.
func tiedImages(n int) ([]uint8, []int32) {
	r := rand.New(rand.NewPCG(5, 6))
	imgs, labels := make([]uint8, n*100), make([]int32, n)
	levels := []uint8{0, 60, 120, 255}
	for i := range n {
		labels[i] = int32(r.IntN(10))
		img := imgs[i*100 : (i+1)*100]
		for j := range img {
			img[j] = levels[r.IntN(4)]
			if i%8 == 0 {
				img[j] = levels[i%4]
			}
		}
	}
	return imgs, labels
}

// windowKinds counts the windows of a max pooling over x whose maximum is positive and reached
// more than once, and those without a positive value.
func windowKinds(x []float32, g kernels.Pool2D) (tied, nonPositive int) {
	oh, ow := g.OutH(), g.OutW()
	for p := range g.N * g.C {
		plane := x[p*g.H*g.W : (p+1)*g.H*g.W]
		for oy := range oh {
			for ox := range ow {
				best, count := float32(math.Inf(-1)), 0
				for y := max(0, oy*g.Stride-g.Pad); y < min(g.H, oy*g.Stride-g.Pad+g.K); y++ {
					for x := max(0, ox*g.Stride-g.Pad); x < min(g.W, ox*g.Stride-g.Pad+g.K); x++ {
						switch v := plane[y*g.W+x]; {
						case v > best:
							best, count = v, 1
						case v == best:
							count++
						}
					}
				}
				if best <= 0 {
					nonPositive++
				} else if count > 1 {
					tied++
				}
			}
		}
	}
	return tied, nonPositive
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestPoolBeforeReLUExact: a model whose ReLUs run after their poolings gives the loss, logits and
// parameter gradients of the written order bit for bit, with tied maxima, windows without a
// positive value and a padded 3x3 stride-2 pooling, and trains and predicts to the same bits.
// TestCUDAPoolBeforeReLUExact runs the same on the CUDA op set.
func TestPoolBeforeReLUExact(t *testing.T) { poolBeforeReLUExact(t, openCPU(t)) }

func poolBeforeReLUExact(t *testing.T, dev gpu.Device) {
	imgs, labels := tiedImages(96)
	train := newMemData(dev, imgs, labels, img10, 32, true, 3)
	test := newMemData(dev, imgs[:32*100], labels[:32], img10, 32, false, 0)
	t.Cleanup(func() { train.close(); test.close() })
	mean, std := train.Normalization()

	type result struct {
		loss         float32
		logits       []float32
		grads, after [][]float32
		predicted    []float32
	}
	runModel := func(written bool) result {
		m, probes := poolNet(t, written)
		tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		// The first convolution passes the pixels (channel 0), their negation (1), -1 (2: no
		// positive value) and 0 (3: all tied at 0).
		conv := m.all[:2]
		if err := upload(tr.s, conv[0].W, []float32{1, -1, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if err := upload(tr.s, conv[1].W, []float32{0, 0, -1, 0}); err != nil {
			t.Fatal(err)
		}
		var batch Batch // valid until test's next pass (the Fit's evaluation)
		for b, err := range test.Batches(context.Background(), 0) {
			if err != nil {
				t.Fatal(err)
			}
			batch = b
		}
		var res result
		res.loss = float32(lossAndGrad(t, tr, batch, mean, std))
		res.logits = readF32(t, tr, m.y.Data())
		for _, p := range m.params {
			res.grads = append(res.grads, readF32(t, tr, p.G))
		}
		// Both poolings see what the test is about.
		for _, c := range []struct {
			x kernels.F32
			g kernels.Pool2D
		}{
			{probes[0].x.Data(), kernels.Pool2D{N: batch.N, C: 4, H: 10, W: 10, K: 2, Stride: 2}},
			{probes[1].x.Data(), kernels.Pool2D{N: batch.N, C: 4, H: 5, W: 5, K: 3, Stride: 2, Pad: 1}},
		} {
			tied, nonPositive := windowKinds(readF32(t, tr, c.x), c.g)
			if tied == 0 || nonPositive == 0 {
				t.Fatalf("pooling %+v: %d windows with a tied positive maximum, %d without a positive value; want some of each", c.g, tied, nonPositive)
			}
		}
		if _, err := tr.Fit(context.Background(), train, test); err != nil {
			t.Fatal(err)
		}
		res.after = modelWeights(t, tr)
		p, err := tr.Predict(context.Background(), test)
		if err != nil {
			t.Fatal(err)
		}
		res.predicted = p.Logits
		return res
	}
	got, want := runModel(false), runModel(true)
	if math.Float32bits(got.loss) != math.Float32bits(want.loss) {
		t.Errorf("loss %v; written order %v", got.loss, want.loss)
	}
	if !sameBits(got.logits, want.logits) {
		t.Errorf("training-mode logits differ from the written order's:\n%v\n%v", got.logits[:10], want.logits[:10])
	}
	for i := range got.grads {
		if !sameBits(got.grads[i], want.grads[i]) {
			t.Errorf("gradient of parameter %d differs from the written order's:\n%v\n%v", i, got.grads[i], want.grads[i])
		}
	}
	for i := range got.after {
		if !sameBits(got.after[i], want.after[i]) {
			t.Errorf("tensor %d after two epochs differs from the written order's", i)
		}
	}
	if !sameBits(got.predicted, want.predicted) {
		t.Errorf("evaluation-mode logits differ from the written order's")
	}
}
