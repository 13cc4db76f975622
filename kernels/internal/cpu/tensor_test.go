package cpu

import (
	"slices"
	"testing"
)

// offsetsOf lists the offsets strides give the indices of shape, in row-major order.
func offsetsOf(shape []int, strides []int) []int {
	var out []int
	idx := make([]int, len(shape))
	for {
		o := 0
		for d, i := range idx {
			o += i * strides[d]
		}
		out = append(out, o)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

// TestNewLayout: the simplified layout addresses, index by index in row-major order, the same
// elements of every operand as the shape and strides it was made from, with the rank expected.
func TestNewLayout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shape   []int
		strides [][]int
		rank    int
	}{
		{"packed merges to one dim", []int{2, 3, 4}, [][]int{{12, 4, 1}, {12, 4, 1}}, 1},
		{"broadcast keeps its dim", []int{2, 3, 4}, [][]int{{12, 4, 1}, {0, 4, 1}}, 2},
		{"transpose merges nothing", []int{2, 3}, [][]int{{3, 1}, {1, 2}}, 2},
		{"size-1 dims dropped", []int{1, 5, 1, 2, 1}, [][]int{{10, 2, 2, 1, 1}, {7, 1, 0, 5, 9}}, 2},
		{"one element", []int{1, 1}, [][]int{{4, 1}, {0, 0}, {3, 3}}, 1},
		{"rank 8 with gaps", []int{2, 2, 2, 2, 2, 2, 2, 2}, [][]int{Packed([]int{2, 2, 2, 2, 2, 2, 2, 2}), {256, 128, 64, 32, 8, 4, 2, 1}}, 2},
	} {
		l := NewLayout(tc.shape, tc.strides...)
		if l.rank != tc.rank {
			t.Errorf("%s: rank %d; want %d", tc.name, l.rank, tc.rank)
		}
		for k, st := range tc.strides {
			want := offsetsOf(tc.shape, st)
			got := offsetsOf(l.shape[:l.rank], l.strides[k][:l.rank])
			if !slices.Equal(got, want) {
				t.Errorf("%s: operand %d addresses %v; want %v", tc.name, k, got, want)
			}
		}
	}
}
