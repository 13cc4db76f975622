package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image/png"
	"os"
	"strconv"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// previewSummary is stoke preview's --json line.
type previewSummary struct {
	Out    string `json:"out"`
	Data   string `json:"data"`
	Images int    `json:"images"`
	Shape  string `json:"shape"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// Indices and Labels are the tiles' dataset indices and class ids, in the grid's order (rows
	// left to right, top to bottom).
	Indices []int   `json:"indices"`
	Labels  []int32 `json:"labels"`
	// Mixed says that MixUp or CutMix blended the batch (--mixup, --cutmix); labels are then each
	// image's own class, before the mix.
	Mixed bool `json:"mixed"`
}

// runPreview writes the first training batch of --data, as stoke train's loader gives it with the
// same flags (crop, flip, --augment, --random-erasing, --mixup, --cutmix, --seed; before the
// normalization, which the trainer applies on the device), as a PNG grid labelled by class.
func runPreview(ctx context.Context, e *env, args []string) error {
	var lf loaderFlags
	fs := e.flags("--data SPEC [--size N] [--batch B] [--augment P] [--random-erasing P] [--mixup A] [--cutmix A] "+
		"[--seed S] [--cols C] --out grid.png [--json]", true)
	lf.register(fs, 16)
	lf.augment = &augmentFlags{}
	lf.augment.register(fs)
	lf.registerDecode(fs, "train")
	out := fs.String("out", "", "PNG file to write the grid to")
	cols := fs.Int("cols", 0, "tiles a row (0: 8, as torchvision's make_grid)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	switch {
	case lf.data == "":
		return fmt.Errorf("%w: --data is required", errUsage)
	case *out == "":
		return fmt.Errorf("%w: --out is required (the PNG to write)", errUsage)
	case *cols < 0:
		return fmt.Errorf("%w: --cols %d; want >= 0", errUsage, *cols)
	}
	lf.worldSize = 1
	if err := lf.check(); err != nil {
		return err
	}
	if _, err := lf.augment.transforms(nil); err != nil {
		return err
	}
	if _, err := lf.augment.mix(); err != nil {
		return err
	}
	ds, err := openDataset(ctx, lf.opener, lf.data, "train")
	if err != nil {
		return err
	}
	defer closeDataset(ds)
	dev, err := gpu.Open(lf.device)
	if err != nil {
		return err
	}
	defer dev.Close()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	ld, err := lf.loader(ds, "train", true, dev, nil)
	if err != nil {
		return err
	}
	defer ld.Close()

	sum := previewSummary{Out: *out, Data: lf.data}
	var pixels []byte
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			return err
		}
		pixels, sum.Labels, err = batchToHost(ctx, s, b)
		sum.Indices, sum.Images, sum.Shape, sum.Mixed = b.Indices, b.N, b.Shape.String(), b.Mix.Mixed
		b.Release()
		if err != nil {
			return err
		}
		if b.N > 0 { // a batch the Skip policy emptied shows nothing
			break
		}
	}
	if sum.Images == 0 {
		return fmt.Errorf("%s has no training images to preview", lf.data)
	}
	names := classNames(ds)
	labels := make([]string, len(sum.Labels))
	for i, l := range sum.Labels {
		labels[i] = strconv.Itoa(int(l))
		if int(l) < len(names) {
			labels[i] = names[l]
		}
	}
	img, _, err := transforms.Grid(pixels, sum.Images, ld.Shape(), labels, *cols)
	if err != nil {
		return err
	}
	sum.Width, sum.Height = img.Rect.Dx(), img.Rect.Dy()
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := errors.Join(png.Encode(f, img), f.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if !e.json {
		e.printf("wrote %s: %d images %s of %s's training batch 0 (seed %d), %dx%d pixels\n",
			*out, sum.Images, sum.Shape, lf.data, lf.seed, sum.Width, sum.Height)
	}
	return e.emit(sum)
}

// batchToHost copies b's images and int32 class ids to the host through s.
func batchToHost(ctx context.Context, s gpu.Stream, b *loaders.Batch) ([]byte, []int32, error) {
	if b.N == 0 {
		return nil, nil, nil
	}
	pixels, raw := make([]byte, b.N*b.Shape.Len()), make([]byte, 4*b.N)
	if b.Ready != nil {
		if err := s.Wait(b.Ready); err != nil {
			return nil, nil, err
		}
	}
	if err := s.CopyD2H(pixels, b.Images, 0); err != nil {
		return nil, nil, err
	}
	if err := s.CopyD2H(raw, b.Labels, 0); err != nil {
		return nil, nil, err
	}
	if err := s.Synchronize(ctx); err != nil {
		return nil, nil, err
	}
	labels := make([]int32, b.N)
	for i := range labels {
		labels[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return pixels, labels, nil
}

// classNames are the class names ds gives (a folder's subfolders, Fashion-MNIST's classes, through
// a subset or a declared class count), else nil: labels show as numbers.
func classNames(ds loaders.Dataset) []string { return loaders.Describe(ds).Classes }
