package safetensors_test

import (
	"bytes"
	"fmt"

	"github.com/stoke-ml/stoke/safetensors"
)

// Writing two tensors and reading them back: the file lists its tensors in data order, and each
// reads into a slice the caller sizes.
func Example() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{
		{Name: "fc.weight", Shape: []int{2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "bn.num_batches_tracked", Shape: []int{}, I64: []int64{42}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		fmt.Println(err)
		return
	}

	f, err := safetensors.NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range f.Tensors() {
		fmt.Println(t.Name, t.DType, t.Shape, t.Len())
	}
	fmt.Println(f.Metadata()["format"])

	w := make([]float32, 6)
	if err := f.Float32s("fc.weight", w); err != nil {
		fmt.Println(err)
		return
	}
	n := make([]int64, 1)
	if err := f.Int64s("bn.num_batches_tracked", n); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w, n)
	// Output:
	// fc.weight F32 [2 3] 6
	// bn.num_batches_tracked I64 [] 1
	// pt
	// [1 2 3 4 5 6] [42]
}

// A file that is not a safetensors file gives an error wrapping ErrFormat that says what is wrong.
func ExampleNewFile_malformed() {
	b := []byte("PK\x03\x04 a zip archive, not a safetensors file")
	_, err := safetensors.NewFile(bytes.NewReader(b), int64(len(b)))
	fmt.Println(err)
	// Output:
	// bad safetensors file: header of 8800140462016121680 bytes in a file of 42 (at most 104857600)
}
