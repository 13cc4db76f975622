package predict

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/kernels"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/transforms"
)

// Config configures a Predictor.
//
// The default transform is the one the trainer's checkpoint records (train.Trainer.Preprocess: the
// evaluation transform and normalization of the data the model was trained on, as stoke train
// writes it). A checkpoint without one (written before stoke recorded it, or by a trainer
// without train.Config.Preprocess) records the model and its input size only: the default transform
// of a 3-channel model is then the evaluation transform of its weights
// (models.EvalTransformFor(model).Chain at the model's input size: swin_t's Resize(232, bicubic),
// CenterCrop(224) and ImageNet's Normalize, timm's ViTs' mean and std of 0.5; transforms.Eval
// for a model without one), and the normalization comes from the transform: its Normalize, else
// Mean and Std. Give Transform (or Mean and Std) when the model was trained with other
// statistics: loaders.Loader.Normalization of the training loader says which, as do the
// datasets' Info.Mean and Info.Std.
type Config struct {
	// Transform turns one image into the model's input pixels (uint8 CHW of Model.Input's shape);
	// it must be deterministic (no random transform). nil: the trainer's Preprocess's Chain, else
	// the model's models.EvalTransformFor(name).Chain(H)
	// (its weights' resize, CenterCrop(H) and Normalize, exact JPEG decode; transforms.Eval(H)
	// for a model without one) for a square 3-channel model, and transforms.ResizeTo(H, W) for
	// any other (then Mean and Std are required).
	Transform *transforms.Chain
	// Mean and Std are the per-channel normalization (on the [0,1] scale) when Transform has no
	// Normalize; with one, they must be empty.
	Mean, Std []float32
	// Batch is the most images per forward pass; 0 means 64.
	Batch int
	// TopK is the number of classes Prediction.Top lists; 0 means 5. It is capped at the number of
	// classes.
	TopK int
}

// Prediction is the output of a model for one image.
type Prediction struct {
	// Logits are the model's outputs, one per class.
	Logits []float32
	// Probs is the softmax of Logits.
	Probs []float32
	// Top are the TopK classes of largest logit, best first; equal logits rank the lower class
	// first (as Predictions.Class does).
	Top []int
}

// Predictor classifies images with a trained model in evaluation mode (BatchNorm on its running
// statistics, no dropout), applying the model's evaluation transform and normalization on the
// way: image files (JPEG, PNG, GIF, BMP, WebP), raw pixels or decoded images in, logits,
// probabilities and top-k classes out, a batch at a time, on the trainer's device.
//
// # Concurrency
//
// A Predictor is not safe for concurrent use (it owns one staging buffer and one transform
// worker); make one per goroutine over trainers of their own.
//
// # Ownership
//
// A Predictor from New uses the caller's Trainer, which must outlive it; one from
// Open owns its trainer. Close frees the device buffer (and an owned trainer).
type Predictor struct {
	t         *train.Trainer
	own       bool
	chain     *transforms.Chain // its pixel limit is checked before an image.Image is copied
	w         *transforms.Worker
	mean, std []float32
	batch     int
	topK      int
	host      []byte
	buf       gpu.Buffer
	// pending: a batch's work may still be queued (its wait failed, a cancelled ctx's say), reading
	// host and buf; the next call waits for it before reusing them.
	pending bool
}

