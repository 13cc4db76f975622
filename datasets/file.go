package datasets

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/stoke-ml/stoke/loaders"
)

// ErrNotRegular marks a path given as a sample, a dataset file or a shard that is not a regular
// file after its symbolic links are resolved: a FIFO, a socket, a device or a folder. Reading one
// could block forever (a FIFO without a writer) or never end (/dev/zero).
var ErrNotRegular = errors.New("not a regular file")

// openRegular opens path for reading if it is a regular file (symbolic links followed). The file is
// checked before it is opened, so that opening a device has no effect, and again once open, with
// O_NONBLOCK so that a FIFO put in its place meanwhile cannot block the open.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, notRegular(path, st)
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if st, err = fh.Stat(); err != nil || !st.Mode().IsRegular() {
		fh.Close()
		if err == nil {
			err = notRegular(path, st)
		}
		return nil, nil, err
	}
	return fh, st, nil
}

func notRegular(path string, st os.FileInfo) error {
	return fmt.Errorf("%s is a %s: %w", path, fileKind(st.Mode()), ErrNotRegular)
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "folder"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// ReadImage reads one image file whole, as an ImageFolder reads its samples: a regular file
// (a FIFO or a device is ErrNotRegular) of at most 256 MiB (more is loaders.ErrCorrupt, refused
// before reading).
func ReadImage(path string) ([]byte, error) { return readFileLimited(path, maxFileBytes) }

// readFileLimited reads a regular file whole, refusing one of more than limit bytes before reading.
// A file that grows while it is read is cut at the size it had when opened.
func readFileLimited(path string, limit int64) ([]byte, error) {
	fh, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st.Size() > limit {
		return nil, fmt.Errorf("file of %d bytes exceeds %d: %w", st.Size(), limit, loaders.ErrCorrupt)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, fmt.Errorf("%w: %w", loaders.ErrCorrupt, err)
	}
	return b, nil
}
