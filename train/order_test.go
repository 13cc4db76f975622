package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
)

func TestExecOrder(t *testing.T) {
	for _, tc := range []struct {
		layers []Layer
		want   []int
	}{
		{[]Layer{Conv2D(1, 4, 3, 1), ReLU(), MaxPool2D(2), Flatten(), Linear(4, 2)}, []int{0, 2, 1, 3, 4}},
		{[]Layer{ReLU(), MaxPool2D(2), MaxPool2D(2)}, []int{1, 2, 0}},         // past a run of poolings
		{[]Layer{ReLU(), ReLU(), MaxPool2D(2)}, []int{0, 2, 1}},               // only the adjacent one
		{[]Layer{ReLU(), Dropout(0.5), MaxPool2D(2)}, []int{0, 1, 2}},         // not adjacent
		{[]Layer{MaxPool2D(2), ReLU(), Flatten(), ReLU()}, []int{0, 1, 2, 3}}, // no pooling after
		{[]Layer{Residual([]Layer{ReLU()}, nil), MaxPool2D(2)}, []int{0, 1}},  // a block is not a ReLU
		{[]Layer{ReLU(), Residual([]Layer{MaxPool2D(2)}, nil)}, []int{0, 1}},  // nor a pooling
		{[]Layer{Conv2D(1, 4, 3, 1), BatchNorm2D(4), ReLU(), maxPool2D(3, 2, 1)}, []int{0, 1, 3, 2}},
	} {
		if got := execOrder(tc.layers); !slices.Equal(got, tc.want) {
			t.Errorf("execOrder(%v) = %v; want %v", tc.layers, got, tc.want)
		}
	}
}

// TestCNNWrittenAsGiven: the "cnn" runs its poolings before their ReLUs but keeps the layers,
// indices, parameter names and description as written (checkpoints and exports carry them); so
// does resnet18's stem.
func TestCNNWrittenAsGiven(t *testing.T) {
	m, err := NewModel("cnn", Shape{C: 1, H: 28, W: 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 2, 1, 3, 5, 4, 6, 7, 8, 9}; !slices.Equal(m.order, want) {
		t.Errorf("cnn runs its layers in the order %v; want %v", m.order, want)
	}
	if want := "cnn 1x28x28->10: conv2d 1->32 5x5 pad 2 - relu - maxpool 2x2 - conv2d 32->64 5x5 pad 2 - relu - maxpool 2x2 - flatten - linear 3136->128 - " +
		"relu - linear 128->10"; m.String() != want {
		t.Errorf("String() = %q; want %q", m.String(), want)
	}
	var names []string
	for _, p := range m.Params() {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names,
		" "), "0.conv2d.weight 0.conv2d.bias 3.conv2d.weight 3.conv2d.bias 7.linear.weight 7.linear.bias 9.linear.weight 9.linear.bias"; got != want {
		t.Errorf("parameter names %s; want %s", got, want)
	}
	// The ReLUs were set up on the pooled shapes: a quarter of the values.
	if r := nnLayer(m.layers[1]); !slices.Equal(r.in, []int{32, 14, 14}) {
		t.Errorf("first ReLU: input %v per sample; want [32 14 14] (after the pooling)", r.in)
	}
	// torchvision's stem from 33 px up: conv1 - bn1 - relu - maxpool 3x3 stride 2 pad 1.
	r18, err := NewModel("resnet18", Shape{C: 3, H: 64, W: 64}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := r18.order[:5]; !slices.Equal(got, []int{0, 1, 3, 2, 4}) {
		t.Errorf("resnet18 at 64 px runs its stem in the order %v; want [0 1 3 2 4]", got)
	}
}

var img10 = Shape{C: 1, H: 10, W: 10}

// poolNet is conv 1x1 - relu - maxpool 2 - conv 3x3 - batchnorm - relu - maxpool 3x3 stride 2
// pad 1 (a ResNet stem's, whose 5x5 input leaves windows on the padding at the bottom and right)
// - flatten - linear over 1x10x10 images. With written, a Dropout(0), which passes values and
// gradients through unchanged, separates each ReLU from its pooling, so that the layers run in the
// written order; the parameters are the same tensors in the same order and are initialized alike.
func poolNet(t testing.TB, written bool) *Model {
	t.Helper()
	sep := func() []Layer {
		if written {
			return []Layer{Dropout(0)}
		}
		return nil
	}
	ls := append([]Layer{Conv2D(1, 4, 1, 0), ReLU()}, sep()...)
	ls = append(ls, MaxPool2D(2), Conv2D(4, 4, 3, 1), BatchNorm2D(4), ReLU())
	ls = append(ls, sep()...)
	ls = append(ls, maxPool2D(3, 2, 1), Flatten(), Linear(4*3*3, 10))
	m, err := Sequential("poolnet", img10, 10, ls...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

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
		order        []int
		loss         float32
		logits       []float32
		grads, after [][]float32
		predicted    []float32
	}
	runModel := func(written bool) result {
		m := poolNet(t, written)
		tr, err := New(context.Background(), m, dev, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		// The first convolution passes the pixels (channel 0), their negation (1), -1 (2: no
		// positive value) and 0 (3: all tied at 0).
		conv := m.layerParams[0]
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
		res := result{order: m.order}
		res.loss = float32(lossAndGrad(t, tr, batch, mean, std))
		res.logits = readF32(t, tr, nnLayer(m.layers[len(m.layers)-1]).y.Data())
		for _, p := range m.params {
			res.grads = append(res.grads, readF32(t, tr, p.G))
		}
		// Both poolings see what the test is about.
		var bn *nnModule
		for _, l := range m.layers {
			if kindOf(l) == "batchnorm" {
				bn = nnLayer(l)
			}
		}
		for _, c := range []struct {
			x kernels.F32
			g kernels.Pool2D
		}{
			{nnLayer(m.layers[0]).y.Data(), kernels.Pool2D{N: batch.N, C: 4, H: 10, W: 10, K: 2, Stride: 2}},
			{bn.y.Data(), kernels.Pool2D{N: batch.N, C: 4, H: 5, W: 5, K: 3, Stride: 2, Pad: 1}},
		} {
			tied, nonPositive := windowKinds(readF32(t, tr, c.x), c.g)
			if tied == 0 || nonPositive == 0 {
				t.Fatalf("pooling %+v: %d windows with a tied positive maximum, %d without a positive value; want some of each", c.g, tied, nonPositive)
			}
		}
		if _, err := tr.Fit(context.Background(), train, test); err != nil {
			t.Fatal(err)
		}
		res.after = weights(t, tr)
		p, err := tr.Predict(context.Background(), test)
		if err != nil {
			t.Fatal(err)
		}
		res.predicted = p.Logits
		return res
	}
	got, want := runModel(false), runModel(true)
	if !slices.Equal(got.order, []int{0, 2, 1, 3, 4, 6, 5, 7, 8}) || !slices.Equal(want.order, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("orders %v and %v; want the poolings first in the first only", got.order, want.order)
	}
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
