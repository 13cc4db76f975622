package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/loaders"
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
	// Data and Split are the dataset and its split predicted (--data, --split).
	Data     string  `json:"data"`
	Split    string  `json:"split"`
	Samples  int     `json:"samples"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	Seconds  float64 `json:"seconds"`
	// Skipped counts the bad samples left out under --on-error skip (not predicted).
	Skipped int64 `json:"skipped"`
}

func runPredict(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("(--checkpoint PATH | --weights W.safetensors --model M [--classes N]) --data SPEC [--split test|val|train] [--size N] [--batch B] [--workers W] "+
		"[--device D] [--json]", true)
	lf.register(fs, 128)
	// predict sizes photos from the checkpoint, not 224 as the other commands do.
	fs.Lookup("size").Usage = "output image side; 0 keeps a fixed-shape dataset's own size (MNIST, CIFAR) and means the checkpoint's input size for photos (224 with --weights)"
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train")
	weights := fs.String("weights", "", "safetensors weights (stoke export's, or a torchvision resnet's state_dict) for the model --model, instead of --checkpoint")
	model := fs.String("model", "", "with --weights: the model ("+strings.Join(train.Models(), ", ")+")")
	classes := fs.Int("classes", 0, "with --weights: the model's number of classes (0: the data's)")
	split := fs.String("split", "", "split of --data to predict: train, val or test (default: test, else val, else train, the first the data has)")
	lf.registerDecode(fs, "test")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	switch {
	case *ck == "" && *weights == "":
		return fmt.Errorf("%w: --checkpoint is required (or --weights and --model)", errUsage)
	case *ck != "" && *weights != "":
		return fmt.Errorf("%w: --checkpoint and --weights: choose one", errUsage)
	case *weights != "" && *model == "":
		return fmt.Errorf("%w: --weights needs --model", errUsage)
	case *ck != "" && (*model != "" || *classes != 0):
		return fmt.Errorf("%w: --model and --classes go with --weights; a checkpoint names its model", errUsage)
	case *classes < 0 || *classes > maxClasses:
		return fmt.Errorf("%w: --classes %d; want 1 to %d", errUsage, *classes, maxClasses)
	}
	lf.worldSize = 1 // one process predicts every sample
	if err := lf.check(); err != nil {
		return err
	}
	start := time.Now()

	// --split, or the test split when the data has one (a folder's test/ subfolder, MNIST's test
	// files), else val, else train (a folder of class subfolders: all of it), in order, with the
	// evaluation transform at the model's input size.
	if *split == "" {
		have, err := datasetSplits(ctx, lf.opener, lf.data)
		if err != nil {
			return err
		}
		*split = have[len(have)-1] // Splits orders them train, val, test
	}
	ds, err := openDataset(ctx, lf.opener, lf.data, *split)
	if err != nil {
		return err
	}
	defer closeDataset(ds)
	info := loaders.Describe(ds)
	src := *ck
	var tr *checkpointTrainer
	if *ck != "" {
		tr, err = openCheckpoint(*ck, lf.device)
	} else {
		src = *weights
		if *classes == 0 {
			*classes = info.NumClasses
		}
		tr, err = openWeights(&lf, ds, *weights, *model, *classes)
	}
	if err != nil {
		return err
	}
	defer tr.Close()
	m, dev := tr.Model(), tr.dev
	in := m.Input()
	if lf.size == 0 && info.Shape.C == 0 {
		lf.size = in.H
	}
	if info.NumClasses != 0 && info.NumClasses != m.Classes() {
		return fmt.Errorf("%s has %d classes; the model in %s was trained on %d", info.Name, info.NumClasses, src, m.Classes())
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

	folder, _ := ds.(*datasets.ImageFolder)
	correct := 0
	for i := range p.Len() {
		r := predictJSON{Index: i, Class: p.Class(i), Label: int(p.Labels[i]), Logits: p.Logits[i*p.Classes : (i+1)*p.Classes]}
		if p.Indices != nil {
			r.Index = p.Indices[i]
		}
		if folder != nil {
			r.Path = folder.Path(r.Index)
			r.ClassName = folder.Classes()[r.Class]
		}
		if r.Class == r.Label {
			correct++
		}
		if e.json {
			if err := e.emit(r); err != nil {
				return err
			}
			continue
		}
		e.printf("%d\tclass %d\tlabel %d\t%s\n", r.Index, r.Class, r.Label, r.Path)
	}
	st := ld.Stats()
	sum := predictSummary{Model: m.Name(), Data: lf.data, Split: *split, Samples: p.Len(), Correct: correct, Seconds: time.Since(start).Seconds(), Skipped: st.Skipped}
	if p.Len() > 0 {
		sum.Accuracy = float64(correct) / float64(p.Len())
	}
	if !e.json {
		e.printf("accuracy %.2f%% (%d of %d, %s split of %s)\n", 100*sum.Accuracy, correct, p.Len(), *split, lf.data)
		lf.reportSkipped(e, st.Skipped, st.LastSkipped)
	}
	return e.emit(sum)
}
