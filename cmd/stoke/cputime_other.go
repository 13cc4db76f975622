//go:build !unix

package main

// cpuSeconds is not measured here: cpu_ms_per_image reads 0.
func cpuSeconds() float64 { return 0 }
