//go:build !(linux || darwin || freebsd)

package pinned

import (
	"errors"
	"runtime"
)

// Without mmap/mlock the allocator hands out ordinary memory and reports it unpinned.
func mapAnon(size int) ([]byte, error) { return make([]byte, size), nil }

func unmap([]byte) error { return nil }

func mlock([]byte) error {
	return errors.New("page locking is not supported on " + runtime.GOOS)
}

func lockAdvice() string { return "Stoke pins memory only on Linux, macOS and FreeBSD" }
