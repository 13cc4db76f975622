package transforms_test

import (
	"fmt"

	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/transforms"
)

func Example() {
	p := transforms.Train(224) // RandomResizedCrop(224), HorizontalFlip(0.5), Normalize(ImageNet)
	shape, _ := p.OutShape(transforms.Shape{C: 3, H: 375, W: 500})
	mean, std, _ := p.Normalization()
	fmt.Println("out", shape, "mean", mean, "std", std)

	// One Worker per goroutine; one rng.Sample reset per sample makes the crop depend only on
	// (seed, epoch, index).
	w, r := p.NewWorker(), rng.NewSample()
	pixels := make([]byte, 375*500*3) // a black 500x375 RGB image, HWC
	dst := make([]byte, shape.Len())  // in real use: the sample's place in a pinned batch slot
	r.Reset(42, 0, 7)
	err := w.Apply(dst, transforms.Input{Pixels: pixels, H: 375, W: 500, C: 3}, r)
	fmt.Println(len(dst), err)
	// Output:
	// out 3x224x224 mean [0.485 0.456 0.406] std [0.229 0.224 0.225]
	// 150528 <nil>
}

func ExampleWorker_ApplyFloat32() {
	p := transforms.Compose(transforms.CenterCrop(2), transforms.Normalize([]float32{0.5}, []float32{0.5}))
	in := transforms.Input{Pixels: []byte{0, 51, 102, 153, 204, 255, 0, 0, 0}, H: 3, W: 3, C: 1}
	dst := make([]float32, 4)
	err := p.NewWorker().ApplyFloat32(dst, transforms.CHW, in, nil)
	fmt.Println(dst, err)
	// Output:
	// [-1 -0.6 0.20000005 0.6] <nil>
}

func ExampleCompose() {
	// A 4x4 gray image, mirrored and center-cropped to 2x2. HorizontalFlip(1) always flips; r
	// is still the sample's generator, as in real use.
	p := transforms.Compose(transforms.HorizontalFlip(1), transforms.CenterCrop(2))
	in := transforms.Input{Pixels: []byte{
		0, 1, 2, 3,
		10, 11, 12, 13,
		20, 21, 22, 23,
		30, 31, 32, 33,
	}, H: 4, W: 4, C: 1}
	r := rng.NewSample()
	r.Reset(1, 0, 0)
	dst := make([]byte, 4)
	err := p.NewWorker().Apply(dst, in, r)
	fmt.Println(p, dst, err)
	// Output:
	// Compose(HorizontalFlip(1), CenterCrop(2)) [12 11 22 21] <nil>
}

func ExampleDecodeInfo() {
	// The smallest valid GIF header: a 3x2 logical screen.
	gif := []byte("GIF89a\x03\x00\x02\x00\x00\x00\x00,\x00\x00\x00\x00\x03\x00\x02\x00\x00\x02\x02\x04\x01\x00;")
	info, err := transforms.DecodeInfo(gif)
	fmt.Printf("%+v %v\n", info, err)
	// Output:
	// {Format:gif Width:3 Height:2 Orientation:1 DecodedBytes:24} <nil>
}
