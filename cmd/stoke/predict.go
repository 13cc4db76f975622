package main

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	Model    string  `json:"model"`
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
	fs := e.flags("--checkpoint PATH --data SPEC [--size N] [--batch B] [--workers W] [--device D] [--json]", true)
	lf.register(fs, 128)
	ck := fs.String("checkpoint", "", "checkpoint written by stoke train (required)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *ck == "" {
		return fmt.Errorf("%w: --checkpoint is required", errUsage)
	}
	lf.worldSize = 1 // one process predicts every sample
	if err := lf.check(); err != nil {
		return err
	}
	start := time.Now()
	tr, err := openCheckpoint(*ck, lf.device)
	if err != nil {
		return err
	}
	defer tr.Close()
	m, dev := tr.Model(), tr.dev

	// The test split when the data has one (a folder's test/ subfolder, MNIST's test files), else
	// all of it (a folder of class subfolders, shards), in order, with the evaluation transform at
	// the model's input size.
	split := "test"
	ds, err := lf.opener.OpenContext(ctx, lf.data, split)
	if errors.Is(err, loaders.ErrNoSplit) {
		split = "train"
		ds, err = lf.opener.OpenContext(ctx, lf.data, split)
	}
	if err != nil {
		return err
	}
	defer closeDataset(ds)
	info := loaders.Describe(ds)
	in := m.Input()
	if lf.size == 0 && info.Shape.C == 0 {
		lf.size = in.H
	}
	if info.NumClasses != 0 && info.NumClasses != m.Classes() {
		return fmt.Errorf("%s has %d classes; the model in %s was trained on %d", info.Name, info.NumClasses, *ck, m.Classes())
	}
	ld, err := lf.loader(ds, "test", false, dev, tr.Stream()) // "test": the evaluation transform
	if err != nil {
		return err
	}
	defer ld.Close()
	if s := ld.Shape(); s.C != in.C || s.H != in.H || s.W != in.W {
		return fmt.Errorf("%s gives %dx%dx%d images; the model in %s takes %v (set --size)", info.Name, s.C, s.H, s.W, *ck, in)
	}
	p, err := tr.Predict(ctx, train.FromLoader(ld))
	if err != nil {
		return err
	}

	folder, _ := ds.(*loaders.ImageFolder)
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
	sum := predictSummary{Model: m.Name(), Split: split, Samples: p.Len(), Correct: correct, Seconds: time.Since(start).Seconds(), Skipped: st.Skipped}
	if p.Len() > 0 {
		sum.Accuracy = float64(correct) / float64(p.Len())
	}
	if !e.json {
		e.printf("accuracy %.2f%% (%d of %d, %s split)\n", 100*sum.Accuracy, correct, p.Len(), split)
		lf.reportSkipped(e, st.Skipped, st.LastSkipped)
	}
	return e.emit(sum)
}
