package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/hub"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/onnx"
	"github.com/stoke-ml/stoke/train"
	"github.com/stoke-ml/stoke/weights"
)

func runExport(ctx context.Context, e *env, args []string) error {
	// The data is read only for its shape, classes and evaluation normalization: one sample's
	// loader on the CPU, no loader flags beyond --data and --size.
	lf := loaderFlags{batch: 1, device: "cpu", onError: "fail", seed: 1, worldSize: 1}
	fs := e.flags("(--checkpoint PATH | --weights W.safetensors --model M [--classes N] --data SPEC) --out FILE "+
		"[--format safetensors|onnx] [--data SPEC [--size N]] [--mean M1,M2,M3 --std S1,S2,S3] [--ema=false]", false)
	fs.StringVar(&lf.data, "data", "", "the data the model was trained on, as stoke train's --data (mnist:DIR, cifar10:DIR, DIR, shards:PATTERN, ...): "+
		"with --weights, the input shape and the class count; with --format onnx, the input normalization its evaluation applies (as stoke predict's; "+
		"by default a checkpoint's own, which stoke train records)")
	fs.IntVar(&lf.size, "size", 0, "with --data: the image side, as stoke predict takes it (0: a fixed-shape dataset's own size; "+
		"for photos the checkpoint's input size, with --weights the crop of the weights' evaluation transform)")
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train")
	weights := fs.String("weights", "",
		"the "+weightsHelp+", for the model --model, instead of --checkpoint")
	model := fs.String("model", "", "with --weights: the model ("+strings.Join(models.Names(), ", ")+")")
	classes := fs.Int("classes", 0, "with --weights: the model's number of classes (0: the data's)")
	out := fs.String("out", "", "file to write (required); it must not be the input. An existing file there is replaced atomically: "+
		"the export is written to a temporary file beside it and renamed over it, so the old file stays whole until the new one is")
	format := fs.String("format", "", "safetensors (the weights under torchvision's names for resnets) or onnx (the model as an ONNX graph, "+
		"opset 17, for onnxruntime, TensorRT or OpenVINO; its input is the float32 NCHW image after normalization); "+
		"default: onnx when --out ends in .onnx, else safetensors")
	var mean, std floatList
	fs.Var(&mean, "mean", "with --format onnx: the per-channel mean of the input normalization to record, e.g. 0.485,0.456,0.406 "+
		"(default: the one --data's evaluation applies, else the checkpoint's)")
	fs.Var(&std, "std", "with --mean: the per-channel standard deviation, e.g. 0.229,0.224,0.225")
	useEMA := fs.Bool("ema", true, "write the EMA of the weights when the checkpoint has one (stoke train --ema); --ema=false: the trained weights")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		*model = weightsModel(*weights)
	}
	if *format == "" {
		*format = "safetensors"
		if strings.EqualFold(filepath.Ext(*out), ".onnx") {
			*format = "onnx"
		}
	}
	if err := checkWeightsName(*weights); err != nil {
		return err
	}
	switch {
	case *out == "":
		return fmt.Errorf("%w: --out is required", errUsage)
	case *ck == "" && *weights == "":
		return fmt.Errorf("%w: --checkpoint is required (or --weights and --model)", errUsage)
	case *ck != "" && *weights != "":
		return fmt.Errorf("%w: --checkpoint and --weights: choose one", errUsage)
	case *weights != "" && *model == "":
		return fmt.Errorf("%w: --weights needs --model (a weights name such as resnet50.IMAGENET1K_V2 or hf-hub:timm/NAME.TAG names its own)", errUsage)
	case *ck != "" && (*model != "" || *classes != 0):
		return fmt.Errorf("%w: --model and --classes go with --weights; a checkpoint names its model", errUsage)
	case *classes < 0 || *classes > maxClasses:
		return fmt.Errorf("%w: --classes %d; want 1 to %d", errUsage, *classes, maxClasses)
	case *format != "safetensors" && *format != "onnx":
		return fmt.Errorf("%w: --format %q; want safetensors or onnx", errUsage, *format)
	case (mean == nil) != (std == nil):
		return fmt.Errorf("%w: --mean and --std go together", errUsage)
	case mean != nil && *format != "onnx":
		return fmt.Errorf("%w: --mean and --std go with --format onnx (a safetensors file holds only the weights)", errUsage)
	}
	src := *ck
	if *weights != "" {
		src = *weights
	}
	replaced, err := checkExportOut(*out, src)
	if err != nil {
		return err
	}
	var ds loaders.Dataset
	if lf.data != "" {
		if err := lf.check(); err != nil {
			return err
		}
		have, err := datasetSplits(ctx, lf.opener, lf.data)
		if err != nil {
			return err
		}
		// The split stoke predict scores by default: test, else val, else train.
		if ds, err = openDataset(ctx, lf.opener, lf.data, have[len(have)-1]); err != nil {
			return err
		}
		defer closeDataset(ds)
	}
	var tr *checkpointTrainer
	if *ck != "" {
		tr, err = openCheckpoint(ctx, *ck, "cpu", false)
	} else {
		if *classes == 0 && ds != nil {
			*classes = loaders.Describe(ds).NumClasses
		}
		tr, err = openWeights(ctx, e, &lf, ds, *weights, *model, *classes, false)
	}
	if err != nil {
		return err
	}
	defer tr.Close()
	ema, emaNote := false, ""
	if *useEMA {
		if ema, emaNote, err = tr.useEMA(ctx); err != nil {
			return err
		}
	}
	m := tr.Model()
	pre := tr.Preprocess() // what the checkpoint records of its data: nil for one written before stoke did
	switch {
	case *format != "onnx" || mean != nil:
	case lf.data != "":
		if mean, std, err = dataNormalization(&lf, ds, m, tr.dev, src); err != nil {
			return err
		}
	case pre == nil:
		return fmt.Errorf("%w: --format onnx records the input normalization, which %s does not (it was written before stoke recorded it): "+
			"give --data SPEC (the data the model was trained on) or --mean and --std", errUsage, src)
	default:
		mean, std = pre.Eval.Mean, pre.Eval.Std
	}
	if *format == "onnx" {
		err = tr.ExportONNX(ctx, *out, mean, std)
	} else {
		err = tr.Export(ctx, *out)
	}
	if err != nil {
		return err
	}
	what := "weights"
	if ema {
		what = "the EMA of the weights"
	} else if emaNote != "" {
		what = "the trained weights (" + emaNote + ")"
	}
	if *format == "onnx" {
		in := m.Input()
		what += fmt.Sprintf("; ONNX opset %d, input float32 [N %d %d %d] normalized with mean %v, std %v", onnx.Opset, in.C, in.H, in.W, mean, std)
		if pre != nil {
			what += ", the checkpoint's evaluation transform and class names in its metadata"
		}
	}
	if replaced {
		what += "; replaced the file that was there"
	}
	e.printf("wrote %s: %s, %d parameters, %s\n", *out, m.Name(), m.NumParams(), what)
	return nil
}

