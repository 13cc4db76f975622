package loadertest

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/gpu"
)

func TestPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(PNG(t, 5, 3, 9)))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds() != image.Rect(0, 0, 5, 3) {
		t.Fatalf("bounds %v; want 5x3", img.Bounds())
	}
	if got, want := color.NRGBAModel.Convert(img.At(4, 2)), (color.NRGBA{9 + 4, 2 * 3, 9 ^ 6, 255}); got != want {
		t.Errorf("pixel (4, 2) = %v; want %v", got, want)
	}
}

func TestPNGHeader(t *testing.T) {
	b := PNGHeader(50000, 40000)
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || format != "png" || cfg.Width != 50000 || cfg.Height != 40000 || cfg.ColorModel != color.RGBAModel {
		t.Fatalf("DecodeConfig = %+v, %q, %v; want a 50000x40000 RGB png", cfg, format, err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err == nil {
		t.Error("a header without pixel data decoded")
	}
}

func TestHost(t *testing.T) {
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	images, err := dev.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := dev.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := gpu.HostBytes(images)
	lab, _ := gpu.HostBytes(labels)
	for i := range img {
		img[i] = byte(i)
	}
	copy(lab, []byte{7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 0, 0, 9, 9, 9, 9})
	px, ids := Host(t, images, labels, 3, 4)
	if !bytes.Equal(px, img[:12]) || !slices.Equal(ids, []int32{7, -1, 0x201}) {
		t.Fatalf("Host = %v, %v; want the first 12 bytes and labels [7 -1 513]", px, ids)
	}
	img[0] = 99
	if px[0] != 0 {
		t.Error("Host's images share the buffer's memory")
	}
}

type batch struct{ released *int }

func (b batch) Release() { *b.released++ }

// batches yields n batches, then err if it is not nil.
func batches(n int, err error, released *int) iter.Seq2[batch, error] {
	return func(yield func(batch, error) bool) {
		for range n {
			if !yield(batch{released}, nil) {
				return
			}
		}
		if err != nil {
			yield(batch{}, err)
		}
	}
}

func TestEpoch(t *testing.T) {
	for _, tc := range []struct{ n, stopAfter, want int }{{4, -1, 4}, {4, 2, 2}, {0, -1, 0}} {
		released, kept := 0, 0
		out := Epoch(t, batches(tc.n, nil, &released), tc.stopAfter, func(_ testing.TB, b batch) int {
			if *b.released != kept {
				t.Errorf("batch %d kept after %d releases; want keep before Release", kept, *b.released)
			}
			kept++
			return kept
		})
		if len(out) != tc.want || released != tc.want || (tc.want > 0 && out[tc.want-1] != tc.want) {
			t.Errorf("%d batches, stopAfter %d: kept %v, %d released; want %d of each", tc.n, tc.stopAfter, out, released, tc.want)
		}
	}
}

func TestErr(t *testing.T) {
	boom := errors.New("boom")
	released := 0
	if err := Err(batches(3, boom, &released)); err != boom || released != 3 {
		t.Errorf("Err = %v with %d released; want boom after 3", err, released)
	}
	released = 0
	if err := Err(batches(2, nil, &released)); err != nil || released != 2 {
		t.Errorf("Err = %v with %d released; want nil after 2", err, released)
	}
}

type closer struct {
	closed int
	err    error
}

func (c *closer) Close() error { c.closed++; return c.err }

func TestCloseAtEnd(t *testing.T) {
	c := &closer{}
	t.Run("use", func(t *testing.T) {
		if got := CloseAtEnd[*closer](t)(c, nil); got != c || c.closed != 0 {
			t.Fatalf("CloseAtEnd = %p (closed %d times); want %p, open until the test ends", got, c.closed, c)
		}
	})
	if c.closed != 1 {
		t.Errorf("closed %d times when the test ended; want once", c.closed)
	}
}

// TestOnlyTestsImport: no package's non-test Go file imports the module's test-support packages,
// this one and internal/opcheck (both import testing).
func TestOnlyTestsImport(t *testing.T) {
	testOnly := map[string]bool{
		"github.com/stoke-ml/stoke/internal/loadertest": true,
		"github.com/stoke-ml/stoke/internal/opcheck":    true,
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); testOnly[p] {
				t.Errorf("%s imports %s, which is for tests only", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; want the module's", files, root)
	}
}
