package datasets

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// Helpers that build and drain Loaders over this package's datasets, on those of
// internal/loadertest (package loaders' own tests have the same thin wrappers: loadertest cannot
// name loaders' types).

// rawDataset returns n samples of h x w x c pixels; pixel j of sample i is byte(i*7 + j), label i%5.
func rawDataset(n, h, w, c int) *loaders.Memory {
	samples := make([]loaders.Sample, n)
	for i := range samples {
		samples[i] = loaders.Sample{Input: loadertest.RawInput(i, h, w, c), Label: i % 5}
	}
	return loaders.NewMemory(loaders.Info{Name: "raw", NumClasses: 5, Shape: transforms.Shape{C: c, H: h, W: w}}, samples)
}

// got is one batch copied back to the host.
type got struct {
	images  []byte
	labels  []int32
	indices []int
	seq     int
}

func hostBatch(t testing.TB, b *loaders.Batch) got {
	t.Helper()
	img, lab := loadertest.Host(t, b.Images, b.Labels, b.N, b.Shape.Len())
	return got{images: img, labels: lab, indices: slices.Clone(b.Indices), seq: b.Seq}
}

func newLoader(t testing.TB, ds loaders.Dataset, cfg loaders.Config) *loaders.Loader {
	t.Helper()
	if cfg.Allocator == nil {
		cfg.Allocator = pinned.Heap() // keep tests independent of the machine's mlock limit
	}
	return loadertest.CloseAtEnd[*loaders.Loader](t)(loaders.New(ds, cfg))
}

// epoch collects every batch of one epoch; stopAfter >= 0 breaks after that many batches.
func epoch(t testing.TB, l *loaders.Loader, e, stopAfter int) []got {
	t.Helper()
	return loadertest.Epoch(t, l.Epoch(context.Background(), e), stopAfter, hostBatch)
}

func newStreamLoader(t testing.TB, src loaders.StreamSource, cfg loaders.Config) *loaders.Loader {
	t.Helper()
	cfg.Allocator = pinned.Heap()
	return loadertest.CloseAtEnd[*loaders.Loader](t)(loaders.NewStream(src, cfg))
}

// recordingSource wraps a SizedSource and records, from the Loader's source goroutine, the parts it
// opens, the samples read from each, and the parts each PrefetchParts call names (passed on).
// onFirst, if set, runs inside the first Next of the first part opened, after the sample is read:
// while that part is still being read.
type recordingSource struct {
	loaders.SizedSource
	mu         sync.Mutex
	opened     []int
	samples    map[int][]loaders.Sample
	prefetched [][]int
	onFirst    func(part int, next []int)
}

func (r *recordingSource) PrefetchParts(next []int) {
	r.mu.Lock()
	r.prefetched = append(r.prefetched, slices.Clone(next))
	r.mu.Unlock()
	if p, ok := r.SizedSource.(loaders.PartPrefetcher); ok {
		p.PrefetchParts(next)
	}
}

func (r *recordingSource) Open(ctx context.Context, part int) (loaders.SampleStream, error) {
	st, err := r.SizedSource.Open(ctx, part)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.samples = map[int][]loaders.Sample{}
	}
	r.opened = append(r.opened, part)
	return &recordingStream{SampleStream: st, r: r, part: part, first: len(r.opened) == 1}, nil
}

type recordingStream struct {
	loaders.SampleStream
	r     *recordingSource
	part  int
	first bool
}

func (s *recordingStream) Next(ctx context.Context) (loaders.Sample, error) {
	smp, err := s.SampleStream.Next(ctx)
	if err != nil {
		return smp, err
	}
	r := s.r
	r.mu.Lock()
	r.samples[s.part] = append(r.samples[s.part], smp)
	var next []int
	if len(r.prefetched) > 0 {
		next = r.prefetched[len(r.prefetched)-1]
	}
	f := r.onFirst
	if s.first {
		r.onFirst = nil
	}
	r.mu.Unlock()
	if s.first && f != nil {
		f(s.part, next)
	}
	s.first = false
	return smp, nil
}

var crop1 = transforms.Compose(transforms.CenterCrop(1))