// checkExportOut refuses an --out that is the input src (under any name: a link, another path) or
// that exists and is not a regular file (a folder, a device: the rename would replace it). It
// reports whether a file is there, to be replaced.
func checkExportOut(out, src string) (bool, error) {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("--out %s: %w", out, err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%w: --out %s exists and is not a regular file (%v); choose a file path", errUsage, out, st.Mode().Type())
	}
	if in, err := os.Stat(src); err == nil && os.SameFile(st, in) {
		return false, fmt.Errorf("%w: --out %s is the input %s; the export would replace it: choose another path", errUsage, out, src)
	}
	return true, nil
}

// dataNormalization is the normalization the evaluation loader of ds applies, as stoke predict
// opens it for model m (photos at the model's input size); the loader's images must fit m.
func dataNormalization(lf *loaderFlags, ds loaders.Dataset, m *train.Model, dev gpu.Device, src string) (mean, std []float32, err error) {
	info, in := loaders.Describe(ds), m.Input()
	if lf.size == 0 && info.Shape.C == 0 {
		lf.size = in.H
	}
	lf.model = m.Name()
	probe, err := lf.loader(ds, "test", false, dev, nil)
	if err != nil {
		return nil, nil, err
	}
	defer probe.Close()
	if s := probe.Shape(); s.C != in.C || s.H != in.H || s.W != in.W {
		return nil, nil, fmt.Errorf("%s gives %dx%dx%d images; the model in %s takes %v (set --size)", info.Name, s.C, s.H, s.W, src, in)
	}
	mean, std = probe.Normalization()
	return mean, std, nil
}

