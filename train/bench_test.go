package train

import (
	"context"
	"testing"
)

// BenchmarkStep times one training step (normalize, forward, loss, backward, SGD update, wait)
// of the MNIST models on the CPU device, batch 128, on a batch already on the device.
func BenchmarkStep(b *testing.B) {
	for _, name := range []string{"mlp", "cnn"} {
		b.Run(name, func(b *testing.B) {
			dev := openCPU(b)
			shape := Shape{C: 1, H: 28, W: 28}
			m, err := NewModel(name, shape, 10)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := New(m, dev, SGD{LR: 0.01, Momentum: 0.9}, Config{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			const n = 128
			imgs, labels := synthetic(n*784/64, 1)
			d := newMemData(dev, imgs[:n*784], labels[:n], shape, n, false, 0)
			defer d.close()
			var batch Batch
			for bt := range d.Batches(context.Background(), 0) {
				batch = bt
			}
			mean, std := d.Normalization()
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(n * shape.Len()))
			for b.Loop() {
				if _, err := tr.trainStep(ctx, batch, mean, std, 1<<30, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
