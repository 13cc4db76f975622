package train

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/optim"
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
			tr, err := New(context.Background(), m, dev, optim.SGD{LR: 0.01, Momentum: 0.9}, Config{Seed: 1})
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

// BenchmarkDataParallelStep times a training step of W ranks (goroutines of this process, each
// with its own CPU device and trainer, the gradients all-reduced over collective's ring on 127.0.0.1)
// at the same per-rank batch as one rank, to split a data-parallel step's overhead: "1" is one
// rank, "2-apart" two ranks that step together but all-reduce nothing (what two ranks cost each
// other on the cores: contention), "2" two data-parallel ranks (contention and communication).
// allreduce-ms/step and exposed-ms/step are rank 0's all-reduce time and the part of it that the
// backward pass did not hide.
func BenchmarkDataParallelStep(b *testing.B) {
	mnist := Shape{C: 1, H: 28, W: 28}
	for _, model := range []string{"mlp", "cnn"} {
		for _, mode := range []string{"1", "2-apart", "2"} {
			b.Run(model+"/"+mode, func(b *testing.B) {
				world := 1
				if mode != "1" {
					world = 2
				}
				var groups []Collective
				if mode == "2" {
					groups = testGroups(b, world)
				}
				const n = 128
				per := mnist.Len()
				imgs, labels := synthetic(n*per/64, 1)
				trs := make([]*Trainer, world)
				batches := make([]Batch, world)
				var mean, std []float32
				for r := range world {
					dev := openCPU(b)
					m, err := NewModel(model, mnist, 10)
					if err != nil {
						b.Fatal(err)
					}
					cfg := Config{Seed: 1}
					if groups != nil {
						cfg.Collective = groups[r]
					}
					if trs[r], err = New(context.Background(), m, dev, optim.SGD{LR: 0.01, Momentum: 0.9}, cfg); err != nil {
						b.Fatal(err)
					}
					defer trs[r].Close() // the same seed, the same weights: no broadcast needed
					d := newMemData(dev, imgs[:n*per], labels[:n], mnist, n, false, 0)
					defer d.close()
					for bt := range d.Batches(context.Background(), 0) {
						batches[r] = bt
					}
					mean, std = d.Normalization()
				}
				ctx := context.Background()
				errs := make([]error, world)
				step := func() {
					var wg sync.WaitGroup
					for r := range world {
						wg.Go(func() { _, errs[r] = trs[r].trainStep(ctx, batches[r], mean, std, 1<<30, 1<<20) })
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
				}
				step() // the activations' first allocation
				var comm0, exposed0 time.Duration
				if d := trs[0].dist; d != nil {
					comm0, exposed0 = d.comm, d.exposed
				}
				cpu0 := cpuTime()
				for b.Loop() {
					step()
				}
				b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/step")
				// CPU time, all ranks together: the fairer figure on a shared machine.
				b.ReportMetric((cpuTime()-cpu0).Seconds()*1000/float64(b.N), "cpu-ms/step")
				if d := trs[0].dist; d != nil {
					b.ReportMetric((d.comm-comm0).Seconds()*1000/float64(b.N), "allreduce-ms/step")
					b.ReportMetric((d.exposed-exposed0).Seconds()*1000/float64(b.N), "exposed-ms/step")
				}
			})
		}
	}
}