// floatList is a comma-separated list of numbers (--mean, --std).
type floatList []float32

func (l *floatList) String() string {
	if l == nil {
		return ""
	}
	return fmt.Sprint([]float32(*l))
}

func (l *floatList) Set(s string) error {
	var out []float32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%q: want finite numbers separated by commas", s)
		}
		out = append(out, float32(v))
	}
	*l = out
	return nil
}

// openCheckpoint opens device and loads the named model of checkpoint ck into an optimizer-less
// trainer (for prediction and export); closing the trainer also closes the device.
// allowNonFinite loads weights holding NaN or Inf (predict's --allow-nonfinite).
func openCheckpoint(ctx context.Context, ck, device string, allowNonFinite bool) (*checkpointTrainer, error) {
	m, err := train.CheckpointModel(ck)
	if err != nil {
		return nil, err
	}
	dev, err := gpu.Open(device)
	if err != nil {
		return nil, err
	}
	tr, err := train.New(ctx, m, dev, nil, train.Config{Resume: ck, AllowNonFinite: allowNonFinite})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	return &checkpointTrainer{tr, dev}, nil
}

// openWeights opens lf's device and builds the named model for the images lf's evaluation loader
// gives from ds, with classes outputs, in an optimizer-less trainer loaded strictly with the
// safetensors weights at path; closing the trainer also closes the device. Without ds (export
// without --data), a hub repository's config.json or a torchvision name gives the input and the
// classes (0: its own count).
func openWeights(ctx context.Context, e *env, lf *loaderFlags, ds loaders.Dataset, path, model string, classes int, allowNonFinite bool) (*checkpointTrainer, error) {
	if classes <= 0 && ds != nil {
		return nil, fmt.Errorf("%w: the data does not say how many classes it has: set --classes", errUsage)
	}
	name := path
	path, err := e.fetchWeights(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := weights.CheckFile(path); err != nil { // an old pickle: say how to convert it
		return nil, err
	}
	// The loader takes the weights' own transform, at their input size unless --size says
	// otherwise, and the trainer records it at the model's.
	var config []byte
	if lf.pre, config, err = weightsPreprocess(ctx, e, name); err != nil {
		return nil, err
	}
	_, isTorchvision := hub.TransformOf(name)
	if lf.pre != nil && lf.size == 0 {
		lf.size = lf.pre.Eval.Crop
	}
	dev, err := gpu.Open(lf.device)
	if err != nil {
		return nil, err
	}
	lf.model = model
	shape, classes, err := weightsInput(lf, ds, dev, config, isTorchvision, classes)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), dev.Close())
	}
	m, err := train.NewModel(model, shape, classes)
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	var pre *models.Preprocess
	switch {
	case config != nil:
		if pre, err = models.PreprocessOf(config, shape, classes); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", name, err), dev.Close())
		}
	case isTorchvision:
		pre = &models.Preprocess{Eval: lf.pre.Eval.At(shape.H)}
	}
	tr, err := train.New(ctx, m, dev, nil, train.Config{Preprocess: pre})
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	if _, err := tr.LoadWeights(ctx, path, weights.Options{AllowNonFinite: allowNonFinite}); err != nil {
		return nil, errors.Join(err, tr.Close(), dev.Close())
	}
	return &checkpointTrainer{tr, dev}, nil
}

