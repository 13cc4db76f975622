package train

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/transforms"
)

// tinyPredictTrainer is an optimizer-less trainer of a small 1x8x8 network with seeded weights.
func tinyPredictTrainer(t *testing.T, dev gpu.Device) *Trainer {
	t.Helper()
	m, err := tSequential("tiny", Shape{C: 1, H: 8, W: 8}, 10, tFlatten(), tLinear(64, 32), tReLU(), tLinear(32, 10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), m, dev, nil, Config{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestPredictBatchWithoutLabels: a batch of images alone gives the logits a labelled batch of the
// same images gives, and no labels.
func TestPredictBatchWithoutLabels(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr := tinyPredictTrainer(t, dev)
	imgs, labels := synthetic(5, 9)
	data := newMemData(dev, imgs, labels, Shape{C: 1, H: 8, W: 8}, 5, false, 0)
	defer data.close()
	mean, std := data.Normalization()
	for b, err := range data.Batches(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		want, err := tr.PredictBatch(context.Background(), b, mean, std)
		if err != nil {
			t.Fatal(err)
		}
		b.Labels.Len = 0
		got, err := tr.PredictBatch(context.Background(), b, mean, std)
		if err != nil {
			t.Fatalf("batch without labels: %v", err)
		}
		if len(got.Labels) != 0 || got.Len() != 5 {
			t.Fatalf("unlabelled batch: %d labels, %d samples", len(got.Labels), got.Len())
		}
		for i, v := range got.Logits {
			if v != want.Logits[i] {
				t.Fatalf("logit %d: %v unlabelled, %v labelled", i, v, want.Logits[i])
			}
		}
	}
}

// evalTestTransform is the evaluation transform of the model "evaltf_test", a bicubic resize to 19
// of a 16-pixel input and a mean and std of 0.5.
var evalTestTransform = models.EvalTransform{Resize: 19, Crop: 16, Filter: transforms.Bicubic, Mean: half3, Std: half3}

func init() {
	build := func(_ string, in Shape, classes int) (*models.Model, error) {
		return &models.Model{Name: "evaltf_test", Module: tNet(tConv(in.C, 4, 3, 1), tReLU(), tFlatten(), tLinear(4*in.H*in.W, classes))}, nil
	}
	if err := errors.Join(models.Register("evaltf_test", build), models.RegisterEvalTransform(evalTestTransform, "evaltf_test")); err != nil {
		panic(err)
	}
}

// TestEvalTransformChain: models.EvalTransform.Chain is the weights' transform at their crop size and
// keeps the ratio of resize to crop at another; the default is transforms.Eval at every size; a
// registered transform is checked and registered once.
func TestEvalTransformChain(t *testing.T) {
	swin := models.EvalTransform{Resize: 232, Crop: 224, Filter: transforms.Bicubic, Mean: transforms.ImageNetMean, Std: transforms.ImageNetStd}
	for size, want := range map[int]string{224: "Resize(232, bicubic)", 28: "Resize(29, bicubic)", 384: "Resize(397, bicubic)"} {
		if got := swin.Chain(size).String(); !strings.Contains(got, want+", CenterCrop("+strconv.Itoa(size)+")") {
			t.Errorf("swin_t's Chain(%d) = %s; want %s", size, got, want)
		}
	}
	for _, size := range []int{8, 28, 32, 224, 384} {
		if got, want := models.EvalTransformFor("no_such_model").Chain(size), transforms.Eval(size); got.String() != want.String() || got.DecodeMode() != want.DecodeMode() {
			t.Errorf("default Chain(%d) = %v (%v); transforms.Eval's %v (%v)", size, got, got.DecodeMode(), want, want.DecodeMode())
		}
	}
	if got := models.EvalTransformFor("resnet50(x=1)"); got.Resize != 232 || got.Crop != 224 {
		t.Errorf("resnet50's = %v; want torchvision's IMAGENET1K_V2 resize 232", got)
	}
	e := models.EvalTransformFor("evaltf_test")
	e.Mean[0] = 9 // the caller's copy
	if got := models.EvalTransformFor("evaltf_test"); got.String() != evalTestTransform.String() {
		t.Errorf("models.EvalTransformFor(evaltf_test) = %v after the caller changed its copy; want %v", got, evalTestTransform)
	}
	for _, bad := range []models.EvalTransform{
		{Resize: 10, Crop: 16, Mean: half3, Std: half3},
		{Resize: 16, Crop: 0, Mean: half3, Std: half3},
		{Resize: 16, Crop: 16, Filter: transforms.Lanczos + 1, Mean: half3, Std: half3},
		{Resize: 16, Crop: 16, Mean: half3, Std: []float32{0.5, 0, 0.5}},
		{Resize: 16, Crop: 16, Mean: half3, Std: half3[:2]},
	} {
		if err := models.RegisterEvalTransform(bad, "evaltf_bad"); err == nil {
			t.Errorf("models.RegisterEvalTransform(%v): no error", bad)
		}
	}
	if err := models.RegisterEvalTransform(evalTestTransform, "evaltf_test"); !errors.Is(err, models.ErrRegistered) {
		t.Errorf("RegisterEvalTransform twice: %v; want models.ErrRegistered", err)
	}
	if err := models.RegisterEvalTransform(evalTestTransform, "resnet50"); !errors.Is(err, models.ErrRegistered) {
		t.Errorf("RegisterEvalTransform of a built-in model: %v; want models.ErrRegistered", err)
	}
}

var half3 = []float32{0.5, 0.5, 0.5}
