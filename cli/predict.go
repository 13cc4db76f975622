package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/models"
	"github.com/stoke-ml/stoke/train"
)

// predictJSON is one line of stoke predict --json per sample.
type predictJSON struct {
	Index     int       `json:"index"`
	Path      string    `json:"path,omitempty"`
	Class     int       `json:"class"`
	ClassName string    `json:"class_name,omitempty"`
	Label     int       `json:"label"`
	Logits    []float32 `json:"logits"`
}

// predictSummary is the last line of stoke predict --json.
type predictSummary struct {
	Model string `json:"model"`
	// Data and Split are the dataset and its split predicted (--data, --split); ValSplit, with
	// --val-split, the fraction of the train split held out and scored, with Seed.
	Data     string  `json:"data"`
	Split    string  `json:"split"`
	ValSplit float64 `json:"val_split,omitempty"`
	Seed     uint64  `json:"seed,omitempty"`
	Samples  int     `json:"samples"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	// Top5 is the fraction of samples whose label is among the 5 largest logits (of min(5,
	// classes)); ClassAcc the accuracy per class (0 for a class without samples); Confusion, with
	// --confusion, counts the samples per label (row) and predicted class (column).
	Top5      float64   `json:"top5"`
	ClassAcc  []float64 `json:"class_acc"`
	Confusion [][]int   `json:"confusion,omitempty"`
	// EMA says that the checkpoint's EMA of the weights was evaluated (stoke train --ema).
	EMA     bool    `json:"ema"`
	Seconds float64 `json:"seconds"`
	// Skipped counts the bad samples left out under --on-error skip (not predicted).
	Skipped int64 `json:"skipped"`
}

func runPredict(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("(--checkpoint PATH | --weights W.safetensors --model M [--classes N]) --data SPEC [--split test|val|train | --val-split F [--seed S]] "+
		"[--size N] [--batch B] [--workers W] [--device D] [--confusion] [--ema=false] [--json]\n"+
		"       stoke predict --checkpoint PATH [--top K] [--batch B] [--device D] [--ema=false] [--json] IMAGE|FOLDER|GLOB|- ...", true)
	lf.register(fs, 128)
	// predict sizes photos from the checkpoint, not 224 as the other commands do.
	fs.Lookup("size").Usage = "output image side; 0 keeps a fixed-shape dataset's own size (MNIST, CIFAR) " +
		"and means the checkpoint's input size for photos (with --weights: the crop of the weights' evaluation transform, " +
		"224 for most models; efficientnet_b1 240, efficientnet_v2_s and vit_b_16.IMAGENET1K_SWAG_E2E_V1 384)"
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train")
	weights := fs.String("weights", "",
		"the "+weightsHelp+", for the model --model, instead of --checkpoint")
	model := fs.String("model", "", "with --weights: the model ("+strings.Join(models.Names(), ", ")+")")
	allowNonFinite := fs.Bool("allow-nonfinite", false, "load weights or a checkpoint holding NaN or Inf (refused by default, naming the file and tensor)")
	classes := fs.Int("classes", 0, "with --weights: the model's number of classes (0: the data's)")
	split := fs.String("split", "", "split of --data to predict: train, val or test (default: test, else val, else train, the first the data has)")
	valSplit := fs.Float64("val-split", 0, "score the part of the train split that stoke train --val-split F held out: the same F and --seed as the training run")
	lf.registerDecode(fs, "test")
	useEMA := fs.Bool("ema", true, "with --checkpoint: evaluate the EMA of the weights when the checkpoint has one (stoke train --ema); "+
		"--ema=false: the trained weights")
	confusion := fs.Bool("confusion", false,
		fmt.Sprintf("print the confusion matrix (rows: labels, columns: predicted classes; models of at most %d classes); "+
			"with --json, in the summary's confusion field", maxConfusionClasses))
	top := fs.Int("top", 5, "with image files: the number of classes to print for each, best first")
	images, err := e.parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	if *model == "" {
		*model = weightsModel(*weights)
	}
	if len(images) > 0 {
		var other []string // flags of the dataset mode
		fs.Visit(func(f *flag.Flag) {
			if !slices.Contains([]string{"checkpoint", "top", "batch", "device", "ema", "json", "q", "data", "weights"}, f.Name) {
				other = append(other, "--"+f.Name)
			}
		})
		switch {
		case len(other) > 0:
			return fmt.Errorf("%w: %s score a dataset (--data); image files take --top, --batch, --device, --ema and --json", errUsage, strings.Join(other, ", "))
		case *ck == "":
			return fmt.Errorf("%w: image files are predicted with --checkpoint (it records the model, its transform and its classes)", errUsage)
		case lf.data != "" || *weights != "":
			return fmt.Errorf("%w: --data scores a dataset, and image files are predicted without it: choose one", errUsage)
		case *top < 1 || lf.batch < 1:
			return fmt.Errorf("%w: --top %d --batch %d; want >= 1", errUsage, *top, lf.batch)
		}
		return predictImages(ctx, e, os.Stdin, *ck, images, lf.device, lf.batch, *top, *useEMA)
	}
	if err := checkWeightsName(*weights); err != nil {
		return err
	}
	switch {
	case *ck == "" && *weights == "":
		return fmt.Errorf("%w: --checkpoint is required (or --weights and --model)", errUsage)
	case *ck != "" && *weights != "":
		return fmt.Errorf("%w: --checkpoint and --weights: choose one", errUsage)
	case *weights != "" && *model == "":
		return fmt.Errorf("%w: --weights needs --model (a weights name such as resnet50.IMAGENET1K_V2 or hf-hub:timm/NAME.TAG names its own)", errUsage)
	case *ck != "" && (*model != "" || *classes != 0):
		return fmt.Errorf("%w: --model and --classes go with --weights; a checkpoint names its model", errUsage)
	case *classes < 0 || *classes > maxDeclaredClasses:
		return fmt.Errorf("%w: --classes %d; want 1 to %d", errUsage, *classes, maxDeclaredClasses)
	case !(*valSplit >= 0 && *valSplit < 1):
		return fmt.Errorf("%w: --val-split %v; want the fraction stoke train held out, between 0 and 1", errUsage, *valSplit)
	case *valSplit > 0 && *split != "" && *split != "train":
		return fmt.Errorf("%w: --val-split scores a held-out part of the train split, not of --split %s", errUsage, *split)
	}
	lf.worldSize = 1 // one process predicts every sample
	if err := lf.check(); err != nil {
		return err
	}
	start := time.Now()

	// --split, or the test split when the data has one (a folder's test/ subfolder, MNIST's test
	// files), else val, else train (a folder of class subfolders: all of it), in order, with the
	// evaluation transform at the model's input size.
	// A data set with only a train split (a folder of class subfolders) is scored all, training
	// images included: said on stderr unless --split train asked for it.
	trainNote := ""
	if *valSplit > 0 {
		*split = "train"
	}
	if *split == "" {
		have, err := datasetSplits(ctx, lf.opener, lf.data)
		if err != nil {
			return err
		}
		*split = have[len(have)-1] // Splits orders them train, val, test
		if *split == "train" {
			trainNote = fmt.Sprintf("%s has no test or val split: scoring its train split, all of it, the images a model trained on it has seen "+
				"(--val-split F --seed S scores the part stoke train --val-split F --seed S held out; --split train says this is meant)", lf.data)
		}
	}
	ds, err := openDataset(ctx, lf.opener, lf.data, *split)
	if err != nil {
		return err
	}
	defer closeDataset(ds)
	folder, _ := ds.(*datasets.ImageFolder) // names the samples (by their index in the split)
	names := classNames(ds)
	var held *loaders.Subset
	if *valSplit > 0 {
		// The same split as stoke train's: it depends on the train split's length, F and the seed.
		if _, held, err = loaders.SplitValidation(ds, *valSplit, lf.seed); err != nil {
			return fmt.Errorf("%w: --val-split: %v", errUsage, err)
		}
		ds = held
	}
	if trainNote != "" {
		fmt.Fprintf(e.stderr, "stoke predict: note: %s\n", trainNote)
	}
	info := loaders.Describe(ds)
	src := *ck
	var tr *checkpointTrainer
	if *ck != "" {
		tr, err = openCheckpoint(ctx, *ck, lf.device, *allowNonFinite)
	} else {
		src = *weights
		if *classes == 0 {
			*classes = info.NumClasses
		}
		tr, err = openWeights(ctx, e, &lf, ds, *weights, *model, *classes, *allowNonFinite)
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
		if emaNote != "" {
			emaNote = ", the trained weights: " + emaNote
		}
	}
	m, dev := tr.Model(), tr.dev
	if *confusion && m.Classes() > maxConfusionClasses {
		return fmt.Errorf("%w: --confusion: the model in %s has %d classes; the matrix is written for at most %d "+
			"(--json's per-sample lines hold every label and predicted class)", errUsage, src, m.Classes(), maxConfusionClasses)
	}
	in := m.Input()
	if lf.size == 0 && info.Shape.C == 0 {
		lf.size = in.H
	}
	lf.model = m.Name() // the evaluation transform of its weights, unless the checkpoint records its own
	pre := tr.Preprocess()
	if pre != nil {
		lf.pre = pre
	}
	// relabel, when the data names its classes and they are not the model's (a folder of some of
	// them), maps the data's labels to the model's classes by name: a folder's labels are its
	// class folders in sorted order, not the numbers the model learned the classes under.
	var relabel []int32
	switch {
	case pre != nil && pre.Classes != nil && names != nil && !slices.Equal(names, pre.Classes):
		relabel = make([]int32, len(names))
		for i, n := range names {
			j := slices.Index(pre.Classes, n)
			if j < 0 {
				return fmt.Errorf("%s has class %q, which the model in %s was not trained on (its classes: %s)", info.Name, n, src, listNames(pre.Classes))
			}
			relabel[i] = int32(j)
		}
		fmt.Fprintf(e.stderr, "stoke predict: note: %s has %d of the model's %d classes: its labels are mapped to them by name\n", info.Name, len(names), m.Classes())
	case info.NumClasses != 0 && info.NumClasses != m.Classes():
		return fmt.Errorf("%s has %d classes; the model in %s was trained on %d", info.Name, info.NumClasses, src, m.Classes())
	}
	if pre != nil && pre.Classes != nil {
		names = pre.Classes
	}
	ld, err := lf.loader(ds, "test", false, dev, tr.Stream()) // "test": the evaluation transform
	if err != nil {
		return err
	}
	defer ld.Close()
	if s := ld.Shape(); s.C != in.C || s.H != in.H || s.W != in.W {
		return fmt.Errorf("%s gives %dx%dx%d images; the model in %s takes %v (set --size)", info.Name, s.C, s.H, s.W, src, in)
	}
	p, err := tr.Predict(ctx, train.FromLoader(ld))
	if err != nil {
		return err
	}
	if relabel != nil {
		for i, l := range p.Labels {
			p.Labels[i] = relabel[l] // the loader checked l against the data's classes
		}
	}
	if held != nil { // name the samples by their index in the train split, as the folder does
		if p.Indices == nil {
			p.Indices = make([]int, p.Len())
			for i := range p.Indices {
				p.Indices[i] = i
			}
		}
		for i, x := range p.Indices {
			p.Indices[i] = held.Index(x)
		}
	}

	sc, err := scorePredictions(ctx, e, p, folder, names, *confusion)
	if err != nil {
		return err
	}
	correct, nc := sc.correct, p.Classes
	st := ld.Stats()
	sum := predictSummary{Model: m.Name(), Data: lf.data, Split: *split, ValSplit: *valSplit, Samples: p.Len(), Correct: correct,
		Seconds: time.Since(start).Seconds(), Skipped: st.Skipped, ClassAcc: make([]float64, nc), EMA: ema, Confusion: sc.matrix}
	if held != nil {
		sum.Seed = lf.seed
	}
	if p.Len() > 0 {
		sum.Accuracy, sum.Top5 = float64(correct)/float64(p.Len()), float64(sc.top5)/float64(p.Len())
	}
	for c, n := range sc.count {
		if n > 0 {
			sum.ClassAcc[c] = float64(sc.right[c]) / float64(n)
		}
	}
	if !e.json {
		weights := emaNote
		if ema {
			weights = ", the EMA's weights"
		}
		what := *split + " split"
		if held != nil {
			what = fmt.Sprintf("the part of the train split --val-split %g --seed %d holds out", *valSplit, lf.seed)
		}
		e.printf("accuracy %.2f%% (%d of %d, %s of %s%s), top-5 %.2f%%\n", 100*sum.Accuracy, correct, p.Len(), what, lf.data, weights, 100*sum.Top5)
		if *confusion {
			if err := writeConfusion(ctx, e, sc.matrix, sum.ClassAcc, names); err != nil {
				return err
			}
		}
		lf.reportSkipped(e, st.Skipped, st.LastSkipped)
	}
	return e.emit(sum)
}

// scores are what predict counts over the samples: per label, the samples and those predicted
// right, the top-5 hits, and with --confusion the matrix (rows: labels, columns: predicted classes).
type scores struct {
	correct, top5 int
	right, count  []int
	matrix        [][]int
}

// scorePredictions counts p's scores and reports every sample (a line of text, or of JSON); it
// stops when ctx is cancelled (Ctrl-C). folder, if not nil, names the samples' files, and names,
// if any, the classes.
func scorePredictions(ctx context.Context, e *env, p *train.Predictions, folder *datasets.ImageFolder, names []string, confusion bool) (*scores, error) {
	nc := p.Classes
	sc := &scores{right: make([]int, nc), count: make([]int, nc)}
	if confusion {
		sc.matrix = make([][]int, nc)
		for i := range sc.matrix {
			sc.matrix[i] = make([]int, nc)
		}
	}
	for i := range p.Len() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := predictJSON{Index: i, Class: p.Class(i), Label: int(p.Labels[i]), Logits: p.Logits[i*p.Classes : (i+1)*p.Classes]}
		if p.Indices != nil {
			r.Index = p.Indices[i]
		}
		if folder != nil {
			r.Path = folder.Path(r.Index)
		}
		if r.Class < len(names) {
			r.ClassName = names[r.Class]
		}
		if r.Label < 0 || r.Label >= nc {
			return nil, fmt.Errorf("sample %d has label %d; the model has %d classes", r.Index, r.Label, nc)
		}
		sc.count[r.Label]++
		if sc.matrix != nil {
			sc.matrix[r.Label][r.Class]++
		}
		if r.Class == r.Label {
			sc.correct++
			sc.right[r.Label]++
		}
		if p.InTopK(i, r.Label, min(5, nc)) {
			sc.top5++
		}
		if e.json {
			if err := e.emit(r); err != nil {
				return nil, err
			}
			continue
		}
		e.printf("%d\tclass %d\tlabel %d\t%s\n", r.Index, r.Class, r.Label, r.Path)
	}
	return sc, nil
}

// maxConfusionClasses bounds --confusion's dense matrix (classes x classes counts: 8 MB and
// 1,000 rows of 1,000 columns at ImageNet's 1,000 classes).
const maxConfusionClasses = 1000

// writeConfusion prints the confusion matrix: a row per label, a column per predicted class, each
// row ending with the label's accuracy; names, if any, are the classes' names. It stops when ctx
// is cancelled (Ctrl-C).
func writeConfusion(ctx context.Context, e *env, matrix [][]int, acc []float64, names []string) error {
	width := 5
	for _, row := range matrix {
		for _, v := range row {
			width = max(width, len(fmt.Sprint(v))+1)
		}
	}
	label := func(c int) string {
		if c < len(names) {
			return fmt.Sprintf("%d %s", c, names[c])
		}
		return fmt.Sprint(c)
	}
	first := len("label")
	for c := range matrix {
		first = max(first, len(label(c)))
	}
	e.printf("confusion matrix (rows: label, columns: predicted class):\n%-*s", first, "label")
	for c := range matrix {
		e.printf("%*d", width, c)
	}
	e.printf("  accuracy\n")
	for c, row := range matrix {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.printf("%-*s", first, label(c))
		for _, v := range row {
			e.printf("%*d", width, v)
		}
		e.printf("  %6.2f%%\n", 100*acc[c])
	}
	return nil
}

// listNames writes class names for a message: the first ten, then how many more.
func listNames(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
}
