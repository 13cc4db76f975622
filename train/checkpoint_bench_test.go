package train

import (
	"context"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/optim"
)

// BenchmarkCheckpoint50M writes and reads the checkpoint of a 50M-parameter ViT (8 layers of
// width 720, the largest tensor 8.3 MB) with AdamW's state (weights and two slots: a 600 MB
// payload) and reports the peak of the Go heap above what the trainer held before (peak-MB) and
// the bytes allocated (alloc-MB/op): the memory a checkpoint costs (go test -run '^$' -bench
// Checkpoint50M ./train/).
func BenchmarkCheckpoint50M(b *testing.B) {
	m, err := NewModel("vit(image_size=32,patch_size=4,num_layers=8,num_heads=8,hidden_dim=720,mlp_dim=2880)", Shape{C: 3, H: 32, W: 32}, 10)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := New(context.Background(), m, openCPU(b), optim.AdamW{LR: 1e-3}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	path := filepath.Join(b.TempDir(), "ck")
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"save", func() error { return tr.Save(context.Background(), path) }},
		{"load", func() error { return tr.Load(context.Background(), path) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var peak, alloc uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				p, err := heapPeak(c.do)
				if err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				peak, alloc = max(peak, p), alloc+after.TotalAlloc-before.TotalAlloc
			}
			b.ReportMetric(float64(peak)/1e6, "peak-MB")
			b.ReportMetric(float64(alloc)/1e6/float64(b.N), "alloc-MB/op")
		})
	}
}

// heapPeak runs do and returns the peak of the live heap above its level before, sampled every
// millisecond.
func heapPeak(do func() error) (uint64, error) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	err := do()
	close(stop)
	wg.Wait()
	return max(peak, read()) - base, err
}
