package gpu

import "golang.org/x/sys/unix"

// hostMemory is the machine's RAM, the CPU device's memory; 0 if unknown.
func hostMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
