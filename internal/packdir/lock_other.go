//go:build !unix

package packdir

import (
	"fmt"
	"os"
)

// lockFile creates path exclusively: without flock, a lock file left by a killed pack must be
// removed by hand.
func lockFile(path string) (*os.File, error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("another pack is writing it, or one was killed (remove %s if none runs): %w", path, ErrUnusable)
	}
	return fh, nil
}
