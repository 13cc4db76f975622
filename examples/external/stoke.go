package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/stoke-ml/stoke/cli"
	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/predict"
	"github.com/stoke-ml/stoke/transforms"
)

// A stoke of one's own: the command line as a library (package cli), in a program that imports
// package layers, knows se-net and its layers. ownStoke runs it in-process (cli.Run) as
// ./cmd/stoke runs it as a binary (cli.Main): it trains se-net on a folder of images, predicts
// the folder's test split and exports the checkpoint, which a prebuilt stoke refuses (`unknown
// model "se-net"`, or for a model of its own built with these layers `layer "layernorm2d 16" is
// not one of the package's layers nor registered`); and the library's
// Predictor, given the same image files, gives the same logits and class for each.

// colours are the classes of writeColours' images: the colour each is made of.
var colours = map[string]color.RGBA{"red": {200, 40, 40, 255}, "green": {40, 200, 40, 255}, "blue": {40, 40, 200, 255}, "grey": {128, 128, 128, 255}}

// writeColours writes an image folder into dir: train/ and test/, each with a class folder per
// colour of 16x16 PNGs of that colour under noise (perClass in train/, perClass/4 in test/).
func writeColours(dir string, perClass int) error {
	r := rand.New(rand.NewPCG(5, 6))
	for _, split := range []struct {
		name string
		n    int
	}{{"train", perClass}, {"test", perClass / 4}} {
		for class, c := range colours {
			d := filepath.Join(dir, split.name, class)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			for i := range split.n {
				im := image.NewRGBA(image.Rect(0, 0, 16, 16))
				noisy := func(v uint8) uint8 { return uint8(min(255, max(0, int(v)+r.IntN(121)-60))) }
				for p := 0; p < len(im.Pix); p += 4 {
					im.Pix[p], im.Pix[p+1], im.Pix[p+2], im.Pix[p+3] = noisy(c.R), noisy(c.G), noisy(c.B), 255
				}
				var b bytes.Buffer
				if err := png.Encode(&b, im); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stoke runs one command line of this program's own stoke and returns its standard output.
func stoke(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	if code := cli.Run(ctx, args, &stdout, &stderr); code != 0 {
		return nil, fmt.Errorf("stoke %v: exit %d: %s", args, code, stderr.String())
	}
	return stdout.Bytes(), nil
}

// ownStoke trains, predicts and exports se-net through this program's stoke (cli.Run) and checks
// predict's classes and accuracy against the library's Predictor on the same files.
func ownStoke(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "stoke-external-cli")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data, ck := filepath.Join(dir, "colours"), filepath.Join(dir, "se.ck")
	if err := writeColours(data, 48); err != nil {
		return err
	}
	if _, err := stoke(ctx, "train", "--model", "se-net", "--data", data, "--size", "16", "--batch", "16", "--epochs", "3",
		"--lr", "0.01", "--checkpoint", ck, "-q"); err != nil {
		return err
	}
	out, err := stoke(ctx, "predict", "--checkpoint", ck, "--data", data, "--json")
	if err != nil {
		return err
	}
	// predict --json: a line per sample (its file, the class predicted), then the summary.
	type line struct {
		Path     string    `json:"path"`
		Class    int       `json:"class"`
		Label    int       `json:"label"`
		Logits   []float32 `json:"logits"`
		Samples  int       `json:"samples"`
		Accuracy *float64  `json:"accuracy"`
	}
	var samples []line
	var summary line
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("stoke predict --json: %w", err)
		}
		if l.Accuracy != nil {
			summary = l
		} else {
			samples = append(samples, l)
		}
	}
	if summary.Accuracy == nil || summary.Samples != len(samples) || len(samples) == 0 {
		return fmt.Errorf("stoke predict --json gave %d samples and the summary %+v", len(samples), summary)
	}
	// The library's Predictor, on the same files: the model's evaluation transform by default, as
	// stoke predict applies it.
	dev, err := gpu.Open("cpu")
	if err != nil {
		return err
	}
	defer dev.Close()
	p, err := predict.Open(ctx, ck, dev, false, predict.Config{})
	if err != nil {
		return err
	}
	defer p.Close()
	inputs := make([]transforms.Input, len(samples))
	for i, s := range samples {
		if inputs[i].Encoded, err = os.ReadFile(s.Path); err != nil {
			return err
		}
	}
	preds, err := p.Predict(ctx, inputs)
	if err != nil {
		return err
	}
	correct := 0
	for i, s := range samples {
		if preds[i].Top[0] != s.Class || !near(preds[i].Logits, s.Logits) {
			return fmt.Errorf("%s: stoke predict says class %d (logits %v), the library's Predictor %d (%v)", s.Path, s.Class, s.Logits,
				preds[i].Top[0], preds[i].Logits)
		}
		if s.Class == s.Label {
			correct++
		}
	}
	if acc := float64(correct) / float64(len(samples)); acc != *summary.Accuracy || acc < 0.9 {
		return fmt.Errorf("stoke predict reports accuracy %.4f, the library's classes score %.4f; want them equal and >= 0.9", *summary.Accuracy, acc)
	}
	for _, out := range []string{"se-net.safetensors", "se-net.onnx"} {
		if _, err := stoke(ctx, "export", "--checkpoint", ck, "--data", data, "--out", filepath.Join(dir, out)); err != nil {
			return err
		}
	}
	fmt.Printf("se-net trained, predicted and exported by this program's stoke: accuracy %.1f%% on %d test images, the library's Predictor agreeing on each\n",
		100**summary.Accuracy, len(samples))
	return nil
}

// near reports whether logits a and b agree within 1e-4 of their largest magnitude.
func near(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	scale := float32(1e-6)
	for _, v := range a {
		scale = max(scale, v, -v)
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-4*scale || d < -1e-4*scale {
			return false
		}
	}
	return true
}
