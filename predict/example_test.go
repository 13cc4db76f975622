package predict_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/predict"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// Example classifies image files with a model: here an untrained one on 8x8 gray
// images, fed 16x16 PNGs that the transform resizes; with a trained model, Open opens
// its checkpoint, and a 3-channel model gets torchvision's evaluation transform by default.
func Example() {
	ctx := context.Background()
	dev, _ := gpu.Open("cpu")
	defer dev.Close()
	m, _ := train.Net("tiny", train.Shape{C: 1, H: 8, W: 8}, 10, nn.Sequential{nn.Fn(nn.Flatten), nn.NewLinear(64, 10, true)})
	tr, err := train.New(ctx, m, dev, nil, train.Config{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	p, err := predict.New(tr, predict.Config{
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