// weightsPreprocess is how the weights a name names evaluate, at their own input size: as its hub
// repository's config.json says (timm's pretrained_cfg, returned too), or its torchvision
// Weights member's transforms() (which differ between the members of one model); nil for a name
// that says neither (a file, a URL).
func weightsPreprocess(ctx context.Context, e *env, name string) (*models.Preprocess, []byte, error) {
	config, err := hubConfig(ctx, e, name)
	if err != nil {
		return nil, nil, err
	}
	if config != nil {
		pre, err := models.PreprocessOf(config, train.Shape{}, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return pre, config, nil
	}
	if tv, ok := hub.TransformOf(name); ok {
		return &models.Preprocess{Eval: models.EvalTransform{Resize: tv.Resize, Crop: tv.Crop, Filter: tv.Filter, Mean: tv.Mean[:], Std: tv.Std[:]}}, nil, nil
	}
	return nil, nil, nil
}

// weightsInput is the input shape and the class count of a model for weights: the images lf's
// evaluation loader gives from ds; without ds, those of the hub repository's config.json (its
// input_size, at --size when given), or of a torchvision name's ImageNet weights (3 channels at
// its crop, or --size; 1,000 classes). classes, when positive, is kept.
func weightsInput(lf *loaderFlags, ds loaders.Dataset, dev gpu.Device, config []byte, isTorchvision bool, classes int) (train.Shape, int, error) {
	if ds != nil {
		probe, err := lf.loader(ds, "test", false, dev, nil)
		if err != nil {
			return train.Shape{}, 0, err
		}
		defer probe.Close()
		return probe.Shape(), classes, nil
	}
	var shape train.Shape
	var own int
	switch {
	case config != nil:
		var err error
		if shape, own, err = models.ConfigInput(config); err != nil {
			return train.Shape{}, 0, err
		}
		// Outside bytes, which size the model: bounded as --channels and --classes are.
		if shape.C < 1 || shape.C > 64 || own < 1 || own > maxClasses {
			return train.Shape{}, 0, fmt.Errorf("config.json: input_size %v and %d classes; want 1 to 64 channels and 1 to %d classes", shape, own, maxClasses)
		}
	case isTorchvision:
		shape, own = train.Shape{C: 3}, 1000 // every torchvision name is an ImageNet-1k classifier's
	default:
		return train.Shape{}, 0, fmt.Errorf("%w: give --data (the input shape and classes): only a hub repository's or torchvision's weights name says them", errUsage)
	}
	shape.H, shape.W = lf.size, lf.size // the config's crop, or --size
	if classes <= 0 {
		classes = own
	}
	return shape, classes, nil
}

// hubConfig is the config.json of the hub repository name names (hub.Config), nil when there is
// none; offline, a config the cache lacks is noted and done without.
func hubConfig(ctx context.Context, e *env, name string) ([]byte, error) {
	p, err := hub.Config(ctx, name)
	switch {
	case errors.Is(err, hub.ErrOffline):
		fmt.Fprintf(e.stderr, "stoke %s: note: %s: no config.json in the cache (offline): evaluating with the model's own transform\n", e.name, name)
		return nil, nil
	case err != nil || p == "":
		return nil, err
	}
	return os.ReadFile(p)
}

// checkpointTrainer is a trainer that owns its device.
type checkpointTrainer struct {
	*train.Trainer
	dev gpu.Device
}

// useEMA serves the checkpoint's EMA (train.Trainer.UseEMA); when the checkpoint holds one that
// UseEMA declined, because it scored below the trained weights at its last evaluation, note says so.
func (t *checkpointTrainer) useEMA(ctx context.Context) (ema bool, note string, err error) {
	if ema, err = t.UseEMA(ctx); err != nil || ema {
		return ema, "", err
	}
	if last, ok := t.LastEpoch(); ok && (last.EMAAcc != 0 || last.EMALoss != 0) {
		note = fmt.Sprintf("the checkpoint's EMA scored %.4g against their %.4g at epoch %d", last.EMAAcc, last.TestAcc, last.Epoch)
	}
	return false, note, nil
}

func (t *checkpointTrainer) Close() error { return errors.Join(t.Trainer.Close(), t.dev.Close()) }
