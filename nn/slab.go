package nn

// slab hands out runs of T from chunks it keeps: after reset it hands out the same memory again,
// so a pass that needs no more than an earlier one allocates nothing. What take returns is valid
// until the next reset.
type slab[T any] struct {
	chunks [][]T
	i      int // the chunk being handed out
	used   int // how much of chunks[i] is handed out
}

// take returns n zero values of T, of capacity n (an append to it does not write into the slab).
func (s *slab[T]) take(n int) []T {
	for s.i < len(s.chunks) && s.used+n > len(s.chunks[s.i]) {
		s.i, s.used = s.i+1, 0
	}
	if s.i == len(s.chunks) {
		size := 64
		if len(s.chunks) > 0 {
			size = 2 * len(s.chunks[len(s.chunks)-1])
		}
		s.chunks = append(s.chunks, make([]T, max(n, size)))
	}
	run := s.chunks[s.i][s.used : s.used+n : s.used+n]
	s.used += n
	return run
}

// reset makes everything handed out free again, and zero (so that the slab keeps no pointers of
// the last pass alive).
func (s *slab[T]) reset() {
	for i := range min(s.i+1, len(s.chunks)) {
		clear(s.chunks[i])
	}
	s.i, s.used = 0, 0
}
