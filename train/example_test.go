package train

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/transforms"
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
	// mlp 1x28x28->10: flatten - linear 784->512 - relu - linear 512->256 - relu - linear 256->10
	// 535818 parameters
}

// ExampleTrainer_Fit trains a small network on synthetic 8x8 images held in memory. With real
// data, the Data sources are train.FromLoader(loader) over loaders built with the trainer's Stream.
func ExampleTrainer_Fit() {
	ctx := context.Background()
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	m, _ := Sequential("tiny", Shape{C: 1, H: 8, W: 8}, 10, Flatten(), Linear(64, 32), ReLU(), Linear(32, 10))
	tr, err := New(ctx, m, dev, SGD{LR: 0.05, Momentum: 0.9}, Config{Epochs: 2, Seed: 1, Schedule: Cosine(0)})
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

// ExampleResidual builds a small residual network of one's own: a stem, a downsampling block with
// a projection shortcut, an identity block, global average pooling and a classifier.
func ExampleResidual() {
	block := func(in, out, stride int) []Layer {
		main := []Layer{
			Conv2D(in, out, 3, 1, Stride(stride), NoBias()), BatchNorm2D(out), ReLU(),
			Conv2D(out, out, 3, 1, NoBias()), BatchNorm2D(out),
		}
		var shortcut []Layer // identity
		if stride != 1 || in != out {
			shortcut = []Layer{Conv2D(in, out, 1, 0, Stride(stride), NoBias()), BatchNorm2D(out)}
		}
		return []Layer{Residual(main, shortcut), ReLU()}
	}
	layers := []Layer{Conv2D(3, 16, 3, 1, NoBias()), BatchNorm2D(16), ReLU()}
	layers = append(layers, block(16, 32, 2)...)
	layers = append(layers, block(32, 32, 1)...)
	layers = append(layers, GlobalAvgPool(), Linear(32, 10))
	m, err := Sequential("my-resnet", Shape{C: 3, H: 32, W: 32}, 10, layers...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.NumParams(), "parameters")
	for _, p := range m.Params()[:3] {
		fmt.Println(p.Name, p.Shape, "decayed:", p.Decayed())
	}
	// Output:
	// 33882 parameters
	// 0.conv2d.weight [16 3 3 3] decayed: true
	// 1.batchnorm.weight [16] decayed: false
	// 1.batchnorm.bias [16] decayed: false
}

// ExamplePredictor classifies image files with a model: here an untrained one on 8x8 gray
// images, fed 16x16 PNGs that the transform resizes; with a trained model, OpenPredictor opens
// its checkpoint, and a 3-channel model gets torchvision's evaluation transform by default.
func ExamplePredictor() {
	ctx := context.Background()
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	m, _ := Sequential("tiny", Shape{C: 1, H: 8, W: 8}, 10, Flatten(), Linear(64, 10))
	tr, err := New(ctx, m, dev, nil, Config{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	p, err := NewPredictor(tr, PredictorConfig{
		Transform: transforms.Compose(transforms.ResizeTo(8, 8), transforms.Normalize([]float32{0.5}, []float32{0.25})),
		TopK:      3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	var files []transforms.Input
	for shade := range 2 {
		img := image.NewGray(image.Rect(0, 0, 16, 16))
		for i := range img.Pix {
			img.Pix[i] = uint8(i*(shade+1)) % 255
		}
		var b bytes.Buffer
		png.Encode(&b, img)
		files = append(files, transforms.Input{Encoded: b.Bytes()})
	}
	files = append(files, transforms.Input{Encoded: []byte("not an image")})
	if _, err := p.Predict(ctx, files); err != nil {
		fmt.Println("error names the file:", strings.Contains(err.Error(), "image 2"))
	}
	preds, err := p.Predict(ctx, files[:2])
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, pr := range preds {
		var sum float32
		for _, v := range pr.Probs {
			sum += v
		}
		fmt.Printf("image %d: %d logits, top-3 %d classes, best has the largest probability: %v, probabilities sum to %.2f\n",
			i, len(pr.Logits), len(pr.Top), slices.Max(pr.Probs) == pr.Probs[pr.Top[0]], sum)
	}
	// Output:
	// error names the file: true
	// image 0: 10 logits, top-3 3 classes, best has the largest probability: true, probabilities sum to 1.00
	// image 1: 10 logits, top-3 3 classes, best has the largest probability: true, probabilities sum to 1.00
}
