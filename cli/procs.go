package cli

import (
	"strconv"
	"strings"
)

// rankProcs returns the GOMAXPROCS for one of several ranks that a launcher started on this host,
// or 0 to leave the runtime's own choice. Without it each rank's runtime would take every core
// (cores: the runtime's GOMAXPROCS at startup, which follows the CPU affinity and the cgroup's
// limit), and N ranks would run N times as many threads as the host has cores.
//
// The ranks on this host are LOCAL_WORLD_SIZE under torchrun, else SLURM_NTASKS_PER_NODE under
// Slurm; with one (or neither) the runtime's choice stands, as it does when GOMAXPROCS is set. A
// rank then takes OMP_NUM_THREADS cores when that is set (torchrun sets 1 by default, as for
// PyTorch's own ranks; its first value when it lists nested levels), at most cores, else its share
// of the cores, at least one.
func rankProcs(getenv func(string) string, cores int) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	local := positive(getenv("LOCAL_WORLD_SIZE"))
	if local == 0 {
		local = positive(getenv("SLURM_NTASKS_PER_NODE"))
	}
	if local <= 1 {
		return 0
	}
	first, _, _ := strings.Cut(getenv("OMP_NUM_THREADS"), ",")
	if n := positive(first); n > 0 {
		return min(n, cores)
	}
	return max(1, cores/local)
}

// positive parses a positive decimal integer; anything else is 0.
func positive(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
