package models_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/pyoracle"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// convNetNames are the named builders of the convolutional families, each torchvision's
// constructor of the same name.
var convNetNames = []string{
	"convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
	"resnet34", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
	"wide_resnet50_2", "wide_resnet101_2",
	"regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf",
	"regnet_y_32gf", "regnet_y_128gf", "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf",
	"regnet_x_8gf", "regnet_x_16gf", "regnet_x_32gf",
}

// TestTorchvisionShapes: every named builder of the zoo (convNetNames, mobileNames, vitNames,
// swinNames) has torchvision's parameters: the same names with the same shapes (so torchvision's
// weights load strictly), and so the same parameter count, for 224 px RGB images and 5 classes.
// One Python process lists them all.
func TestTorchvisionShapes(t *testing.T) {
	py := pyoracle.Python(t, "torch", "torchvision", "safetensors", "numpy")
	const classes = 5
	names := slices.Concat(convNetNames, mobileNames, vitNames, swinNames)
	var want map[string]map[string][]int
	pythonJSON(t, &want, py, "torchvision_shapes.py", append([]string{"5"}, names...)...)
	for _, name := range names {
		checkShapes(t, name, classes, want[name], "torchvision's")
	}
}

// checkShapes checks that the zoo's model spec, built for 224 px RGB images and the given number
// of classes, has the parameters want (Python's named_parameters, from origin): the same names
// with the same shapes, and so the same parameter count.
func checkShapes(t *testing.T, spec string, classes int, want map[string][]int, origin string) {
	t.Helper()
	m, err := train.NewModel(spec, train.Shape{C: 3, H: 224, W: 224}, classes)
	if err != nil {
		t.Errorf("%s: %v", spec, err)
		return
	}
	got := map[string][]int{}
	for _, p := range m.Params() {
		got[p.Name] = p.Shape
	}
	total := 0
	for p, shape := range want {
		n := 1
		for _, d := range shape {
			n *= d
		}
		total += n
		if !slices.Equal(got[p], shape) {
			t.Errorf("%s: %s: shape %v; %s %v", spec, p, got[p], origin, shape)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: parameter %s is not %s", spec, p, origin)
		}
	}
	if m.NumParams() != total || total == 0 {
		t.Errorf("%s: %d parameters; %s has %d", spec, m.NumParams(), origin, total)
	}
}

// TestConvNeXtTrains: a small ConvNeXt learns ten classes of synthetic 32 px grayscale images
// (a bright bar whose row is the class, on noise) on the CPU: the second epoch's training loss
// is below the first's and the test accuracy is well above chance.
func TestConvNeXtTrains(t *testing.T) {
	const classes, size = 10, 32
	in := train.Shape{C: 1, H: size, W: size}
	m, err := train.NewModel("convnext(width_1=8,width_2=16,width_3=32,width_4=64,depth_1=1,depth_2=1,depth_3=1,depth_4=1)", in, classes)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr, err := train.New(context.Background(), m, dev, optim.AdamW{LR: 2e-3, WeightDecay: 0.05}, train.Config{Epochs: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	r := rand.New(rand.NewPCG(5, 6))
	images := func(n int) []loaders.Sample {
		s := make([]loaders.Sample, n)
		for i := range s {
			label := r.IntN(classes)
			px := make([]uint8, size*size)
			for j := range px {
				px[j] = uint8(r.IntN(96))
			}
			for y := 3 * label; y < 3*label+2; y++ {
				for x := 4; x < size-4; x++ {
					px[y*size+x] = 255
				}
			}
			s[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: size, W: size, C: 1}, Label: label}
		}
		return s
	}
	load := func(s []loaders.Sample, shuffle bool) *loaders.Loader {
		l, err := loaders.New(loaders.NewMemory(loaders.Info{Name: "bars", NumClasses: classes, Shape: in,
			Mean: []float32{0.3}, Std: []float32{0.3}}, s),
			loaders.Config{Batch: 30, Workers: 1, Shuffle: shuffle, Seed: 1, Device: dev, Stream: tr.Stream()})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	trainData, testData := load(images(600), true), load(images(200), false)
	defer trainData.Close()
	defer testData.Close()
	res, err := tr.Fit(t.Context(), train.FromLoader(trainData), train.FromLoader(testData))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("losses %.3f then %.3f, test accuracy %.3f, %.1f s", res.History[0].TrainLoss, res.History[1].TrainLoss, res.TestAcc, res.Seconds)
	if res.History[1].TrainLoss >= res.History[0].TrainLoss || res.TestAcc < 0.5 {
		t.Errorf("losses %.3f then %.3f, test accuracy %.3f: want a falling loss and accuracy at least 0.5",
			res.History[0].TrainLoss, res.History[1].TrainLoss, res.TestAcc)
	}
}

// TestConvNetArguments: the generic builders take their arguments by name and refuse bad ones
// with an error naming the argument or the constraint; a model's name records what was given.
func TestConvNetArguments(t *testing.T) {
	in := train.Shape{C: 3, H: 32, W: 32}
	const cnx = "convnext(width_1=8,width_2=16,width_3=24,width_4=32,depth_1=1,depth_2=1,depth_3=1"
	for _, tc := range []struct {
		spec string
		in   train.Shape
		want string
	}{
		{cnx + ")", in, "depth_4 is required"},
		{cnx + ",depth_4=1)", train.Shape{C: 1, H: 28, W: 28}, "at least 32x32"},
		{cnx + ",depth_4=0)", in, "stage 4: width 32, depth 0"},
		{"convnext_tiny(width_1=8)", in, `argument "width_1=8"`},
		{"resnet(layers_1=1,layers_2=1,layers_3=1,layers_4=1,bottleneck=0,groups=2)", in, "basic blocks take groups=1"},
		{"resnet(layers_1=1,layers_2=1,layers_3=1,layers_4=1,bottleneck=2)", in, "bottleneck=2"},
		{"resnext50_32x4d(groups=2)", in, `argument "groups=2"`},
		{"regnet(depth_1=1,depth_2=1,depth_3=1,depth_4=1,width_1=8,width_2=16,width_3=20,width_4=32,group_width=8)", in,
			"stage 3: depth 1, width 20, group width 8"},
		{"regnet(depth_1=1,depth_2=1,depth_3=1,depth_4=1,width_1=8,width_2=16,width_3=24,width_4=32)", in, "group_width is required"},
	} {
		_, err := train.NewModel(tc.spec, tc.in, 10)
		if !errors.Is(err, train.ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want ErrModel saying %q", tc.spec, err, tc.want)
		}
	}
	for _, name := range []string{
		"convnext_tiny(stochastic_depth_prob=0.2)", "resnet34", "regnet_x_400mf",
		"resnet(layers_1=2,layers_2=1,layers_3=1,layers_4=1,bottleneck=0)",
		"regnet(depth_1=1,depth_2=1,depth_3=1,depth_4=1,width_1=8,width_2=16,width_3=24,width_4=32,group_width=8,stem_width=16)",
	} {
		m, err := train.NewModel(name, train.Shape{C: 1, H: 32, W: 32}, 10)
		if err != nil {
			t.Errorf("NewModel(%q): %v", name, err)
		} else if m.Name() != name {
			t.Errorf("NewModel(%q) is named %q", name, m.Name())
		}
	}
}
