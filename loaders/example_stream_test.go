package loaders_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// ticks is a user-defined StreamSource: two parts ("files") of 6 tiny images each, generated
// front to back the way records arrive from a queue or a socket. Open is called once per part
// and epoch.
type ticks struct{}

func (ticks) Parts() int { return 2 }

func (ticks) Open(_ context.Context, part int) (loaders.SampleStream, error) {
	return &tickStream{part: part}, nil
}

func (ticks) Info() loaders.Info {
	return loaders.Info{Name: "ticks", NumClasses: 2, Shape: transforms.Shape{C: 1, H: 2, W: 2}}
}

type tickStream struct{ part, next int }

func (s *tickStream) Next(context.Context) (loaders.Sample, error) {
	if s.next == 6 {
		return loaders.Sample{}, io.EOF
	}
	id := 10*s.part + s.next // 0..5 and 10..15
	s.next++
	px := []byte{byte(id), byte(id), byte(id), byte(id)}
	return loaders.Sample{Input: transforms.Input{Pixels: px, H: 2, W: 2, C: 1}, Label: id % 2}, nil
}

func (s *tickStream) Close() error { return nil }

// ExampleNewStream reads a stream through a shuffle buffer of 4 samples: the parts come in an
// order drawn from (Seed, epoch), each sample is drawn from the buffer, and the batches are the
// same whatever the number of workers. The length of an epoch is known only at its end.
func ExampleNewStream() {
	ld, err := loaders.NewStream(ticks{}, loaders.Config{Batch: 4, Workers: 2, Shuffle: true, ShuffleBuffer: 4, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ld.Close()
	for batch, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		px, _ := gpu.HostBytes(batch.Images) // CPU backend: the device memory is Go memory
		ids := make([]byte, batch.N)
		for k := range ids {
			ids[k] = px[k*4]
		}
		fmt.Println("batch", batch.Seq, "samples", ids)
		batch.Release()
	}
	st := ld.State()
	fmt.Println("next: epoch", st.Epoch, "batch", st.Batch)
	// Output:
	// batch 0 samples [13 12 11 10]
	// batch 1 samples [1 2 14 15]
	// batch 2 samples [0 4 3 5]
	// next: epoch 1 batch 0
}

// ExampleMultiHot loads multi-label samples (a picture can hold a cat and a dog): the MultiHot
// target turns each sample's Labels into float32 multi-hot rows, what a sigmoid cross-entropy loss
// takes.
func ExampleMultiHot() {
	const classes = 4
	var samples []loaders.Sample
	for i, labels := range [][]int{{0}, {1, 3}, {}, {0, 1, 2, 3}} {
		px := make([]byte, 2*2)
		px[0] = byte(i)
		samples = append(samples, loaders.Sample{Input: transforms.Input{Pixels: px, H: 2, W: 2, C: 1}, Labels: labels})
	}
	ds := loaders.NewMemory(loaders.Info{Name: "tags", Shape: transforms.Shape{C: 1, H: 2, W: 2}}, samples)
	ld, err := loaders.New(ds, loaders.Config{Batch: 4, Workers: 2, Target: loaders.MultiHot(classes)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ld.Close()
	for batch, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		targets, _ := gpu.HostBytes(batch.Labels) // N rows of classes float32
		for k := range batch.N {
			row := make([]float32, classes)
			for c := range row {
				row[c] = math.Float32frombits(binary.LittleEndian.Uint32(targets[4*(k*classes+c):]))
			}
			fmt.Println("sample", batch.Indices[k], row)
		}
		batch.Release()
	}
	// Output:
	// sample 0 [1 0 0 0]
	// sample 1 [0 1 0 1]
	// sample 2 [0 0 0 0]
	// sample 3 [1 1 1 1]
}
