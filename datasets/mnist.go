package datasets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// maxIDXBytes bounds what an IDX header may declare, so that a lying header cannot make the parser
// compute an overflowing or absurd size; actual memory grows only with the bytes really present.
// maxIDXItem bounds one image (16 MiB: a 4096 x 4096 gray image); IDX files hold small images.
const (
	maxIDXBytes = 1 << 32
	maxIDXItem  = 1 << 24
)

// MNIST is the MNIST digits dataset (or any IDX pair of uint8 images N x H x W and labels N), held
// in memory. Samples are raw pixels, H x W x 1.
//
// Fashion-MNIST has MNIST's file names, format and shapes, so OpenMNIST tells the two apart by
// their content (see OpenMNIST): a folder of Fashion-MNIST is named "fashion-mnist", normalized
// with its own mean and std, and its classes have names (Classes).
type MNIST struct {
	name    string
	images  []byte
	labels  []byte
	h, w    int
	fashion bool
}

var (
	_ loaders.Dataset   = (*MNIST)(nil)
	_ loaders.Describer = (*MNIST)(nil)
)

// ParseMNIST reads an IDX image file (magic 0x00000803, uint8, 3 dimensions) and an IDX label file
// (magic 0x00000801) from plain or gzip-compressed readers. name is used in errors and Info.
// Counts that disagree, truncated data, trailing bytes and wrong magic numbers are errors wrapping
// ErrCorrupt; memory is only allocated for bytes actually read.
func ParseMNIST(name string, images, labels io.Reader) (*MNIST, error) {
	dims, img, err := parseIDX(images, 3)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s images: %w", name, err)
	}
	ldims, lab, err := parseIDX(labels, 1)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s labels: %w", name, err)
	}
	if dims[0] != ldims[0] {
		return nil, fmt.Errorf("datasets: %s: %d images but %d labels: %w", name, dims[0], ldims[0], loaders.ErrCorrupt)
	}
	if dims[0] == 0 || dims[1] == 0 || dims[2] == 0 {
		return nil, fmt.Errorf("datasets: %s: images %v: %w", name, dims, loaders.ErrEmpty)
	}
	return &MNIST{name: name, images: img, labels: lab, h: dims[1], w: dims[2]}, nil
}

// parseIDX reads one uint8 IDX file with want dimensions, decompressing gzip or zstd if the bytes
// start with their magic number.
func parseIDX(r io.Reader, want int) ([]int, []byte, error) {
	r, closeFn, err := decompress(r)
	if err != nil {
		return nil, nil, err
	}
	defer closeFn()
	dims, size, err := readIDXHeader(r, want)
	if err != nil {
		return nil, nil, err
	}
	data, err := readAtMost(r, int64(size)+1)
	if err != nil {
		return nil, nil, fmt.Errorf("idx data: %w: %w", loaders.ErrCorrupt, err)
	}
	if uint64(len(data)) != size {
		what := "truncated"
		if uint64(len(data)) > size {
			what = "trailing bytes"
		}
		return nil, nil, fmt.Errorf("idx data %v: %s (%d bytes, want %d): %w", dims, what, len(data), size, loaders.ErrCorrupt)
	}
	return dims, data, nil
}

// readIDXHeader reads the header of a uint8 IDX file with want dimensions from the decompressed r:
// the dimensions and the data's size in bytes, checked against maxIDXItem, maxIDXBytes and the
// memory budget.
func readIDXHeader(r io.Reader, want int) ([]int, uint64, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, 0, fmt.Errorf("idx header: %w: %w", loaders.ErrCorrupt, err)
	}
	if head[0] != 0 || head[1] != 0 || head[2] != 0x08 || int(head[3]) != want {
		return nil, 0, fmt.Errorf("idx magic % x, want 00 00 08 %02x: %w", head, want, loaders.ErrCorrupt)
	}
	dims := make([]int, want)
	for i := range dims {
		var d uint32
		if err := binary.Read(r, binary.BigEndian, &d); err != nil {
			return nil, 0, fmt.Errorf("idx dimension %d: %w: %w", i, loaders.ErrCorrupt, err)
		}
		dims[i] = int(d)
	}
	// Each factor is below 2^32, so the products are checked before they can overflow.
	item := uint64(1)
	for _, d := range dims[1:] {
		if item *= uint64(d); item > maxIDXItem {
			return nil, 0, fmt.Errorf("idx dimensions %v declare items of over %d bytes: %w", dims, maxIDXItem, loaders.ErrCorrupt)
		}
	}
	size := item * uint64(dims[0])
	if size > maxIDXBytes || size > uint64(loaders.DefaultMemoryBudget()) {
		return nil, 0, fmt.Errorf("idx dimensions %v declare %d bytes, over %d or the memory budget: %w", dims, size, uint64(maxIDXBytes), loaders.ErrCorrupt)
	}
	return dims, size, nil
}

