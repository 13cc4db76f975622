package dist

// A stand-in for the dist layer's own declarations (branch dist), so that the NCCL backend
// compiles before the two meet; this file is deleted at the merge.

// Op is a reduction of AllReduce.
type Op uint8

const (
	// Sum adds the ranks' values.
	Sum Op = iota
	// Avg adds them and divides by the number of ranks.
	Avg
)
