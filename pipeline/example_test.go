package pipeline_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/stoke-ml/stoke/pipeline"
)

// A three-stage pipeline: a source of words, a parallel ordered map, and batching.
func Example() {
	p := pipeline.New()
	words := pipeline.FromSlice(p, "words", strings.Fields("feed the gpu from go without waiting"))
	upper := pipeline.Map(p, "upper", words, func(_ context.Context, w string) (string, error) {
		return strings.ToUpper(w), nil
	}, pipeline.Workers(4), pipeline.Ordered(true))
	batches := pipeline.Batch(p, "batch", upper, 3)
	for b, err := range pipeline.Iter(context.Background(), p, batches) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(b)
	}
	for _, s := range p.Stats() {
		fmt.Printf("%s: %d in, %d out\n", s.Name, s.In, s.Out)
	}
	// Output:
	// [FEED THE GPU]
	// [FROM GO WITHOUT]
	// [WAITING]
	// words: 0 in, 7 out
	// upper: 7 in, 7 out
	// batch: 7 in, 3 out
}

// Errors name the stage and the item.
func ExampleStageError() {
	p := pipeline.New()
	parsed := pipeline.Map(p, "parse", pipeline.FromSlice(p, "lines", []string{"1", "2", "x"}),
		func(_ context.Context, s string) (int, error) {
			var n int
			_, err := fmt.Sscan(s, &n)
			return n, err
		})
	pipeline.Sink(p, "sum", parsed, func(context.Context, int) error { return nil })
	fmt.Println(p.Run(context.Background()))
	// Output:
	// pipeline: stage "parse": item 2: expected integer
}

// Per-worker state without a lock: each of a Map's workers runs one item at a time, and
// WorkerIndex(ctx) says which one it is.
func ExampleWorkerIndex() {
	const workers = 3
	buffers := make([][]byte, workers) // scratch memory, one per worker
	p := pipeline.New()
	words := pipeline.FromSlice(p, "words", []string{"stoke", "keeps", "the", "device", "fed"})
	lengths := pipeline.Map(p, "length", words, func(ctx context.Context, w string) (int, error) {
		buf := &buffers[pipeline.WorkerIndex(ctx)]
		*buf = append((*buf)[:0], w...) // reused from item to item by the same worker
		return len(*buf), nil
	}, pipeline.Workers(workers), pipeline.Ordered(true))
	for n, err := range pipeline.Iter(context.Background(), p, lengths) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(n, " ")
	}
	fmt.Println()
	// Output:
	// 5 5 3 6 3
}
