//go:build !linux

package gpu

// hostMemory is unknown off Linux.
func hostMemory() int64 { return 0 }
