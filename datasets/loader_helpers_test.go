package datasets

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// Helpers that build and drain Loaders over this package's datasets (copies of those in
// package loaders' own tests, which this package cannot import).

// noLeaks checks for leaked goroutines after the test's other cleanups (Loader.Close) ran.
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// rawDataset returns n samples of h x w x c pixels; pixel j of sample i is byte(i*7 + j), label i%5.
func rawDataset(n, h, w, c int) *loaders.Memory {
	samples := make([]loaders.Sample, n)
	for i := range samples {
		px := make([]byte, h*w*c)
		for j := range px {
			px[j] = byte(i*7 + j)
		}
		samples[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: h, W: w, C: c}, Label: i % 5}
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
	img, ok1 := gpu.HostBytes(b.Images)
	lab, ok2 := gpu.HostBytes(b.Labels)
	if !ok1 || !ok2 {
		t.Fatal("batch buffers are not CPU-backend buffers")
	}
	g := got{images: bytes.Clone(img[:b.N*b.Shape.Len()]), indices: slices.Clone(b.Indices), seq: b.Seq}
	for k := range b.N {
		g.labels = append(g.labels, int32(binary.LittleEndian.Uint32(lab[4*k:])))
	}
	return g
}

func newLoader(t testing.TB, ds loaders.Dataset, cfg loaders.Config) *loaders.Loader {
	t.Helper()
	if cfg.Allocator == nil {
		cfg.Allocator = pinned.Heap() // keep tests independent of the machine's mlock limit
	}
	return closeAtEnd(t)(loaders.New(ds, cfg))
}

// closeAtEnd takes what New or NewStream returned: it fails the test on an error, and closes the
// Loader when the test ends.
func closeAtEnd(t testing.TB) func(*loaders.Loader, error) *loaders.Loader {
	return func(l *loaders.Loader, err error) *loaders.Loader {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return l
	}
}

// epoch collects every batch of one epoch; stopAfter >= 0 breaks after that many batches.
func epoch(t testing.TB, l *loaders.Loader, e, stopAfter int) []got {
	t.Helper()
	var out []got
	for b, err := range l.Epoch(context.Background(), e) {
		if err != nil {
			t.Fatalf("Epoch(%d): %v", e, err)
		}
		out = append(out, hostBatch(t, b))
		b.Release()
		if len(out) == stopAfter {
			break
		}
	}
	return out
}

func newStreamLoader(t testing.TB, src loaders.StreamSource, cfg loaders.Config) *loaders.Loader {
	t.Helper()
	cfg.Allocator = pinned.Heap()
	return closeAtEnd(t)(loaders.NewStream(src, cfg))
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

// pngHeader returns a PNG signature and IHDR chunk declaring w x h RGB pixels, without any data.
func pngHeader(w, h uint32) []byte {
	var ihdr bytes.Buffer
	ihdr.WriteString("IHDR")
	binary.Write(&ihdr, binary.BigEndian, w)
	binary.Write(&ihdr, binary.BigEndian, h)
	ihdr.Write([]byte{8, 2, 0, 0, 0})
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(ihdr.Len()-4))
	b.Write(ihdr.Bytes())
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr.Bytes()))
	return b.Bytes()
}

var crop1 = transforms.Compose(transforms.CenterCrop(1))
