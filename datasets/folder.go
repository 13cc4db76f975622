package datasets

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stoke-ml/stoke/loaders"
)

// maxFileBytes bounds one image file read by an ImageFolder: far above any real photograph, it
// keeps a stray multi-gigabyte file from being read whole into memory.
const maxFileBytes = 256 << 20

// imageExts are the file extensions an ImageFolder keeps (compared lower-case): the formats
// transforms decodes.
var imageExts = []string{".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp"}

// IsImageFile reports whether name has one of the image extensions ImageFolder keeps (.jpg, .jpeg,
// .png, .gif, .bmp, .webp, any case).
func IsImageFile(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(filepath.Ext(name)))
}

// ImageFolder is a dataset laid out like torchvision's ImageFolder: root/CLASS/.../IMAGE, one
// subfolder per class, classes numbered in sorted order, images found recursively (following
// symbolic links to files) and sorted by path. Samples are encoded file bytes, read when asked for.
type ImageFolder struct {
	root    string
	classes []string
	paths   []string
	labels  []int
}

var (
	_ loaders.Dataset   = (*ImageFolder)(nil)
	_ loaders.Describer = (*ImageFolder)(nil)
)

// NewImageFolder scans root. A root without class folders, or a class folder without any image,
// is an error wrapping ErrEmpty that names the folder (torchvision refuses these too). Hidden
// entries (starting with '.') are ignored.
func NewImageFolder(root string) (*ImageFolder, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("datasets: image folder: %w", err)
	}
	f := &ImageFolder{root: root}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(root, e.Name())
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			f.classes = append(f.classes, e.Name())
		}
	}
	if len(f.classes) == 0 {
		return nil, fmt.Errorf("datasets: image folder %s: no class folders: %w", root, loaders.ErrEmpty)
	}
	slices.Sort(f.classes)
	for label, class := range f.classes {
		dir := filepath.Join(root, class)
		before := len(f.paths)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && p != dir {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || !IsImageFile(p) {
				return nil
			}
			f.paths = append(f.paths, p)
			f.labels = append(f.labels, label)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("datasets: image folder %s: class %q: %w", root, class, err)
		}
		if len(f.paths) == before {
			return nil, fmt.Errorf("datasets: image folder %s: class folder %q has no image (%s): %w", root, class, strings.Join(imageExts, " "), loaders.ErrEmpty)
		}
		// WalkDir visits in lexical order already; sorting keeps the order independent of it.
		slices.Sort(f.paths[before:])
	}
	return f, nil
}

// Classes returns the class names, index = label. The slice is the dataset's own: do not modify.
func (f *ImageFolder) Classes() []string { return f.classes }

// Len returns the number of images.
func (f *ImageFolder) Len() int { return len(f.paths) }

// Path returns the file of sample i (i must be in range).
func (f *ImageFolder) Path(i int) string { return f.paths[i] }

// Info names the dataset after its root; shapes vary, normalization is left to the default.
func (f *ImageFolder) Info() loaders.Info {
	return loaders.Info{Name: f.root, NumClasses: len(f.classes), Classes: f.classes}
}

// Sample reads image i's file; the Input holds its encoded bytes (a new slice per call). Decoding
// (and rejecting corrupt or oversized images) is the transform's job.
func (f *ImageFolder) Sample(_ context.Context, i int) (loaders.Sample, error) {
	if err := loaders.CheckIndex(f.root, i, len(f.paths)); err != nil {
		return loaders.Sample{}, err
	}
	b, err := readFileLimited(f.paths[i], maxFileBytes)
	if err != nil {
		return loaders.Sample{}, &loaders.SampleError{Dataset: f.root, Index: i, Key: f.paths[i], Err: err}
	}
	s := loaders.Sample{Label: f.labels[i], Key: f.paths[i]}
	s.Input.Encoded = b
	return s, nil
}
