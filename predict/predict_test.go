package predict

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/nn"
	"github.com/stoke-ml/stoke/optim"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

var gray8 = train.Shape{C: 1, H: 8, W: 8}

// tinyPredictTrainer is a trainer of an mlp for 1x8x8 images, its weights seeded, with opt
// (nil: none) and the Preprocess pre (nil: none).
func tinyPredictTrainer(t *testing.T, dev gpu.Device, opt optim.Optimizer, pre *models.Preprocess) *train.Trainer {
	t.Helper()
	m, err := train.NewModel("mlp", gray8, 10)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(context.Background(), m, dev, opt, train.Config{Seed: 3, Preprocess: pre})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// grayImages are n random 8x8 gray images, one after the other.
func grayImages(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	pix := make([]byte, 64*n)
	for i := range pix {
		pix[i] = byte(r.IntN(256))
	}
	return pix
}

// grayLoader is a loader of the 8x8 gray images imgs, with labels 0, 1, ..., in order, in
// batches of batch, normalized by a mean of 0.5 and a std of 0.25.
func grayLoader(t *testing.T, dev gpu.Device, imgs []byte, batch int) *loaders.Loader {
	t.Helper()
	samples := make([]loaders.Sample, len(imgs)/64)
	for i := range samples {
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: imgs[i*64 : (i+1)*64], H: 8, W: 8, C: 1}, Label: i % 10}
	}
	info := loaders.Info{Name: "gray", NumClasses: 10, Shape: gray8, Mean: []float32{0.5}, Std: []float32{0.25}}
	ld, err := loaders.New(loaders.NewMemory(info, samples), loaders.Config{Batch: batch, Workers: 1, Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Close() })
	return ld
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
	tr := tinyPredictTrainer(t, dev, nil, nil)
	imgs := grayImages(7, 5)
	data := grayLoader(t, dev, imgs, 4)
	want, err := tr.Predict(context.Background(), train.FromLoader(data))
	if err != nil {
		t.Fatal(err)
	}
	mean, std := data.Normalization()
	p, err := New(tr, Config{Mean: mean, Std: std, Batch: 3, TopK: 4})
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
	tr := tinyPredictTrainer(t, dev, nil, nil)
	if _, err := New(tr, Config{}); err == nil || !strings.Contains(err.Error(), "0 means and 0 stds for a model of 1 channels") {
		t.Fatalf("no normalization for a gray model: %v", err)
	}
	norm := transforms.Compose(transforms.Normalize([]float32{0.5}, []float32{0.25}))
	if _, err := New(tr, Config{Transform: norm, Mean: []float32{0.5}, Std: []float32{0.25}}); err == nil {
		t.Fatal("normalization given twice accepted")
	}
	p, err := New(tr, Config{Transform: norm, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	good := transforms.Input{Encoded: grayPNG(t, make([]byte, 64))}
	bad := transforms.Input{Encoded: []byte("\x89PNG\r\n\x1a\nnot really")}
	_, err = p.Predict(context.Background(), []transforms.Input{good, good, good, bad})
	if err == nil || !strings.Contains(err.Error(), "predict: image 3: ") {
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
	small, err := New(tr, Config{Transform: norm.WithMaxPixels(100), Batch: 2})
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

// pngSet is an in-memory dataset of encoded images, all of class 0.
type pngSet [][]byte

func (d pngSet) Len() int { return len(d) }
func (d pngSet) Sample(_ context.Context, i int) (loaders.Sample, error) {
	return loaders.Sample{Input: transforms.Input{Encoded: d[i]}}, nil
}

// evalTestTransform is the evaluation transform of the model "predict_evaltf_test", a bicubic
// resize to 19 of a 16-pixel input and a mean and std of 0.5.
var evalTestTransform = models.EvalTransform{Resize: 19, Crop: 16, Filter: transforms.Bicubic, Mean: half3, Std: half3}

var half3 = []float32{0.5, 0.5, 0.5}

func init() {
	build := func(_ string, in train.Shape, classes int) (*models.Model, error) {
		return &models.Model{Name: "predict_evaltf_test", Module: nn.Sequential{nn.NewConv2d(in.C, 4, 3, nn.ConvOptions{Stride: 1, Padding: 1}, true),
			nn.Fn(nn.ReLU), nn.Fn(nn.Flatten), nn.NewLinear(4*in.H*in.W, classes, true)}}, nil
	}
	if err := errors.Join(models.Register("predict_evaltf_test", build), models.RegisterEvalTransform(evalTestTransform, "predict_evaltf_test")); err != nil {
		panic(err)
	}
}

// TestOpenMatchesEvalLoader: a Predictor opened from a checkpoint with the default
// configuration gives, bit for bit, the logits Trainer.Predict gives over a loader with the
// model's evaluation transform at its size (what stoke predict runs on photos: exact decode) for
// RGB PNGs of other sizes than the model's: transforms.Eval (ImageNet's normalization) for a
// model without one of its own, and a registered model's own (RegisterEvalTransform: bicubic,
// another normalization), not Eval.
func TestOpenMatchesEvalLoader(t *testing.T) {
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
		{"predict_evaltf_test", transforms.Compose(transforms.ResizeFilter(19, transforms.Bicubic), transforms.CenterCrop(16),
			transforms.Normalize(half3, half3)).WithDecode(transforms.ExactDecode), half3, half3},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, err := train.NewModel(tc.model, train.Shape{C: 3, H: 16, W: 16}, 4)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := train.New(context.Background(), m, dev, optim.SGD{LR: 0.1}, train.Config{Seed: 5})
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
			want, err := tr.Predict(context.Background(), train.FromLoader(ld))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Open(context.Background(), ck, dev, true, Config{})
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

// TestPredictorContext: a Predict on a cancelled context fails with its error, and
// the next call, on a live one, predicts as before (it waits for what the cancelled call left
// queued before reusing the buffers).
func TestPredictorContext(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	tr := tinyPredictTrainer(t, dev, optim.SGD{LR: 0.1}, nil) // an optimizer, to Save
	p, err := New(tr, Config{Mean: []float32{0.5}, Std: []float32{0.25}, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var inputs []transforms.Input
	for i := range 3 {
		px := make([]byte, 64)
		for j := range px {
			px[j] = byte(j * (i + 1))
		}
		inputs = append(inputs, transforms.Input{Pixels: px, H: 8, W: 8, C: 1})
	}
	want, err := p.Predict(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Predict(ctx, inputs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Predict(cancelled ctx) = %v; want an error wrapping context.Canceled", err)
	}
	got, err := p.Predict(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !slices.Equal(got[i].Logits, want[i].Logits) {
			t.Errorf("image %d after a cancelled Predict: logits %v; want %v", i, got[i].Logits, want[i].Logits)
		}
	}
	ck := filepath.Join(t.TempDir(), "tiny.ckpt")
	if err := tr.Save(context.Background(), ck); err != nil {
		t.Fatal(err)
	}
	if p, err := Open(ctx, ck, dev, true, Config{Mean: []float32{0}, Std: []float32{1}}); !errors.Is(err, context.Canceled) {
		if err == nil {
			p.Close()
		}
		t.Errorf("Open(cancelled ctx) = %v; want an error wrapping context.Canceled", err)
	}
}

// TestPredictorPreprocess: a trainer's Preprocess (a checkpoint's) is the Predictor's default:
// its normalization, its class names, and its transform (a resize to the input's size, which
// leaves 8x8 images as they are: the logits are Trainer.Predict's, bit for bit).
func TestPredictorPreprocess(t *testing.T) {
	ctx := context.Background()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	names := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	pre := &models.Preprocess{Eval: models.EvalTransform{Mean: []float32{0.5}, Std: []float32{0.25}}, Classes: names}
	tr := tinyPredictTrainer(t, dev, nil, pre)
	p, err := New(tr, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if mean, std := p.Normalization(); !slices.Equal(mean, pre.Eval.Mean) || !slices.Equal(std, pre.Eval.Std) || !slices.Equal(p.Classes(), names) {
		t.Errorf("the predictor normalizes with %v %v and names %v; want the trainer's", mean, std, p.Classes())
	}
	imgs := grayImages(5, 8)
	want, err := tr.Predict(ctx, train.FromLoader(grayLoader(t, dev, imgs, 5)))
	if err != nil {
		t.Fatal(err)
	}
	var raw []transforms.Input
	for i := range 5 {
		raw = append(raw, transforms.Input{Pixels: imgs[i*64 : (i+1)*64], H: 8, W: 8, C: 1})
	}
	got, err := p.Predict(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !slices.Equal(g.Logits, want.Logits[i*10:(i+1)*10]) {
			t.Fatalf("image %d: the predictor's logits %v; Trainer.Predict's %v", i, g.Logits, want.Logits[i*10:(i+1)*10])
		}
	}
}
