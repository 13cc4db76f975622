package collective_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/stoke-ml/stoke/collective"
)

// Two ranks, as goroutines here (processes under torchrun or Slurm, with
// collective.FromEnv), sum a gradient-like buffer.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // find a free port for rank 0's store
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	results := make([][]float32, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			g, err := collective.Init(ctx, collective.Config{Rank: rank, WorldSize: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer g.Close()
			grad := []float32{1, 2, 3}
			for i := range grad {
				grad[i] *= float32(rank + 1)
			}
			if err := g.AllReduce(ctx, grad, collective.Avg); err != nil {
				fmt.Println(err)
				return
			}
			results[rank] = grad
		}()
	}
	wg.Wait()
	fmt.Println("rank 0:", results[0])
	fmt.Println("rank 1:", results[1])
	// Output:
	// rank 0: [1.5 3 4.5]
	// rank 1: [1.5 3 4.5]
}
