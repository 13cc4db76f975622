//go:build !unix

package gemm

import "time"

// processCPU is not available here; benchmarks then report wall-clock rates only.
func processCPU() (time.Duration, bool) { return 0, false }
