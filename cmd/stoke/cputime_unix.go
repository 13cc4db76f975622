//go:build unix

package main

import "syscall"

// cpuSeconds is the process's user+system CPU time (all threads): on a shared machine, CPU time
// per image is a steadier figure than images/s.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
