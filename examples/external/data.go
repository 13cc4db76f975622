package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// exerciseData uses the loaders' extension points from outside the module: a user StreamSource
// read through a shuffle buffer and resumed mid-epoch, a user Sampler, multi-label targets with
// a custom collate hook, and shards written and opened with package datasets under a user
// dataset that receives the Loader's read-ahead plan.
func exerciseData() error {
	if err := streamAndResume(); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if err := userSampler(); err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	if err := multiLabelCollate(); err != nil {
		return fmt.Errorf("multi-label: %w", err)
	}
	if err := shardsAndReadAhead(); err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	return nil
}

// records is a stream of 3 parts of 20 tiny images each, generated front to back.
type records struct{}

func (records) Parts() int { return 3 }

func (records) Info() loaders.Info {
	return loaders.Info{Name: "records", NumClasses: 4, Shape: transforms.Shape{C: 1, H: 2, W: 2}}
}

func (records) Open(_ context.Context, part int) (loaders.SampleStream, error) {
	return &recordStream{part: part}, nil
}

type recordStream struct{ part, next int }

func (s *recordStream) Next(context.Context) (loaders.Sample, error) {
	if s.next == 20 {
		return loaders.Sample{}, io.EOF
	}
	id := 20*s.part + s.next
	s.next++
	return loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(id), 0, 0, 0}, H: 2, W: 2, C: 1}, Label: id % 4}, nil
}

func (s *recordStream) Close() error { return nil }

// ids returns the first pixel of each image of an epoch's batches (the record's id), stopping
// after stop batches when stop >= 0.
func ids(ld *loaders.Loader, epoch, stop int) ([]byte, error) {
	var out []byte
	n := 0
	for b, err := range ld.Epoch(context.Background(), epoch) {
		if err != nil {
			return nil, err
		}
		px, ok := gpu.HostBytes(b.Images)
		if !ok {
			b.Release()
			return nil, fmt.Errorf("not a CPU-device batch")
		}
		for k := range b.N {
			out = append(out, px[4*k])
		}
		b.Release()
		if n++; n == stop {
			break
		}
	}
	return out, nil
}

func streamAndResume() error {
	cfg := loaders.Config{Batch: 8, Workers: 2, Shuffle: true, ShuffleBuffer: 16, Seed: 3}
	open := func() (*loaders.Loader, error) { return loaders.NewStream(records{}, cfg) }
	full, err := open()
	if err != nil {
		return err
	}
	defer full.Close()
	want, err := ids(full, 1, -1)
	if err != nil {
		return err
	}
	first, err := open()
	if err != nil {
		return err
	}
	defer first.Close()
	head, err := ids(first, 1, 3)
	if err != nil {
		return err
	}
	second, err := open()
	if err != nil {
		return err
	}
	defer second.Close()
	if err := second.Restore(first.State()); err != nil {
		return err
	}
	tail, err := ids(second, 1, -1)
	if err != nil {
		return err
	}
	if got := append(head, tail...); !slices.Equal(got, want) {
		return fmt.Errorf("resumed epoch %v differs from %v", got, want)
	}
	fmt.Printf("stream: %d records through a shuffle buffer of %d, resumed after 3 batches identically\n", len(want), cfg.ShuffleBuffer)
	return nil
}

// everyOther is a user Sampler: even indices first, then odd ones, the same every epoch.
type everyOther struct{ n int }

func (s everyOther) Len() int { return s.n }

func (s everyOther) Indices(uint64, int) []int {
	var out []int
	for start := range 2 {
		for i := start; i < s.n; i += 2 {
			out = append(out, i)
		}
	}
	return out
}

func userSampler() error {
	var samples []loaders.Sample
	for i := range 10 {
		samples = append(samples, loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(i)}, H: 1, W: 1, C: 1}, Label: i % 2})
	}
	ds := loaders.NewMemory(loaders.Info{Name: "ten", NumClasses: 2, Shape: transforms.Shape{C: 1, H: 1, W: 1}}, samples)
	ld, err := loaders.New(ds, loaders.Config{Batch: 5, Workers: 2, Sampler: everyOther{ds.Len()}})
	if err != nil {
		return err
	}
	defer ld.Close()
	var order []int
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			return err
		}
		order = append(order, b.Indices...)
		b.Release()
	}
	if want := (everyOther{10}).Indices(0, 0); !slices.Equal(order, want) {
		return fmt.Errorf("loaded %v; want the sampler's order %v", order, want)
	}
	fmt.Println("sampler: loaded in the user sampler's order", order)
	return nil
}

func multiLabelCollate() error {
	const classes, eps = 3, 0.1
	tags := [][]int{{0}, {1, 2}, {}, {0, 1, 2}}
	var samples []loaders.Sample
	for i, t := range tags {
		samples = append(samples, loaders.Sample{Input: transforms.Input{Pixels: []byte{byte(i)}, H: 1, W: 1, C: 1}, Labels: t})
	}
	ds := loaders.NewMemory(loaders.Info{Name: "tags", Shape: transforms.Shape{C: 1, H: 1, W: 1}}, samples)
	// The collate hook smooths the multi-hot targets in the host slot, before the copy.
	smooth := func(b *loaders.HostBatch) error {
		for k := 0; k < len(b.Targets); k += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b.Targets[k:]))
			binary.LittleEndian.PutUint32(b.Targets[k:], math.Float32bits(v*(1-eps)+eps/2))
		}
		return nil
	}
	ld, err := loaders.New(ds, loaders.Config{Batch: 4, Workers: 2, Target: loaders.MultiHot(classes), Collate: smooth})
	if err != nil {
		return err
	}
	defer ld.Close()
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			return err
		}
		raw, _ := gpu.HostBytes(b.Labels)
		for k, i := range b.Indices {
			for c := range classes {
				got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(k*classes+c):]))
				want := float32(eps / 2)
				if slices.Contains(tags[i], c) {
					want = 1 - eps/2
				}
				if math.Abs(float64(got-want)) > 1e-6 {
					b.Release()
					return fmt.Errorf("sample %d class %d: target %v; want %v", i, c, got, want)
				}
			}
		}
		b.Release()
	}
	fmt.Println("multi-label: smoothed multi-hot targets for", len(tags), "samples")
	return nil
}
