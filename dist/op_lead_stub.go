package dist

// Op is a reduction. (Placeholder until the collective layer lands.)
type Op uint8

const (
	Sum Op = iota
	Avg
)
