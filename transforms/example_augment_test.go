package transforms_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/stoke-ml/stoke/transforms"
)

// torchvision's training recipe with TrivialAugmentWide and RandomErasing: the policy and the
// erasing follow the crop and flip; the erasing value is ImageNet's mean in uint8, 0 once the
// device normalizes. The same sample seed always gives the same bytes.
func ExampleTrivialAugmentWide() {
	p := transforms.Train(8).Append(
		transforms.TrivialAugmentWide(),
		transforms.RandomErasingWith(0.25, [2]float64{0.02, 0.33}, [2]float64{0.3, 3.3}, []byte{124, 116, 104}),
	)
	fmt.Println(strings.ReplaceAll(p.String(), "), ", "),\n")) // a step a line
	in := transforms.Input{Pixels: make([]byte, 12*10*3), H: 10, W: 12, C: 3}
	for i := range in.Pixels {
		in.Pixels[i] = byte(i * 7)
	}
	a, b := make([]byte, 3*8*8), make([]byte, 3*8*8)
	w := p.NewWorker()
	errA := w.Apply(a, in, rand.New(rand.NewPCG(1, 5)))
	errB := w.Apply(b, in, rand.New(rand.NewPCG(1, 5)))
	fmt.Println(errA, errB, string(a) == string(b))

	// Geometry after a policy would not move what it drew.
	_, err := transforms.Compose(transforms.TrivialAugmentWide(), transforms.CenterCrop(4)).OutShape(transforms.Shape{C: 3, H: 10, W: 12})
	fmt.Println(strings.Replace(err.Error(), " (", "\n(", 1))
	// Output:
	// Compose(RandomResizedCrop(8, scale=[0.08 1], ratio=[0.75 1.3333333333333333]),
	// HorizontalFlip(0.5),
	// Normalize([0.485 0.456 0.406], [0.229 0.224 0.225]),
	// TrivialAugmentWide(bins=31),
	// RandomErasing(p=0.25, scale=[0.02 0.33], ratio=[0.3 3.3], value=[124 116 104]))
	// <nil> <nil> true
	// transforms: CenterCrop(4): geometry after a step that works on the output pixels
	// (RandomRotation, an augmentation policy, RandomAffine, RandomPerspective, RandomErasing, GaussianBlur, Plan.Pixels): put it before them: invalid transform
}
