package cli

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/datasets"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/transforms"
)

// TestPreviewGrid: stoke preview writes a PNG of the documented size whose every tile holds the
// pixels of the training sample it names, as training's transform (RandomResizedCrop, flip, then
// --augment) gives them with the sample's generator under --seed, and the labels are the samples'.
func TestPreviewGrid(t *testing.T) {
	root := noisyFolder(t, 2, 5, 24)
	out := filepath.Join(t.TempDir(), "grid.png")
	stdout, stderr, code := stoke(t, "preview", "--data", root, "--size", "16", "--batch", "6", "--seed", "7",
		"--augment", "trivialaugment", "--cols", "4", "--workers", "2", "--out", out, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum previewSummary
	lastJSON(t, stdout, &sum)
	if sum.Images != 6 || len(sum.Indices) != 6 || len(sum.Labels) != 6 || sum.Shape != "3x16x16" || sum.Mixed {
		t.Fatalf("summary %+v; want 6 images 3x16x16 with their indices and labels", sum)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s does not decode as PNG: %v", out, err)
	}
	cellW, cellH := 16+transforms.GridPad, 16+transforms.GridPad+transforms.GridLabelHeight
	wantW, wantH := transforms.GridPad+4*cellW, transforms.GridPad+2*cellH
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH || sum.Width != wantW || sum.Height != wantH {
		t.Fatalf("grid %v (summary %dx%d), want %dx%d", b, sum.Width, sum.Height, wantW, wantH)
	}

	folder, err := datasets.NewImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	chain := transforms.Train(16).Append(transforms.TrivialAugmentWide())
	w, r := chain.NewWorker(), rng.NewSample()
	seen := map[int]bool{}
	for k, idx := range sum.Indices {
		seen[idx] = true
		s, err := folder.Sample(t.Context(), idx)
		if err != nil {
			t.Fatal(err)
		}
		if int(sum.Labels[k]) != s.Label {
			t.Fatalf("tile %d: label %d, sample %d's is %d", k, sum.Labels[k], idx, s.Label)
		}
		want := make([]byte, 3*16*16)
		r.Reset(7, 0, idx)
		if err := w.Apply(want, s.Input, r.Rand); err != nil {
			t.Fatal(err)
		}
		x0, y0 := transforms.GridPad+(k%4)*cellW, transforms.GridPad+(k/4)*cellH
		for y := range 16 {
			for x := range 16 {
				cr, cg, cb, _ := img.At(x0+x, y0+y).RGBA()
				got := [3]byte{byte(cr >> 8), byte(cg >> 8), byte(cb >> 8)}
				p := y*16 + x
				if exp := [3]byte{want[p], want[256+p], want[512+p]}; got != exp {
					t.Fatalf("tile %d (sample %d) pixel (%d,%d) = %v, the augmented sample's %v", k, idx, x, y, got, exp)
				}
			}
		}
	}
	if len(seen) != 6 {
		t.Fatalf("indices %v repeat", sum.Indices)
	}

	_, stderr, code = stoke(t, "preview", "--data", root)
	if code != 2 || !strings.Contains(stderr, "--out is required") {
		t.Fatalf("no --out: exit %d, %s", code, stderr)
	}
}
