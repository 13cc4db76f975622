package train

import (
	"bytes"
	"context"
	"errors"
	"github.com/stoke-ml/stoke/models"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
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

func grayPNG(t *testing.T, pix []byte) []byte {
	t.Helper()
	g := &image.Gray{Pix: pix, Stride: 8, Rect: image.Rect(0, 0, 8, 8)}
	var b bytes.Buffer
	if err := png.Encode(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPredictorMatchesPredict: the Predictor's logits for PNG files, raw pixels and decoded images
// are bit for bit Trainer.Predict's over the same pixels and normalization, across batches of
// the Predictor's size, and its probabilities and top-k follow from the logits.
func TestPredictorMatchesPredict(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr := tinyPredictTrainer(t, dev)
	imgs, labels := synthetic(7, 5)
	data := newMemData(dev, imgs, labels, Shape{C: 1, H: 8, W: 8}, 4, false, 0)
	defer data.close()
	want, err := tr.Predict(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	mean, std := data.Normalization()
	p, err := NewPredictor(tr, PredictorConfig{Mean: mean, Std: std, Batch: 3, TopK: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var files, raw []transforms.Input
	var decoded []image.Image
	for i := range 7 {
		pix := imgs[i*64 : (i+1)*64]
		files = append(files, transforms.Input{Encoded: grayPNG(t, pix)})
		raw = append(raw, transforms.Input{Pixels: pix, H: 8, W: 8, C: 1})
		decoded = append(decoded, &image.Gray{Pix: pix, Stride: 8, Rect: image.Rect(0, 0, 8, 8)})
	}
	check := func(name string, got []Prediction, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 7 {
			t.Fatalf("%s: %d predictions, want 7", name, len(got))
		}
		for i, g := range got {
			for c, v := range g.Logits {
				if w := want.Logits[i*10+c]; math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("%s: image %d class %d: logit %v, Trainer.Predict's %v", name, i, c, v, w)
				}
			}
			var sum float64
			for c, pr := range g.Probs {
				sum += float64(pr)
				if c > 0 && (g.Logits[c] > g.Logits[c-1]) != (pr > g.Probs[c-1]) {
					t.Fatalf("%s: image %d: probabilities %v do not order as logits %v", name, i, g.Probs, g.Logits)
				}
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("%s: image %d: probabilities sum to %v", name, i, sum)
			}
			if len(g.Top) != 4 || g.Top[0] != want.Class(i) {
				t.Fatalf("%s: image %d: top %v, want 4 classes led by %d", name, i, g.Top, want.Class(i))
			}
			for k := 1; k < len(g.Top); k++ {
				if g.Logits[g.Top[k]] > g.Logits[g.Top[k-1]] {
					t.Fatalf("%s: image %d: top %v out of order for logits %v", name, i, g.Top, g.Logits)
				}
			}
			if !want.InTopK(i, g.Top[3], 4) || want.InTopK(i, g.Top[3], 3) {
				t.Fatalf("%s: image %d: class %d is not the 4th by Predictions.InTopK", name, i, g.Top[3])
			}
		}
	}
	ctx := context.Background()
	got, err := p.Predict(ctx, files)
	check("png", got, err)
	got, err = p.Predict(ctx, raw)
	check("raw", got, err)
	got, err = p.PredictImages(ctx, decoded)
	check("decoded", got, err)
}

func TestTopKTies(t *testing.T) {
	got := topK([]float32{1, 3, 3, -1, 2}, 4)
	if want := []int{1, 2, 4, 0}; !slices.Equal(got, want) {
		t.Fatalf("topK = %v, want %v", got, want)
	}
}

// TestPredictorErrors: a corrupt file fails the call naming its index; a normalization that does
// not fit the model, or is given twice, is refused.
func TestPredictorErrors(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr := tinyPredictTrainer(t, dev)
	if _, err := NewPredictor(tr, PredictorConfig{}); err == nil || !strings.Contains(err.Error(), "0 means and 0 stds for a model of 1 channels") {
		t.Fatalf("no normalization for a gray model: %v", err)
	}
	norm := transforms.Compose(transforms.Normalize([]float32{0.5}, []float32{0.25}))
	if _, err := NewPredictor(tr, PredictorConfig{Transform: norm, Mean: []float32{0.5}, Std: []float32{0.25}}); err == nil {
		t.Fatal("normalization given twice accepted")
	}
	p, err := NewPredictor(tr, PredictorConfig{Transform: norm, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	good := transforms.Input{Encoded: grayPNG(t, make([]byte, 64))}
	bad := transforms.Input{Encoded: []byte("\x89PNG\r\n\x1a\nnot really")}
	_, err = p.Predict(context.Background(), []transforms.Input{good, good, good, bad})
	if err == nil || !strings.Contains(err.Error(), "train: predict: image 3: ") {
		t.Fatalf("corrupt image 3: %v", err)
	}
	big := transforms.Input{Pixels: make([]byte, 81), H: 9, W: 9, C: 1}
	if _, err = p.Predict(context.Background(), []transforms.Input{good, big}); err == nil || !strings.Contains(err.Error(), "image 1: ") {
		t.Fatalf("9x9 image for an 8x8 model with no resize: %v", err)
	}
	if _, err = p.PredictImages(context.Background(), []image.Image{nil}); err == nil || !strings.Contains(err.Error(), "image 0: nil image") {
		t.Fatalf("nil image: %v", err)
	}
	// An image over the pixel limit is refused from its bounds, before a pixel is read (a
	// 40000x40000 image was copied whole first: 6.4 GB).
	small, err := NewPredictor(tr, PredictorConfig{Transform: norm.WithMaxPixels(100), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	_, err = small.PredictImages(context.Background(), []image.Image{untouchable{image.Rect(0, 0, 20, 20)}})
	if !errors.Is(err, transforms.ErrTooLarge) || !strings.Contains(err.Error(), "image 0: ") || !strings.Contains(err.Error(), "20x20") {
		t.Fatalf("a 20x20 image over a limit of 100 pixels: %v; want ErrTooLarge naming image 0", err)
	}
}

// untouchable is an image whose pixels must not be read.
type untouchable struct{ r image.Rectangle }

func (u untouchable) ColorModel() color.Model { return color.GrayModel }
func (u untouchable) Bounds() image.Rectangle { return u.r }
func (u untouchable) At(x, y int) color.Color { panic("a pixel of an image over the limit was read") }

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

// pngSet is an in-memory dataset of encoded images, all of class 0.
type pngSet [][]byte

func (d pngSet) Len() int { return len(d) }
func (d pngSet) Sample(_ context.Context, i int) (loaders.Sample, error) {
	return loaders.Sample{Input: transforms.Input{Encoded: d[i]}}, nil
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

// TestOpenPredictorMatchesEvalLoader: a Predictor opened from a checkpoint with the default
// configuration gives, bit for bit, the logits Trainer.Predict gives over a loader with the
// model's evaluation transform at its size (what stoke predict runs on photos: exact decode) for
// RGB PNGs of other sizes than the model's: transforms.Eval (ImageNet's normalization) for a
// model without one of its own, and a registered model's own (RegisterEvalTransform: bicubic,
// another normalization), not Eval.
func TestOpenPredictorMatchesEvalLoader(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, tc := range []struct {
		model     string
		transform *transforms.Chain
		mean, std []float32
	}{
		{"cnn", transforms.Eval(16), transforms.ImageNetMean, transforms.ImageNetStd},
		{"evaltf_test", transforms.Compose(transforms.ResizeFilter(19, transforms.Bicubic), transforms.CenterCrop(16),
			transforms.Normalize(half3, half3)).WithDecode(transforms.ExactDecode), half3, half3},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, err := NewModel(tc.model, Shape{C: 3, H: 16, W: 16}, 4)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := New(context.Background(), m, dev, SGD{LR: 0.1}, Config{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ck := filepath.Join(t.TempDir(), "rgb.ckpt")
			if err := tr.Save(context.Background(), ck); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(4, 4))
			var set pngSet
			var inputs []transforms.Input
			for i := range 5 {
				img := image.NewRGBA(image.Rect(0, 0, 20+3*i, 24))
				for k := range img.Pix {
					img.Pix[k] = byte(r.IntN(256))
				}
				var b bytes.Buffer
				if err := png.Encode(&b, img); err != nil {
					t.Fatal(err)
				}
				set = append(set, b.Bytes())
				inputs = append(inputs, transforms.Input{Encoded: b.Bytes()})
			}
			ld, err := loaders.New(set, loaders.Config{Batch: 2, Transform: tc.transform, Device: dev})
			if err != nil {
				t.Fatal(err)
			}
			defer ld.Close()
			want, err := tr.Predict(context.Background(), FromLoader(ld))
			if err != nil {
				t.Fatal(err)
			}
			p, err := OpenPredictor(context.Background(), ck, dev, true, PredictorConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if mean, std := p.Normalization(); !slices.Equal(mean, tc.mean) || !slices.Equal(std, tc.std) {
				t.Fatalf("default normalization %v %v, want %v %v", mean, std, tc.mean, tc.std)
			}
			got, err := p.Predict(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				for c, v := range g.Logits {
					if w := want.Logits[i*4+c]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("image %d class %d: logit %v, the %v loader's %v", i, c, v, tc.transform, w)
					}
				}
			}
		})
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