// readAtMost reads r to its end or to limit bytes. Memory grows with the bytes really present, by
// at most doubling and never past limit (io.ReadAll may overshoot twice its final size).
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b := make([]byte, 0, min(limit, 1<<20))
	for {
		if len(b) == cap(b) {
			if int64(len(b)) >= limit {
				return b, nil
			}
			b = slices.Grow(b, int(min(int64(2*len(b)), limit)-int64(len(b))))
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// maxZstdWindow bounds the history a zstd stream may ask the decoder for.
const maxZstdWindow = 1 << 27

// decompress returns r itself, or a decompressing reader if r starts with the gzip or zstd magic
// number. The returned function releases the decompressor.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w: %w", loaders.ErrCorrupt, err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// One goroutine-free decoder: it lives for one file and the loader already parallelizes.
		// The window a frame header may ask for is bounded (128 MiB: zstd --long=27), so that a
		// tiny file cannot make the decoder allocate gigabytes of history.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w: %w", loaders.ErrCorrupt, err)
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// OpenMNIST loads split "train" or "test" of MNIST from dir, which holds the four original files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte), each plain or with a .gz suffix. dir may also be a torchvision root
// holding MNIST/raw/ (or FashionMNIST/raw/).
//
// A folder of Fashion-MNIST, whose files have the same names and shapes, is told from MNIST by
// its pixels: the mean pixel of its first fashionImages (1,000) training images, or of all of
// them in a smaller file, lies between fashionMean (0.21) and fashionMax (0.36) on the [0, 1]
// scale. MNIST's is 0.13 (0.128 over the first 1,000, 0.118 over the first 7), Fashion-MNIST's
// 0.286: digits are thin strokes on black, clothes fill the frame; images of neither kind (a
// test's synthetic pattern) stay MNIST, as before the rule. The rule reads the training images whatever
// the split opened (the test images for a folder without training files), so that a folder's
// splits agree, and it holds for subsets that keep a file's first images (scripts/cuda-sim.sh's
// mnist1k, mnist6k) as for the published files; a folder of a few images may be taken for the
// other dataset. Such a folder is named "fashion-mnist" and normalized with Fashion-MNIST's mean
// 0.2860 and std 0.3530 (torchvision's usual values); its classes are torchvision's
// FashionMNIST.classes.
func OpenMNIST(dir, split string) (*MNIST, error) {
	prefix, err := mnistPrefix(split)
	if err != nil {
		return nil, err
	}
	imgPath, labPath := findMNIST(dir, split)
	if imgPath == "" || labPath == "" {
		return nil, fmt.Errorf("datasets: mnist %s split: no %s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz] in %s: %w: %w", split, prefix, prefix, dir,
			ErrNoSplit, os.ErrNotExist)
	}
	imgs, _, err := openRegular(imgPath)
	if err != nil {
		return nil, fmt.Errorf("datasets: mnist: %w", err)
	}
	defer imgs.Close()
	labs, _, err := openRegular(labPath)
	if err != nil {
		return nil, fmt.Errorf("datasets: mnist: %w", err)
	}
	defer labs.Close()
	m, err := ParseMNIST("mnist", imgs, labs)
	if err != nil {
		return nil, fmt.Errorf("%w (files %s, %s)", err, imgPath, labPath)
	}
	if m.fashion = isFashion(dir, split, m); m.fashion {
		m.name = "fashion-mnist"
	}
	return m, nil
}

// fashionImages is how many images, the first of a folder's training file, OpenMNIST's rule reads;
// their mean pixel, on the [0, 1] scale, in [fashionMean, fashionMax] makes them Fashion-MNIST's.
// The bounds lie more than ten standard errors of a 1,000-image mean from MNIST's 0.13 and
// Fashion-MNIST's 0.286.
const (
	fashionImages = 1000
	fashionMean   = 0.21
	fashionMax    = 0.36
)

// isFashion applies OpenMNIST's rule to the folder dir, of which m is split: the mean pixel of
// the first fashionImages training images (m's own when m is the train split, or when the
// training images cannot be read: a folder of test files only).
func isFashion(dir, split string, m *MNIST) bool {
	px := m.images[:min(len(m.images), fashionImages*m.h*m.w)]
	if split != "train" && split != "" {
		if path, _ := findMNIST(dir, "train"); path != "" {
			if first, err := idxPrefix(path, fashionImages); err == nil {
				px = first
			}
		}
	}
	var sum uint64
	for _, p := range px {
		sum += uint64(p)
	}
	mean := float64(sum) / float64(max(len(px), 1)) / 255
	return mean >= fashionMean && mean <= fashionMax
}

// idxPrefix reads the pixels of the first n images of the IDX image file path (plain, gzip or
// zstd), or of all of them in a smaller file: a prefix, never the whole file.
func idxPrefix(path string, n int) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, closeFn, err := decompress(f)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	dims, _, err := readIDXHeader(r, 3)
	if err != nil {
		return nil, err
	}
	want := int64(min(dims[0], n) * dims[1] * dims[2])
	px, err := readAtMost(io.LimitReader(r, want), want) // memory grows with the bytes present
	if err == nil && int64(len(px)) != want {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, loaders.ErrCorrupt, err)
	}
	return px, nil
}

