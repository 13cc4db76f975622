package loaders_test

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// planned is a user-defined dataset that implements loaders.ReadPlanner: it records every plan.
type planned struct {
	loaders.Dataset
	mu    sync.Mutex
	plans [][]int
}

func (p *planned) PlanReads(indices []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans = append(p.plans, slices.Clone(indices))
}

func (p *planned) Info() loaders.Info { return loaders.Describe(p.Dataset) }

var _ loaders.ReadPlanner = (*planned)(nil)

func tinySamples(n int) []loaders.Sample {
	out := make([]loaders.Sample, n)
	for i := range out {
		out[i] = loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(i)}, H: 1, W: 1, C: 1}, Label: i % 3}
	}
	return out
}

// read runs epoch e of l, stopping after stop batches (stop < 0: all), and returns the indices
// it yielded, in order.
func read(t *testing.T, l *loaders.Loader, e, stop int) []int {
	t.Helper()
	var got []int
	k := 0
	for b, err := range l.Epoch(context.Background(), e) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Indices...)
		b.Release()
		if k++; k == stop {
			break
		}
	}
	return got
}

// TestReadPlannerUserDataset: a dataset of the user's own that implements ReadPlanner is told,
// once per epoch before its reads, exactly the indices this rank then reads, in order; a resumed
// epoch plans only the rest.
func TestReadPlannerUserDataset(t *testing.T) {
	ds := &planned{Dataset: loaders.NewMemory(loaders.Info{Name: "mine", NumClasses: 3, Shape: transforms.Shape{C: 1, H: 1, W: 1}}, tinySamples(21))}
	cfg := loaders.Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 9, Rank: 1, WorldSize: 2, Allocator: pinned.Heap()}
	l, err := loaders.New(ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for e := range 2 {
		got := read(t, l, e, -1)
		if len(ds.plans) != e+1 || !slices.Equal(ds.plans[e], got) {
			t.Fatalf("epoch %d: plans %v; want one more, the %v the epoch read", e, ds.plans, got)
		}
	}
	if slices.Equal(ds.plans[0], ds.plans[1]) {
		t.Errorf("epochs 0 and 1 planned the same order %v", ds.plans[0])
	}

	// Resume epoch 2 after two batches in another Loader: it plans the rest only.
	full := read(t, l, 2, -1)
	head := read(t, l, 2, 2)
	st := l.State()
	again, err := loaders.New(ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Restore(st); err != nil {
		t.Fatal(err)
	}
	ds.plans = nil
	tail := read(t, again, 2, -1)
	if len(ds.plans) != 1 || !slices.Equal(ds.plans[0], tail) || !slices.Equal(append(head, tail...), full) {
		t.Errorf("resumed epoch planned %v and read %v after %v; want the plan to be the rest of %v", ds.plans, tail, head, full)
	}
}

// prefetching is a user-defined stream source that implements PartPrefetcher: each of its parts
// holds samples 3p, 3p+1, 3p+2.
type prefetching struct {
	mu     sync.Mutex
	opened []int
	hints  [][]int
}

func (s *prefetching) Parts() int { return 5 }

func (s *prefetching) PartLens() []int { return []int{3, 3, 3, 3, 3} }

func (s *prefetching) Open(_ context.Context, part int) (loaders.SampleStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, part)
	return &partStream{samples: tinySamples(15)[3*part : 3*part+3]}, nil
}

func (s *prefetching) PrefetchParts(next []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hints = append(s.hints, slices.Clone(next))
}

func (s *prefetching) Info() loaders.Info {
	return loaders.Info{Name: "parts", NumClasses: 3, Shape: transforms.Shape{C: 1, H: 1, W: 1}}
}

var _ loaders.PartPrefetcher = (*prefetching)(nil)

type partStream struct{ samples []loaders.Sample }

func (p *partStream) Next(context.Context) (loaders.Sample, error) {
	if len(p.samples) == 0 {
		return loaders.Sample{}, io.EOF
	}
	s := p.samples[0]
	p.samples = p.samples[1:]
	return s, nil
}

func (p *partStream) Close() error { return nil }

// TestPartPrefetcherUserSource: a stream source of the user's own that implements PartPrefetcher
// is told, before each part is opened, the parts that follow it in the epoch's order.
func TestPartPrefetcherUserSource(t *testing.T) {
	src := &prefetching{}
	l, err := loaders.NewStream(src, loaders.Config{Batch: 4, Workers: 1, Shuffle: true, Seed: 4, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	read(t, l, 0, -1)
	if len(src.opened) != 5 || len(src.hints) != 5 {
		t.Fatalf("opened %v with hints %v; want each of 5 parts once, each after a hint", src.opened, src.hints)
	}
	for k := range src.opened {
		if !slices.Equal(src.hints[k], src.opened[k+1:]) {
			t.Errorf("hint before part %d = %v; want the parts opened after it, %v", src.opened[k], src.hints[k], src.opened[k+1:])
		}
	}
}
