//go:build unix

package packdir

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile creates (or opens) path and takes an exclusive flock on it without waiting. The lock
// ends with the process, so a killed pack leaves the file but not the lock. A lock taken on a file
// that its holder removed meanwhile is retried on the new file.
func lockFile(path string) (*os.File, error) {
	for range 10 {
		fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			fh.Close()
			return nil, fmt.Errorf("another pack is writing it (%s is locked): %w", path, ErrUnusable)
		}
		a, errA := fh.Stat()
		b, errB := os.Stat(path)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			fmt.Fprintf(fh, "%d\n", os.Getpid())
			return fh, nil
		}
		fh.Close()
	}
	return nil, fmt.Errorf("%s keeps changing: %w", path, ErrUnusable)
}
