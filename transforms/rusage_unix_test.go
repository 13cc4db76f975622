//go:build unix

package transforms

import "syscall"

// cpuSeconds is the user+system CPU time of the process: on a shared machine, CPU time per image
// is steadier than wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
