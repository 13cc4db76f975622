package train

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/optim"
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
	tr, err := New(context.Background(), smallCNN(t), dev, optim.SGD{LR: 0.05, Momentum: 0.9, Nesterov: true}, Config{Epochs: 2, Seed: 1, Schedule: sched})
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

// TestFromLoaderTargets: a MultiHot or Vector loader gives float targets and says which
// (Targeted); a loader of a Target the trainer does not know fails with ErrConfig rather than
// training on reinterpreted bytes.
func TestFromLoaderTargets(t *testing.T) {
	dev := openCPU(t)
	for _, tc := range []struct {
		target loaders.Target
		kind   TargetKind
	}{{loaders.MultiHot(10), MultiHot}, {loaders.Vector(10), Vector}, {ownTarget{}, ClassIDs}} {
		var ds loaders.Dataset = memDataset(10, 1)
		if tc.kind == Vector {
			ds = vectorDataset{memDataset(10, 1)}
		}
		l, err := loaders.New(ds, loaders.Config{Batch: 5, Workers: 1, Device: dev, Target: tc.target})
		if err != nil {
			t.Fatal(err)
		}
		data := FromLoader(l)
		if k := data.(Targeted).TargetKind(); k != tc.kind {
			t.Errorf("%T: kind %v; want %v", tc.target, k, tc.kind)
		}
		batches := 0
		for b, err := range data.Batches(context.Background(), 0) {
			if _, own := tc.target.(ownTarget); own {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("a loader of its own Target: %v; want ErrConfig", err)
				}
				continue
			}
			if err != nil || b.Labels.Len != 0 || b.Targets.Len != 5*10 {
				t.Fatalf("%T: batch with %d labels, %d targets (%v); want 0 and 50", tc.target, b.Labels.Len, b.Targets.Len, err)
			}
			b.Release()
			batches++
		}
		if _, own := tc.target.(ownTarget); !own && batches != 2 {
			t.Errorf("%T: %d batches; want 2", tc.target, batches)
		}
		l.Close()
	}
}

// ownTarget is a Target of a user's: one byte per sample.
type ownTarget struct{}

func (ownTarget) Size() int                        { return 1 }
func (ownTarget) Put([]byte, loaders.Sample) error { return nil }

// vectorDataset gives every sample a Target of 10 values.
type vectorDataset struct{ *loaders.Memory }

func (d vectorDataset) Sample(ctx context.Context, i int) (loaders.Sample, error) {
	s, err := d.Memory.Sample(ctx, i)
	s.Target = make([]float32, 10)
	return s, err
}
