package gpu

import "os"

// benchDevice is the device benchmarks run on: $STOKE_BENCH_DEVICE, or "cpu".
func benchDevice() string {
	if d := os.Getenv("STOKE_BENCH_DEVICE"); d != "" {
		return d
	}
	return "cpu"
}
