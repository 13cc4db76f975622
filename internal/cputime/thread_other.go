//go:build !linux

package cputime

import "time"

// Thread returns the CPU time of the calling thread so far, and false where the system does not
// report it, as here.
func Thread() (time.Duration, bool) { return 0, false }
