package gemm_test

import (
	"fmt"

	"github.com/stoke-ml/stoke/kernels/internal/gemm"
)

func ExampleSgemm() {
	// C (2x2) = A (2x3) * B^T, with B stored as 2x3.
	a := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	b := []float32{
		1, 0, 1,
		0, 1, 0,
	}
	c := make([]float32, 4)
	gemm.Sgemm(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2)
	fmt.Println(c)
	// Output: [4 2 10 5]
}
