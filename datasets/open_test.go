package datasets

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	img, lab := mnistFiles(4, 28, 28)
	writeFile(t, filepath.Join(dir, "mnist", "train-images-idx3-ubyte"), img)
	writeFile(t, filepath.Join(dir, "mnist", "train-labels-idx1-ubyte.gz"), gz(t, lab))
	writeFile(t, filepath.Join(dir, "c10", "test_batch.bin"), cifarRecords(3, 1, func(int) byte { return 1 }))
	writeFile(t, filepath.Join(dir, "c100", "cifar-100-binary", "train.bin"), cifarRecords(5*cifarFileRecords, 2, func(int) byte { return 1 }))
	writeFile(t, filepath.Join(dir, "imgs", "train", "cat", "a.png"), loadertest.PNG(t, 2, 2, 0))
	writeFile(t, filepath.Join(dir, "imgs", "train", "dog", "a.png"), loadertest.PNG(t, 2, 2, 0))
	writeFile(t, filepath.Join(dir, "imgs", "test", "cat", "a.png"), loadertest.PNG(t, 2, 2, 0))
	writeFile(t, filepath.Join(dir, "flat", "cat", "a.png"), loadertest.PNG(t, 2, 2, 0))
	writeShards(t, filepath.Join(dir, "sh", "x-%02d.tar"), 2, testSamples(t, 5))

	tests := []struct {
		spec, split string
		wantLen     int
		wantName    string
	}{
		{"mnist:" + filepath.Join(dir, "mnist"), "train", 4, "mnist"},
		{"cifar10:" + filepath.Join(dir, "c10"), "test", 3, "cifar10"},
		{"cifar100:" + filepath.Join(dir, "c100"), "", 5 * cifarFileRecords, "cifar100"},
		{filepath.Join(dir, "imgs"), "train", 2, filepath.Join(dir, "imgs", "train")},
		{"folder:" + filepath.Join(dir, "imgs"), "test", 1, filepath.Join(dir, "imgs", "test")},
		{"folder:" + filepath.Join(dir, "flat"), "train", 1, filepath.Join(dir, "flat")},
		{"shards:" + filepath.Join(dir, "sh", "x-*.tar"), "train", 5, filepath.Join(dir, "sh", "x-*.tar")},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			ds, err := Open(tc.spec, tc.split)
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := ds.(io.Closer); ok {
				defer c.Close()
			}
			if ds.Len() != tc.wantLen || loaders.Describe(ds).Name != tc.wantName {
				t.Errorf("Open(%q, %q) = %d samples named %q; want %d named %q", tc.spec, tc.split, ds.Len(), loaders.Describe(ds).Name, tc.wantLen, tc.wantName)
			}
		})
	}
	for _, bad := range []struct{ spec, split string }{{"imagenet:x", "train"}, {"mnist", "val"}} {
		if _, err := Open(bad.spec, bad.split); !errors.Is(err, ErrSpec) {
			t.Errorf("Open(%q, %q) error = %v; want ErrSpec", bad.spec, bad.split, err)
		}
	}
	if _, err := Open("shards:"+filepath.Join(dir, "none-*.tar"), "train"); !errors.Is(err, loaders.ErrEmpty) {
		t.Errorf("Open(shards without match) error = %v; want ErrEmpty", err)
	}
}