// New returns a Predictor running t's model. t may hold a checkpoint (train.New with
// train.Config{Resume}, an optimizer-less trainer) or loaded weights (train.NewModel, train.New,
// Trainer.LoadWeights);
// for a checkpoint with an EMA, call t.UseEMA first to predict with the averaged weights.
func New(t *train.Trainer, cfg Config) (*Predictor, error) {
	if t == nil {
		return nil, fmt.Errorf("predict: %w: nil trainer", train.ErrConfig)
	}
	in := t.Model().Input()
	if cfg.Batch < 0 || cfg.TopK < 0 {
		return nil, fmt.Errorf("predict: %w: batch %d, top-k %d; want >= 0", train.ErrConfig, cfg.Batch, cfg.TopK)
	}
	chain, pre := cfg.Transform, t.Preprocess()
	if chain == nil {
		switch {
		case pre != nil && cfg.Mean == nil && cfg.Std == nil:
			chain = pre.Chain(in)
		case in.C == 3 && in.H == in.W:
			chain = models.EvalTransformFor(t.Model().Name()).Chain(in.H)
		default:
			chain = transforms.Compose(transforms.ResizeTo(in.H, in.W))
		}
	}
	mean, std, ok := chain.Normalization()
	switch {
	case ok && (cfg.Mean != nil || cfg.Std != nil):
		return nil, fmt.Errorf("predict: %w: Mean and Std given and the transform normalizes too: choose one", train.ErrConfig)
	case !ok:
		mean, std = cfg.Mean, cfg.Std
	}
	if len(mean) != in.C || len(std) != in.C {
		return nil, fmt.Errorf("predict: %w: normalization of %d means and %d stds for a model of %d channels "+
			"(a checkpoint does not record its data's normalization: set Config.Transform's Normalize or Mean and Std)",
			train.ErrConfig, len(mean), len(std), in.C)
	}
	if err := transforms.CheckNormalization(mean, std); err != nil {
		return nil, fmt.Errorf("predict: %w: %w", train.ErrConfig, err)
	}
	p := &Predictor{t: t, chain: chain, w: chain.NewWorker(), mean: mean, std: std, batch: cfg.Batch, topK: cfg.TopK}
	if p.batch == 0 {
		p.batch = 64
	}
	if p.topK == 0 {
		p.topK = 5
	}
	p.topK = min(p.topK, t.Model().Classes())
	return p, nil
}

// Open opens the checkpoint at path (written by Trainer.Save or stoke train) on dev and
// returns a Predictor that owns the trainer holding it; useEMA predicts with the checkpoint's EMA
// of the weights when it has one; ctx bounds the waits for the device while it loads. dev stays
// the caller's.
func Open(ctx context.Context, path string, dev gpu.Device, useEMA bool, cfg Config) (*Predictor, error) {
	m, err := train.CheckpointModel(path)
	if err != nil {
		return nil, err
	}
	t, err := train.New(ctx, m, dev, nil, train.Config{Resume: path})
	if err != nil {
		return nil, err
	}
	if useEMA {
		if _, err := t.UseEMA(ctx); err != nil {
			return nil, errors.Join(err, t.Close())
		}
	}
	p, err := New(t, cfg)
	if err != nil {
		return nil, errors.Join(err, t.Close())
	}
	p.own = true
	return p, nil
}

// ImageError is the error of Predict for an input it cannot take (not an image, too large, bad
// pixels): Index is the input's place in the call's slice.
type ImageError struct {
	Index int
	Err   error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("predict: image %d: %v", e.Index, e.Err)
}

func (e *ImageError) Unwrap() error { return e.Err }

// Model is the model the Predictor runs.
func (p *Predictor) Model() *train.Model { return p.t.Model() }

// Classes names the classes of Prediction.Top, as the trainer's Preprocess records them, or is
// nil when they are unnamed. The slice is a copy.
func (p *Predictor) Classes() []string { return classNames(p.t.Preprocess()) }

// Normalization is the per-channel mean and std the Predictor applies (copies).
func (p *Predictor) Normalization() (mean, std []float32) {
	return slices.Clone(p.mean), slices.Clone(p.std)
}

