package train

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
)

// memoryStream is a StreamSource of one part over a Memory dataset, read front to back.
type memoryStream struct{ ds *loaders.Memory }

func (m memoryStream) Parts() int         { return 1 }
func (m memoryStream) Info() loaders.Info { return m.ds.Info() }

func (m memoryStream) Open(context.Context, int) (loaders.SampleStream, error) {
	return &memoryStreamPart{ds: m.ds}, nil
}

type memoryStreamPart struct {
	ds   *loaders.Memory
	next int
}

func (p *memoryStreamPart) Next(ctx context.Context) (loaders.Sample, error) {
	if p.next == p.ds.Len() {
		return loaders.Sample{}, io.EOF
	}
	p.next++
	return p.ds.Sample(ctx, p.next-1)
}

func (p *memoryStreamPart) Close() error { return nil }

// TestFitStream trains from a stream loader, whose epochs have no length up front: the first epoch
// runs with the schedule told nothing (perEpoch and total 0), the second with the length the first
// one counted, and the model learns.
func TestFitStream(t *testing.T) {
	dev := openCPU(t)
	type call struct{ perEpoch, total int }
	var calls []call
	sched := func(step, perEpoch, total int) float64 {
		calls = append(calls, call{perEpoch, total})
		return 1
	}
	tr, err := New(smallCNN(t), dev, SGD{LR: 0.05, Momentum: 0.9, Nesterov: true}, Config{Epochs: 2, Seed: 1, Schedule: sched})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	trainL, err := loaders.NewStream(memoryStream{memDataset(600, 1)}, loaders.Config{Batch: 32, Workers: 2, Shuffle: true, ShuffleBuffer: 200, Seed: 9,
		Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	defer trainL.Close()
	testL, err := loaders.New(memDataset(200, 2), loaders.Config{Batch: 100, Workers: 2, Device: dev, Stream: tr.Stream()})
	if err != nil {
		t.Fatal(err)
	}
	defer testL.Close()
	data := FromLoader(trainL)
	if data.Steps() != 0 {
		t.Errorf("Steps() = %d; want 0 (unknown) for a stream", data.Steps())
	}
	res, err := tr.Fit(context.Background(), data, FromLoader(testL))
	if err != nil {
		t.Fatal(err)
	}
	const steps = (600 + 31) / 32
	want := append(slices.Repeat([]call{{0, 0}}, steps), slices.Repeat([]call{{steps, 2 * steps}}, steps)...)
	if !slices.Equal(calls, want) {
		t.Errorf("schedule saw (perEpoch, total) %v; want %d x (0, 0) then %d x (%d, %d)", calls, steps, steps, steps, 2*steps)
	}
	if res.TestAcc < 0.8 {
		t.Errorf("test accuracy %.3f after 2 epochs over the stream; want >= 0.8", res.TestAcc)
	}
}

// TestFromLoaderRefusesFloatTargets: the models take class ids, so a loader of other targets fails
// with ErrConfig rather than training on reinterpreted bytes.
func TestFromLoaderRefusesFloatTargets(t *testing.T) {
	dev := openCPU(t)
	l, err := loaders.New(memDataset(10, 1), loaders.Config{Batch: 5, Workers: 1, Device: dev, Target: loaders.MultiHot(10)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, err := range FromLoader(l).Batches(context.Background(), 0) {
		if !errors.Is(err, ErrConfig) {
			t.Errorf("a MultiHot loader: %v; want ErrConfig", err)
		}
	}
}
