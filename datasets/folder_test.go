package datasets

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
)

func TestImageFolder(t *testing.T) {
	root := t.TempDir()
	// Classes must come out sorted whatever order they are created in.
	writeFile(t, filepath.Join(root, "zebra", "b.PNG"), loadertest.PNG(t, 4, 3, 1))
	writeFile(t, filepath.Join(root, "zebra", "a.png"), loadertest.PNG(t, 4, 3, 2))
	writeFile(t, filepath.Join(root, "zebra", "notes.txt"), []byte("not an image"))
	writeFile(t, filepath.Join(root, "ant", "deep", "c.png"), loadertest.PNG(t, 5, 5, 3))
	writeFile(t, filepath.Join(root, "ant", ".hidden.png"), loadertest.PNG(t, 5, 5, 4))
	writeFile(t, filepath.Join(root, ".cache", "x.png"), loadertest.PNG(t, 5, 5, 5))
	writeFile(t, filepath.Join(root, "README"), []byte("top-level files are not classes"))

	f, err := NewImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Classes(), []string{"ant", "zebra"}; !slices.Equal(got, want) {
		t.Errorf("Classes() = %v; want %v", got, want)
	}
	wantPaths := []string{filepath.Join(root, "ant", "deep", "c.png"), filepath.Join(root, "zebra", "a.png"), filepath.Join(root, "zebra", "b.PNG")}
	wantLabels := []int{0, 1, 1}
	if f.Len() != len(wantPaths) {
		t.Fatalf("Len() = %d; want %d", f.Len(), len(wantPaths))
	}
	for i, s := range readAll(t, f) {
		if s.Key != wantPaths[i] || s.Label != wantLabels[i] {
			t.Errorf("Sample(%d) = %s label %d; want %s label %d", i, s.Key, s.Label, wantPaths[i], wantLabels[i])
		}
		if !bytes.HasPrefix(s.Input.Encoded, []byte("\x89PNG")) {
			t.Errorf("Sample(%d) Encoded does not hold the PNG file", i)
		}
	}
	if info := f.Info(); info.NumClasses != 2 || info.Name != root {
		t.Errorf("Info() = %+v; want 2 classes named %s", info, root)
	}
}

func TestImageFolderErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  error
	}{
		{"no class folders", []string{"a.png"}, loaders.ErrEmpty},
		{"empty class folder", []string{"cat/a.png", "dog/readme.txt"}, loaders.ErrEmpty},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range tc.files {
				writeFile(t, filepath.Join(root, p), []byte("x"))
			}
			_, err := NewImageFolder(root)
			if !errors.Is(err, tc.want) {
				t.Errorf("NewImageFolder error = %v; want %v", err, tc.want)
			}
		})
	}
	if _, err := NewImageFolder(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("NewImageFolder(missing) = nil error")
	}
}

func TestImageFolderMissingFile(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a", "x.jpg"), []byte{0xff, 0xd8})
	f, err := NewImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	f.paths[0] = filepath.Join(root, "a", "gone.jpg")
	if _, err := f.Sample(context.Background(), 0); err == nil || !bytes.Contains([]byte(err.Error()), []byte("gone.jpg")) {
		t.Errorf("Sample of a vanished file: error = %v; want one naming gone.jpg", err)
	}
}
