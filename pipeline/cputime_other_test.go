//go:build !unix

package pipeline

import "time"

// processCPU is not available here; the benchmark then reports wall-clock time only.
func processCPU() (time.Duration, bool) { return 0, false }
