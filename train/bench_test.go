package train

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/cputime"
	"github.com/stoke-ml/stoke/nn"
)

// cpuTime is the process's user+system CPU time (0 where the system does not report it).
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// BenchmarkStep times one training step (normalize, forward, loss, backward, SGD update, wait) on
// the CPU device, on a batch already on the device: the MNIST models and resnet8 at batch 128,
// resnet18 on 64 px RGB images at batch 32 (the model of the export test and the PyTorch
// comparison, scripts/torch_resnet.py). The -nn variants are the same networks written as one
// module of package nn (train.NN), whose backward pass the graph derives: their ratio to the
// built-in layers is the graph's cost.
func BenchmarkStep(b *testing.B) {
	mnist, rgb64 := Shape{C: 1, H: 28, W: 28}, Shape{C: 3, H: 64, W: 64}
	for _, bc := range []struct {
		name  string
		shape Shape
		n     int
	}{{"mlp", mnist, 128}, {"mlp-nn", mnist, 128}, {"cnn", mnist, 128}, {"cnn-nn", mnist, 128}, {"resnet8", mnist, 128}, {"resnet8-nn", mnist, 128},
		{"resnet18", rgb64, 32}, {"resnet18-nn", rgb64, 32}} {
		b.Run(bc.name, func(b *testing.B) {
			dev := openCPU(b)
			m, err := benchModel(bc.name, bc.shape)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := New(context.Background(), m, dev, SGD{LR: 0.01, Momentum: 0.9}, Config{Seed: 1})
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
					if trs[r], err = New(context.Background(), m, dev, SGD{LR: 0.01, Momentum: 0.9}, cfg); err != nil {
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

// benchModel is NewModel's model of that name, or for a name ending in -nn the same network
// written as one module of package nn.
func benchModel(name string, in Shape) (*Model, error) {
	relu := nn.Fn(nn.ReLU)
	conv := func(i, o int) nn.Module { return nn.NewConv2d(i, o, 5, nn.ConvOptions{Padding: 2}, true) }
	pool := nn.MaxPool2dLayer{K: 2}
	switch name {
	case "mlp-nn":
		return Sequential(name, in, 10, Custom(NN(described{"mlpnn", nn.Sequential{nn.Fn(nn.Flatten),
			nn.NewLinear(in.Len(), 512, true), relu, nn.NewLinear(512, 256, true), relu, nn.NewLinear(256, 10, true)}})))
	case "cnn-nn":
		return Sequential(name, in, 10, Custom(NN(described{"cnnnn", nn.Sequential{conv(in.C, 32), pool, relu, conv(32, 64), pool, relu,
			nn.Fn(nn.Flatten), nn.NewLinear(64*(in.H/4)*(in.W/4), 128, true), relu, nn.NewLinear(128, 10, true)}})))
	case "resnet8-nn":
		return Sequential(name, in, 10, Custom(NN(described{"resnet8nn", benchResNet(in.C, 16, []int{16, 32, 64}, 1)})))
	case "resnet18-nn":
		stem := nn.Sequential{nn.NewConv2d(in.C, 64, 7, nn.ConvOptions{Stride: 2, Padding: 3}, false), nn.NewBatchNorm2d(64), relu,
			nn.MaxPool2dLayer{K: 3, Stride: 2, Padding: 1}}
		return Sequential(name, in, 10, Custom(NN(described{"resnet18nn", append(stem, benchResNet(64, 64, []int{64, 128, 256, 512}, 2)[3:]...)})))
	}
	return NewModel(name, in, 10)
}

// benchResNet is a ResNet of basic blocks: a 3x3 stem of c channels, blocks per stage of widths,
// global average pooling and a linear layer to 10 classes.
func benchResNet(in, c int, widths []int, blocks int) nn.Sequential {
	cbn := func(i, o, k, s int) nn.Sequential {
		return nn.Sequential{nn.NewConv2d(i, o, k, nn.ConvOptions{Stride: s, Padding: k / 2}, false), nn.NewBatchNorm2d(o)}
	}
	net := nn.Sequential{nn.NewConv2d(in, c, 3, nn.ConvOptions{Padding: 1}, false), nn.NewBatchNorm2d(c), nn.Fn(nn.ReLU)}
	for st, w := range widths {
		for i := range blocks {
			s := 1
			if i == 0 && st > 0 {
				s = 2
			}
			b := &benchBlock{Main: append(cbn(c, w, 3, s), nn.Fn(nn.ReLU), cbn(w, w, 3, 1)[0], cbn(w, w, 3, 1)[1])}
			if s != 1 || c != w {
				b.Short = cbn(c, w, 1, s)
			}
			net, c = append(net, b), w
		}
	}
	return append(net, nn.Fn(nn.GlobalAvgPool), nn.Fn(nn.Flatten), nn.NewLinear(c, 10, true))
}

// benchBlock is relu(main(x) + short(x)), an empty short the identity.
type benchBlock struct{ Main, Short nn.Sequential }

func (b *benchBlock) Forward(x *nn.Tensor) *nn.Tensor {
	s := x
	if len(b.Short) > 0 {
		s = b.Short.Forward(x)
	}
	return nn.ReLU(nn.Add(b.Main.Forward(x), s))
}

// described is a module of package nn with a description.
type described struct {
	desc string
	nn.Sequential
}

func (d described) String() string { return d.desc }