// Predict returns one Prediction per input, in order. Each input is an image file's bytes
// (Encoded) or raw HWC pixels (Pixels); a bad one fails the call with an error naming its index.
func (p *Predictor) Predict(ctx context.Context, inputs []transforms.Input) ([]Prediction, error) {
	if p.pending { // the host and device buffers are about to be rewritten
		if err := wait(ctx, p.t.Stream()); err != nil {
			return nil, fmt.Errorf("predict: %w", err)
		}
		p.pending = false
	}
	per := p.t.Model().Input().Len()
	out := make([]Prediction, 0, len(inputs))
	for lo := 0; lo < len(inputs); lo += p.batch {
		n := min(p.batch, len(inputs)-lo)
		p.host = slices.Grow(p.host[:0], n*per)[:n*per]
		for i := range n {
			if err := p.w.Apply(p.host[i*per:(i+1)*per], inputs[lo+i], nil); err != nil {
				return nil, &ImageError{Index: lo + i, Err: err}
			}
		}
		logits, err := p.forward(ctx, n)
		if err != nil {
			return nil, err
		}
		out = p.appendPredictions(out, logits)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PredictImages is Predict over decoded images (any image.Image; alpha is ignored).
func (p *Predictor) PredictImages(ctx context.Context, images []image.Image) ([]Prediction, error) {
	inputs := make([]transforms.Input, len(images))
	for i, im := range images {
		if im == nil {
			return nil, fmt.Errorf("predict: image %d: nil image", i)
		}
		// The pixel limit first: copying a 40000x40000 image to learn that it is too large took
		// 6.4 GB and the process.
		b := im.Bounds()
		if err := p.chain.Admit(transforms.ImageInfo{Format: "image", Width: b.Dx(), Height: b.Dy()}); err != nil {
			return nil, &ImageError{Index: i, Err: err}
		}
		inputs[i] = imageInput(im)
	}
	return p.Predict(ctx, inputs)
}

// imageInput gives im's pixels as HWC bytes: gray as 1 channel, anything else as NRGBA.
func imageInput(im image.Image) transforms.Input {
	b := im.Bounds()
	w, h := b.Dx(), b.Dy()
	if g, ok := im.(*image.Gray); ok {
		pix := make([]byte, w*h)
		for y := range h {
			copy(pix[y*w:(y+1)*w], g.Pix[g.PixOffset(b.Min.X, b.Min.Y+y):])
		}
		return transforms.Input{Pixels: pix, H: h, W: w, C: 1}
	}
	n := image.NewNRGBA(image.Rect(0, 0, w, h))
	draw.Draw(n, n.Rect, im, b.Min, draw.Src)
	return transforms.Input{Pixels: n.Pix, H: h, W: w, C: 4}
}

// forward uploads the n staged images and returns their logits.
func (p *Predictor) forward(ctx context.Context, n int) ([]float32, error) {
	per := p.t.Model().Input().Len()
	if p.buf == nil || p.buf.Len() < n*per {
		if p.buf != nil {
			p.buf.Free() // PredictBatch synchronized: no queued work reads it
		}
		var err error
		if p.buf, err = p.t.Device().Alloc(p.batch * per); err != nil {
			p.buf = nil
			return nil, fmt.Errorf("predict: %w", err)
		}
	}
	if err := p.t.Stream().CopyH2D(p.buf, 0, p.host); err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	pr, err := p.t.PredictBatch(ctx, train.Batch{Images: kernels.U8{Buf: p.buf, Len: n * per}, N: n, Shape: p.t.Model().Input()}, p.mean, p.std)
	if err != nil {
		p.pending = true
		return nil, err
	}
	return pr.Logits, nil
}

// appendPredictions appends the Prediction of each row of logits to out.
func (p *Predictor) appendPredictions(out []Prediction, logits []float32) []Prediction {
	nc := p.t.Model().Classes()
	for lo := 0; lo < len(logits); lo += nc {
		row := slices.Clone(logits[lo : lo+nc])
		out = append(out, Prediction{Logits: row, Probs: softmax(row), Top: topK(row, p.topK)})
	}
	return out
}

// softmax is exp(v - max) normalized, in float64.
func softmax(v []float32) []float32 {
	hi := math.Inf(-1)
	for _, x := range v {
		hi = max(hi, float64(x))
	}
	e := make([]float64, len(v))
	var sum float64
	for i, x := range v {
		e[i] = math.Exp(float64(x) - hi)
		sum += e[i]
	}
	out := make([]float32, len(v))
	for i := range e {
		out[i] = float32(e[i] / sum)
	}
	return out
}

// topK returns the k classes of largest value, best first, the lower class first on ties.
func topK(v []float32, k int) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case v[a] > v[b]:
			return -1
		case v[a] < v[b]:
			return 1
		}
		return 0
	})
	return idx[:k]
}

// Close frees the Predictor's device buffer, and the trainer of Open. Like Trainer.Close
// it takes no context: when a cancelled Predict left work queued, it waits for it without a
// deadline.
func (p *Predictor) Close() error {
	var err error
	if p.pending {
		err = p.t.Stream().Synchronize(context.Background())
		p.pending = false
	}
	if p.buf != nil {
		err = errors.Join(err, p.buf.Free())
		p.buf = nil
	}
	if p.own {
		err = errors.Join(err, p.t.Close())
	}
	return err
}

// classNames is pre's class names; nil for a nil pre.
func classNames(pre *models.Preprocess) []string {
	if pre == nil {
		return nil
	}
	return pre.Classes
}

// wait waits for the work enqueued on s, unless ctx is done already.
func wait(ctx context.Context, s gpu.Stream) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Synchronize(ctx)
}
