//go:build linux || darwin || freebsd

package pinned

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func mapAnon(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func unmap(b []byte) error { return unix.Munmap(b) }

func mlock(b []byte) error { return unix.Mlock(b) }

// lockAdvice names the current RLIMIT_MEMLOCK and how to raise it, for Block.Reason.
func lockAdvice() string {
	limit := "unknown"
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err == nil {
		if r.Cur == unix.RLIM_INFINITY {
			limit = "unlimited"
		} else {
			limit = fmt.Sprintf("%d bytes", r.Cur)
		}
	}
	return "the locked-memory limit (RLIMIT_MEMLOCK) is " + limit +
		"; raise it with `ulimit -l unlimited`, a `* - memlock unlimited` line in /etc/security/limits.conf, " +
		"or `docker run --ulimit memlock=-1`"
}
