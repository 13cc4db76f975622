package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Thread returns the CPU time of the calling thread so far, and false where the system does not
// report it. A goroutine reads a figure of its own only while locked to its thread
// (runtime.LockOSThread) between two calls.
func Thread() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
