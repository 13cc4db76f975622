package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/predict"
	"github.com/stoke-ml/stoke/transforms"
)

// imagePrediction is one line of stoke predict --json over images: the file, its top classes
// best first with their probabilities (and names, when the checkpoint records them), the logits.
type imagePrediction struct {
	Path   string     `json:"path"`
	Top    []topClass `json:"top"`
	Logits []float32  `json:"logits"`
}

type topClass struct {
	Class     int     `json:"class"`
	ClassName string  `json:"class_name,omitempty"`
	Prob      float32 `json:"prob"`
}

// imagesSummary is the last line of stoke predict --json over images.
type imagesSummary struct {
	Model   string  `json:"model"`
	Images  int     `json:"images"`
	EMA     bool    `json:"ema"`
	Seconds float64 `json:"seconds"`
}

// predictImages classifies image files with the checkpoint ck (stoke predict --checkpoint CK
// IMAGE...): each with the checkpoint's own evaluation transform (models.Preprocess), gray or colour
// converted to the channels the model takes, top classes by name when the checkpoint names them.
// A checkpoint written before stoke recorded its data is refused: its normalization is not known.
// args are files, folders (their image files, not recursively), globs, or "-" for paths on stdin,
// one per line. A file that is not an image fails the command naming it, after the lines of those
// before.
func predictImages(ctx context.Context, e *env, stdin io.Reader, ck string, args []string, device string, batch, topK int, useEMA bool) error {
	start := time.Now()
	paths, err := imagePaths(args, stdin)
	if err != nil {
		return err
	}
	batch = min(batch, len(paths)) // the Predictor stages a whole batch

	tr, err := openCheckpoint(ctx, ck, device, false)
	if err != nil {
		return err
	}
	defer tr.Close()
	if tr.Preprocess() == nil {
		return fmt.Errorf("%s does not record the transform and normalization of its data (it was written before stoke recorded them): "+
			"score it on its data with --data SPEC", ck)
	}
	ema := false
	if useEMA {
		if ema, _, err = tr.useEMA(ctx); err != nil {
			return err
		}
	}
	p, err := predict.New(tr.Trainer, predict.Config{Batch: batch, TopK: topK})
	if err != nil {
		return err
	}
	defer p.Close()
	names, m := p.Classes(), p.Model()
	for lo := 0; lo < len(paths); lo += batch {
		part := paths[lo:min(lo+batch, len(paths))]
		inputs := make([]transforms.Input, len(part))
		for i, path := range part {
			b, err := datasets.ReadImage(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			inputs[i] = transforms.Input{Encoded: b}
		}
		preds, err := p.Predict(ctx, inputs)
		var bad *predict.ImageError
		if errors.As(err, &bad) {
			return fmt.Errorf("%s: %w", part[bad.Index], bad.Err)
		}
		if err != nil {
			return err
		}
		for i, pr := range preds {
			r := imagePrediction{Path: part[i], Logits: pr.Logits}
			for _, c := range pr.Top {
				t := topClass{Class: c, Prob: pr.Probs[c]}
				if c < len(names) {
					t.ClassName = names[c]
				}
				r.Top = append(r.Top, t)
			}
			if err := e.emit(r); err != nil {
				return err
			}
			if !e.json {
				e.printf("%s: %s\n", r.Path, topText(r.Top))
			}
		}
	}
	return e.emit(imagesSummary{Model: m.Name(), Images: len(paths), EMA: ema, Seconds: time.Since(start).Seconds()})
}

// topText writes top classes as "cat 91.2%, dog 5.1%" (class numbers when unnamed).
func topText(top []topClass) string {
	s := make([]string, len(top))
	for i, t := range top {
		name := t.ClassName
		if name == "" {
			name = fmt.Sprintf("class %d", t.Class)
		}
		s[i] = fmt.Sprintf("%s %.1f%%", name, 100*t.Prob)
	}
	return strings.Join(s, ", ")
}

// imagePaths expands stoke predict's image arguments: a file as it is, a folder to its image files
// (sorted, not recursively), a pattern with *, ? or [ to its matches, "-" to the paths on stdin
// (one per line, blank lines skipped). An argument that names nothing is an error.
func imagePaths(args []string, stdin io.Reader) ([]string, error) {
	var paths []string
	if n := len(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a != "-" })); n > 1 {
		return nil, fmt.Errorf("%w: \"-\" given twice: stdin is read once", errUsage)
	}
	for _, a := range args {
		switch {
		case a == "-":
			sc := bufio.NewScanner(stdin)
			for sc.Scan() {
				if line := strings.TrimSpace(sc.Text()); line != "" {
					paths = append(paths, line)
				}
			}
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("reading image paths from stdin: %w", err)
			}
		case strings.ContainsAny(a, "*?["):
			matches, err := filepath.Glob(a)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", errUsage, a, err)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("%s matches no file", a)
			}
			paths = append(paths, matches...)
		default:
			st, err := os.Stat(a)
			if err != nil {
				return nil, err
			}
			if !st.IsDir() {
				paths = append(paths, a)
				continue
			}
			entries, err := os.ReadDir(a)
			if err != nil {
				return nil, err
			}
			n := len(paths)
			for _, en := range entries {
				if !en.IsDir() && datasets.IsImageFile(en.Name()) {
					paths = append(paths, filepath.Join(a, en.Name()))
				}
			}
			if len(paths) == n {
				return nil, fmt.Errorf("%s holds no image file (.jpg, .jpeg, .png, .gif, .bmp, .webp; its subfolders are not read)", a)
			}
			slices.Sort(paths[n:])
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no image to predict", errUsage)
	}
	return paths, nil
}
