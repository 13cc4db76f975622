//go:build linux || darwin || freebsd

package pinned

import "golang.org/x/sys/unix"

// addressLimit is the process's address-space limit (RLIMIT_AS, ulimit -v) in bytes; 0 when there
// is none.
func addressLimit() int64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &r); err != nil || r.Cur == unix.RLIM_INFINITY || r.Cur > 1<<62 {
		return 0
	}
	return int64(r.Cur)
}
