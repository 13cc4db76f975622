package datasets

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	// maxCIFARRecords bounds the records ParseCIFAR reads from one reader (the real files hold
	// 10000 or 50000): more is not CIFAR.
	maxCIFARRecords = 1 << 18
)

// CIFAR is CIFAR-10 or CIFAR-100 in the binary format, held in memory. Samples are raw pixels,
// 32 x 32 x 3 (converted from the files' planar layout once, at load).
type CIFAR struct {
	name    string
	classes int
	pixels  []byte // HWC, one image after another
	labels  []byte
}

var (
	_ loaders.Dataset   = (*CIFAR)(nil)
	_ loaders.Describer = (*CIFAR)(nil)
)

// cifarFileRecords is the record count of each CIFAR file but CIFAR-100's train.bin (5 times as
// many); a variable so that tests can use small files.
var cifarFileRecords = 10000

// ParseCIFAR reads CIFAR binary records from r: for classes == 10, 1 label byte then 3072 pixel
// bytes (R plane, G plane, B plane, row-major 32 x 32); for classes == 100, a coarse label byte, the
// fine label byte (the one kept) and the pixels. A trailing partial record is an error wrapping
// ErrCorrupt; labels are checked against classes when a sample is read.
func ParseCIFAR(name string, classes int, r io.Reader) (*CIFAR, error) {
	c := &CIFAR{name: name, classes: classes}
	if err := c.parse(r, 0); err != nil {
		return nil, err
	}
	if len(c.labels) == 0 {
		return nil, fmt.Errorf("datasets: %s: %w", name, loaders.ErrEmpty)
	}
	return c, nil
}

func (c *CIFAR) labelBytes() (int, error) {
	switch c.classes {
	case 10:
		return 1, nil
	case 100:
		return 2, nil
	}
	return 0, fmt.Errorf("datasets: %s: %d classes, want 10 or 100: %w", c.name, c.classes, ErrSpec)
}

// parse appends the records of r: exactly want of them when want > 0, otherwise any whole number
// up to maxCIFARRecords. Records are read one at a time, so memory grows with the records present.
func (c *CIFAR) parse(r io.Reader, want int) error {
	lb, err := c.labelBytes()
	if err != nil {
		return err
	}
	rec := lb + cifarPixels
	limit := maxCIFARRecords
	if want > 0 {
		limit = want
	}
	buf := make([]byte, rec)
	const plane = cifarSide * cifarSide
	n := 0
	for ; ; n++ {
		k, err := io.ReadFull(r, buf)
		if err == io.EOF {
			break
		}
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("datasets: %s: record %d cut after %d of %d bytes: %w", c.name, n, k, rec, loaders.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("datasets: %s: %w", c.name, err)
		}
		if n == limit {
			return fmt.Errorf("datasets: %s: more than %d records of %d bytes: %w", c.name, limit, rec, loaders.ErrCorrupt)
		}
		c.labels = append(c.labels, buf[lb-1])
		c.pixels = slices.Grow(c.pixels, cifarPixels)
		dst := c.pixels[len(c.pixels) : len(c.pixels)+cifarPixels]
		c.pixels = c.pixels[:len(c.pixels)+cifarPixels]
		src := buf[lb:]
		for p := range plane {
			dst[3*p] = src[p]
			dst[3*p+1] = src[plane+p]
			dst[3*p+2] = src[2*plane+p]
		}
	}
	if want > 0 && n != want {
		return fmt.Errorf("datasets: %s: %d records, the format has %d: %w", c.name, n, want, loaders.ErrCorrupt)
	}
	return nil
}

