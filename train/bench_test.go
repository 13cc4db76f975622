package train

import (
	"context"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/cputime"
)

// cpuTime is the process's user+system CPU time (0 where the system does not report it).
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// BenchmarkStep times one training step (normalize, forward, loss, backward, SGD update, wait) on
// the CPU device, on a batch already on the device: the MNIST models and resnet8 at batch 128,
// resnet18 on 64 px RGB images at batch 32 (the model of the export test and the PyTorch
// comparison, scripts/torch_resnet.py).
func BenchmarkStep(b *testing.B) {
	mnist, rgb64 := Shape{C: 1, H: 28, W: 28}, Shape{C: 3, H: 64, W: 64}
	for _, bc := range []struct {
		name  string
		shape Shape
		n     int
	}{{"mlp", mnist, 128}, {"cnn", mnist, 128}, {"resnet8", mnist, 128}, {"resnet18", rgb64, 32}} {
		b.Run(bc.name, func(b *testing.B) {
			dev := openCPU(b)
			m, err := NewModel(bc.name, bc.shape, 10)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := New(m, dev, SGD{LR: 0.01, Momentum: 0.9}, Config{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			n, per := bc.n, bc.shape.Len()
			imgs, labels := synthetic(n*per/64, 1)
			d := newMemData(dev, imgs[:n*per], labels[:n], bc.shape, n, false, 0)
			defer d.close()
			var batch Batch
			for bt := range d.Batches(context.Background(), 0) {
				batch = bt
			}
			mean, std := d.Normalization()
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(n * per))
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := tr.trainStep(ctx, batch, mean, std, 1<<30, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "samples/s")
			// CPU time is the fairer figure on a shared machine (wall time counts other processes).
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1000/float64(b.N*n), "cpu-ms/sample")
		})
	}
}
