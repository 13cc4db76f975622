// Package atomicfile writes files that are never seen half-written.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes b to a temporary file next to path (named "." + base + ".tmp..." so that globs
// over the folder's visible names miss it), syncs it and renames it to path: path holds either its
// old content or b, whatever happens meanwhile. A failed write removes the temporary file; a killed
// process leaves it, for its owner to clean up.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// Write is WriteFile with the content streamed by write, so that it need not be in memory at
// once; an error of write leaves path as it was. Once the file is renamed, the folder is synced.
func Write(path string, perm os.FileMode, write func(w io.Writer) error) error {
	fh, err := os.CreateTemp(filepath.Dir(path), TempPrefix(path)+"*")
	if err != nil {
		return err
	}
	err = write(fh)
	if err == nil {
		err = fh.Chmod(perm)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(fh.Name(), path)
	}
	if err != nil {
		os.Remove(fh.Name())
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the folder's entries durable (the rename), so that after a power loss the folder
// holds the new file, and a later write's renames and removals come after this one's, on file
// systems that do not keep them in order. A folder that cannot be synced (a file system without
// it) is not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	d.Sync()
	return d.Close()
}

func TempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp" }