// findMNIST returns the files of split of MNIST in dir ("" for each that is missing).
func findMNIST(dir, split string) (images, labels string) {
	prefix, err := mnistPrefix(split)
	if err != nil {
		return "", ""
	}
	return findMNISTFile(dir, prefix+"-images-idx3-ubyte"), findMNISTFile(dir, prefix+"-labels-idx1-ubyte")
}

// findMNISTFile returns the file base (plain or .gz) in dir, or in a torchvision root's raw/,
// MNIST/raw/ or FashionMNIST/raw/ below it ("" when none holds it).
func findMNISTFile(dir, base string) string {
	for _, d := range []string{dir, filepath.Join(dir, "raw"), filepath.Join(dir, "MNIST", "raw"), filepath.Join(dir, "FashionMNIST", "raw")} {
		if p := findFile(d, base); p != "" {
			return p
		}
	}
	return ""
}

func mnistPrefix(split string) (string, error) {
	switch split {
	case "train", "":
		return "train", nil
	case "test":
		return "t10k", nil
	}
	if s, err := splitName(split); err == nil {
		return "", noSplit("mnist", s, []string{"train", "test"})
	}
	return "", fmt.Errorf("datasets: mnist split %q, want train or test: %w", split, ErrSpec)
}

func findFile(dir, base string) string {
	for _, name := range []string{base, base + ".gz"} {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return p // openRegular refuses it if it is no regular file
		}
	}
	return ""
}

// Len returns the number of images.
func (m *MNIST) Len() int { return len(m.labels) }

// Info describes MNIST: 10 classes, shape 1 x H x W, mean 0.1307 and std 0.3081; Fashion-MNIST
// (see OpenMNIST): mean 0.2860 and std 0.3530.
func (m *MNIST) Info() loaders.Info {
	mean, std := float32(0.1307), float32(0.3081)
	if m.fashion {
		mean, std = 0.2860, 0.3530
	}
	return loaders.Info{Name: m.name, NumClasses: 10, Shape: transforms.Shape{C: 1, H: m.h, W: m.w},
		Mean: []float32{mean}, Std: []float32{std}, Classes: m.Classes()}
}

// fashionClasses are Fashion-MNIST's class names, index = label (torchvision's FashionMNIST.classes).
var fashionClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// Classes returns the class names, index = label: Fashion-MNIST's, or nil for MNIST, whose label
// is its digit. The slice is shared: do not modify.
func (m *MNIST) Classes() []string {
	if m.fashion {
		return fashionClasses
	}
	return nil
}

// Sample returns image i as H x W x 1 pixels that alias the dataset's memory.
func (m *MNIST) Sample(_ context.Context, i int) (loaders.Sample, error) {
	if err := loaders.CheckIndex(m.name, i, len(m.labels)); err != nil {
		return loaders.Sample{}, err
	}
	if err := loaders.CheckLabel(m.name, i, "", int(m.labels[i]), 10); err != nil {
		return loaders.Sample{}, err
	}
	px := m.h * m.w
	return loaders.Sample{
		Input: transforms.Input{Pixels: m.images[i*px : (i+1)*px : (i+1)*px], H: m.h, W: m.w, C: 1},
		Label: int(m.labels[i]),
	}, nil
}