// OpenCIFAR loads split "train" or "test" of CIFAR-10 (classes 10: data_batch_1.bin ...
// data_batch_5.bin, test_batch.bin) or CIFAR-100 (classes 100: train.bin, test.bin) from dir or
// from the archive's own subfolder in it (cifar-10-batches-bin, cifar-100-binary). Each file must
// hold exactly the format's record count (10000, or 50000 for CIFAR-100's train.bin): a file cut
// at a record boundary is an error wrapping ErrCorrupt, not a smaller dataset.
func OpenCIFAR(dir string, classes int, split string) (*CIFAR, error) {
	name := fmt.Sprintf("cifar%d", classes)
	dir, files, records, err := cifarFiles(dir, classes, split)
	if err != nil {
		return nil, err
	}
	c := &CIFAR{name: name, classes: classes}
	for _, f := range files {
		p := filepath.Join(dir, f)
		fh, _, err := openRegular(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("datasets: %s %s split: %w: %w", name, split, ErrNoSplit, err)
		}
		if err != nil {
			return nil, fmt.Errorf("datasets: %s %s split: %w", name, split, err)
		}
		err = c.parse(bufio.NewReaderSize(fh, 1<<16), records)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, p)
		}
	}
	if len(c.labels) == 0 {
		return nil, fmt.Errorf("datasets: %s %s split in %s: %w", name, split, dir, loaders.ErrEmpty)
	}
	return c, nil
}

// cifarFiles returns the folder that holds split of CIFAR-classes (dir, or the archive's own
// subfolder in it), its files and each file's record count.
func cifarFiles(dir string, classes int, split string) (string, []string, int, error) {
	name := fmt.Sprintf("cifar%d", classes)
	var files []string
	var sub string
	records := cifarFileRecords // in each file, as the format has it
	switch {
	case classes == 10 && (split == "train" || split == ""):
		files, sub = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}, "cifar-10-batches-bin"
	case classes == 10 && split == "test":
		files, sub = []string{"test_batch.bin"}, "cifar-10-batches-bin"
	case classes == 100 && (split == "train" || split == ""):
		files, sub, records = []string{"train.bin"}, "cifar-100-binary", 5*cifarFileRecords
	case classes == 100 && split == "test":
		files, sub = []string{"test.bin"}, "cifar-100-binary"
	case classes == 10 || classes == 100:
		if s, err := splitName(split); err == nil {
			return "", nil, 0, noSplit(name, s, []string{"train", "test"})
		}
		fallthrough
	default:
		return "", nil, 0, fmt.Errorf("datasets: %s: classes %d split %q, want 10 or 100 and train or test: %w", name, classes, split, ErrSpec)
	}
	if _, err := os.Stat(filepath.Join(dir, files[0])); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, sub, files[0])); err2 == nil {
			dir = filepath.Join(dir, sub)
		}
	}
	return dir, files, records, nil
}

// Len returns the number of images.
func (c *CIFAR) Len() int { return len(c.labels) }

// Info describes the dataset: 10 or 100 classes, shape 3 x 32 x 32, and the usual CIFAR
// normalization.
func (c *CIFAR) Info() loaders.Info {
	info := loaders.Info{Name: c.name, NumClasses: c.classes, Shape: transforms.Shape{C: 3, H: cifarSide, W: cifarSide}}
	if c.classes == 100 {
		info.Mean, info.Std = []float32{0.5071, 0.4865, 0.4409}, []float32{0.2673, 0.2564, 0.2762}
	} else {
		info.Mean, info.Std = []float32{0.4914, 0.4822, 0.4465}, []float32{0.2470, 0.2435, 0.2616}
	}
	return info
}

// Sample returns image i as 32 x 32 x 3 pixels that alias the dataset's memory.
func (c *CIFAR) Sample(_ context.Context, i int) (loaders.Sample, error) {
	if err := loaders.CheckIndex(c.name, i, len(c.labels)); err != nil {
		return loaders.Sample{}, err
	}
	if err := loaders.CheckLabel(c.name, i, "", int(c.labels[i]), c.classes); err != nil {
		return loaders.Sample{}, err
	}
	return loaders.Sample{
		Input: transforms.Input{Pixels: c.pixels[i*cifarPixels : (i+1)*cifarPixels : (i+1)*cifarPixels], H: cifarSide, W: cifarSide, C: 3},
		Label: int(c.labels[i]),
	}, nil
}
