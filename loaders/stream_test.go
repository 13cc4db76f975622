package loaders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// memSource is a StreamSource over in-memory parts; sample j of the whole source has label
// j%3 and carries j in Key. Next sleeps a little now and then, as a network would.
type memSource struct {
	parts [][]Sample
	info  Info
}

func (m *memSource) Parts() int { return len(m.parts) }
func (m *memSource) Info() Info { return m.info }

func (m *memSource) Open(_ context.Context, part int) (SampleStream, error) {
	return &memStream{samples: m.parts[part], part: part}, nil
}

type memStream struct {
	samples []Sample
	part    int
	next    int
}

func (s *memStream) Next(context.Context) (Sample, error) {
	if s.next == len(s.samples) {
		return Sample{}, io.EOF
	}
	r := rng.NewSample()
	r.Reset(7, s.part, s.next)
	if r.IntN(4) == 0 {
		time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
	}
	s.next++
	return s.samples[s.next-1], nil
}

func (s *memStream) Close() error { return nil }

// pngSource splits n PNG images of varied sizes into parts of the given sizes.
func pngSource(t testing.TB, sizes ...int) *memSource {
	src := &memSource{info: Info{Name: "pngstream", NumClasses: 3}}
	j := 0
	for _, n := range sizes {
		var part []Sample
		for range n {
			part = append(part, Sample{Input: transforms.Input{Encoded: loadertest.PNG(t, 12+j%5, 10+j%3, byte(j))}, Label: j % 3, Key: fmt.Sprint(j)})
			j++
		}
		src.parts = append(src.parts, part)
	}
	return src
}

// sized is a memSource that says its parts' sizes, or lies about them by adding lie to part 0.
type sized struct {
	*memSource
	lie int
}

func (s sized) PartLens() []int {
	var lens []int
	for _, p := range s.parts {
		lens = append(lens, len(p))
	}
	lens[0] += s.lie
	return lens
}

func newStreamLoader(t testing.TB, src StreamSource, cfg Config) *Loader {
	t.Helper()
	cfg.Allocator = pinned.Heap()
	return loadertest.CloseAtEnd[*Loader](t)(NewStream(src, cfg))
}

var streamTransform = transforms.Compose(transforms.RandomResizedCrop(8), transforms.HorizontalFlip(0.5), transforms.ColorJitter(0.3, 0.3, 0.3))

// TestStreamWorkersIdentical: a stream loader's batches (shuffle buffer, shuffled parts, random
// augmentation) are bit-identical for 1 and 8 workers, and every sample comes once per epoch.
func TestStreamWorkersIdentical(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 9, 7, 11, 3, 8)
	cfg := Config{Batch: 5, Shuffle: true, ShuffleBuffer: 6, Seed: 42, Transform: streamTransform}
	var ref []got
	for _, workers := range []int{1, 8} {
		cfg.Workers = workers
		l := newStreamLoader(t, src, cfg)
		if l.BatchesPerEpoch() != 0 {
			t.Errorf("BatchesPerEpoch() = %d; want 0 (unknown) for a stream", l.BatchesPerEpoch())
		}
		bs := epoch(t, l, 3, -1)
		if workers == 1 {
			ref = bs
			// Stream position p is source sample ids[p]: the parts come in the epoch's order.
			var ids []int
			for _, part := range l.newStreamReader(3).parts {
				for _, s := range src.parts[part] {
					var j int
					fmt.Sscan(s.Key, &j)
					ids = append(ids, j)
				}
			}
			if slices.IsSorted(ids) {
				t.Error("the parts came in their own order")
			}
			var all []int
			for _, b := range bs {
				all = append(all, b.indices...)
				for k, i := range b.indices {
					if b.labels[k] != int32(ids[i]%3) {
						t.Errorf("stream position %d (sample %d) has label %d; want %d", i, ids[i], b.labels[k], ids[i]%3)
					}
				}
			}
			if len(bs) != 8 || len(bs[7].indices) != 3 {
				t.Fatalf("%d batches, the last of %d; want 8, the last of 3 (38 samples)", len(bs), len(bs[len(bs)-1].indices))
			}
			if slices.IsSorted(all) {
				t.Error("the shuffled stream came in stream order")
			}
			if slices.Sort(all); !slices.Equal(all, sequential(38).Indices(0, 0)) {
				t.Errorf("epoch visits %v; want every position of 0..37 once", all)
			}
			continue
		}
		if len(bs) != len(ref) {
			t.Fatalf("workers=%d: %d batches; want %d", workers, len(bs), len(ref))
		}
		for k := range ref {
			if !bytes.Equal(bs[k].images, ref[k].images) || !slices.Equal(bs[k].labels, ref[k].labels) || !slices.Equal(bs[k].indices, ref[k].indices) {
				t.Errorf("workers=%d: batch %d differs from workers=1", workers, k)
			}
		}
	}
	l := newStreamLoader(t, src, cfg)
	if bs := epoch(t, l, 4, -1); slices.Equal(bs[0].indices, ref[0].indices) {
		t.Error("epochs 3 and 4 begin with the same samples")
	}
}

// TestStreamResume: a stream loader restored from a mid-epoch State yields exactly the rest of the
// uninterrupted epoch, from positions while the buffer fills, in the middle, and while it drains,
// for one rank and for ranks with padding.
func TestStreamResume(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 9, 7, 11, 3, 8) // 38 samples
	for _, tc := range []struct {
		world, buffer int
		src           StreamSource
	}{{1, 6, src}, {3, 4, src}, {1, 0, src}, {4, 50, src}, {2, 5, sized{memSource: src}}} {
		for rank := range tc.world {
			cfg := Config{Batch: 3, Workers: 3, Shuffle: tc.buffer > 0, ShuffleBuffer: tc.buffer, Seed: 5, Transform: streamTransform, Rank: rank,
				WorldSize: tc.world}
			full := epoch(t, newStreamLoader(t, tc.src, cfg), 2, -1)
			for _, stop := range []int{1, len(full) / 2, len(full) - 1} {
				first := newStreamLoader(t, tc.src, cfg)
				head := epoch(t, first, 2, stop)
				st := first.State()
				second := newStreamLoader(t, tc.src, cfg)
				if err := second.Restore(st); err != nil {
					t.Fatal(err)
				}
				resumed := append(head, epoch(t, second, 2, -1)...)
				name := fmt.Sprintf("%T world %d rank %d buffer %d, stopped after %d of %d batches", tc.src, tc.world, rank, tc.buffer, stop, len(full))
				if len(resumed) != len(full) {
					t.Fatalf("%s: resumed epoch has %d batches; want %d", name, len(resumed), len(full))
				}
				for k := range full {
					if !bytes.Equal(resumed[k].images, full[k].images) || !slices.Equal(resumed[k].indices, full[k].indices) || resumed[k].seq != full[k].seq {
						t.Errorf("%s: resumed batch %d differs from the uninterrupted one", name, k)
					}
				}
			}
		}
	}
	cfg := Config{Batch: 3, Workers: 2, Shuffle: true, ShuffleBuffer: 6, Seed: 5, Transform: streamTransform}
	first := newStreamLoader(t, src, cfg)
	epoch(t, first, 0, 2)
	st := first.State()
	if st.Read < 6 || len(st.Buffer) != 6 {
		t.Fatalf("State() after 2 batches = %+v; want a full buffer of 6 and at least 6 samples read", st)
	}
	bad := []State{st, st, st, st, st}
	bad[0].ShuffleBuffer = 7
	bad[1].Buffer = append(slices.Clone(st.Buffer), 0)
	bad[2].Buffer = slices.Clone(st.Buffer)
	bad[2].Buffer[0] = st.Read + 5 // not read yet
	bad[3].Read = 3                // fewer read than emitted and buffered
	bad[4].Buffer = slices.Clone(st.Buffer)
	bad[4].Buffer[1] = st.Buffer[0] // one sample twice, another lost
	for k, s := range bad {
		l := newStreamLoader(t, src, cfg)
		err := l.Restore(s)
		if err == nil {
			for _, err = range l.Epoch(context.Background(), 0) {
				if err != nil {
					break
				}
			}
		}
		if !errors.Is(err, ErrStateMismatch) {
			t.Errorf("bad state %d %+v: %v; want ErrStateMismatch", k, s, err)
		}
	}
}

// TestStreamRanks: every rank yields the same number of batches, the ranks' samples are disjoint
// apart from the stated padding (fewer than WorldSize samples), and together they cover the stream.
func TestStreamRanks(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 9, 7, 11, 3, 8) // 38 samples
	for _, world := range []int{3, 4, 40} {
		seen := map[int]int{}
		var batches []int
		for rank := range world {
			l := newStreamLoader(t, src, Config{Batch: 4, Workers: 2, Shuffle: true, ShuffleBuffer: 5, Seed: 1, Transform: streamTransform, Rank: rank,
				WorldSize: world})
			bs := epoch(t, l, 0, -1)
			batches = append(batches, len(bs))
			n := 0
			for _, b := range bs {
				n += len(b.indices)
				for _, i := range b.indices {
					seen[i]++
				}
			}
			if want := (38 + world - 1) / world; n != want {
				t.Errorf("world %d rank %d: %d samples; want %d", world, rank, n, want)
			}
		}
		if slices.Min(batches) != slices.Max(batches) {
			t.Errorf("world %d: batches per rank %v; want equal", world, batches)
		}
		total := 0
		for i := range 38 {
			if seen[i] == 0 {
				t.Errorf("world %d: position %d on no rank", world, i)
			}
			total += seen[i]
		}
		if want := world * ((38 + world - 1) / world); total != want {
			t.Errorf("world %d: %d samples over all ranks; want %d (38 + padding)", world, total, want)
		}
	}
}

// TestSizedStreamRanks: a stream whose parts' sizes are known is split by whole parts (9, 7, 11, 3
// and 8 samples: 18 and 20 for 2 ranks), each rank padded to 20 by reading its first parts again;
// BatchesPerEpoch is known; a part whose size is wrong fails the epoch with ErrCorrupt.
func TestSizedStreamRanks(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 9, 7, 11, 3, 8)
	partOf := func(key string) int {
		for p, part := range src.parts {
			for _, s := range part {
				if s.Key == key {
					return p
				}
			}
		}
		return -1
	}
	seen := map[int]int{}
	owner := map[int]int{}
	for rank := range 2 {
		l := newStreamLoader(t, sized{memSource: src}, Config{Batch: 6, Workers: 2, Shuffle: true, ShuffleBuffer: 5, Seed: 1, Transform: streamTransform,
			Rank: rank, WorldSize: 2})
		if l.BatchesPerEpoch() != 4 {
			t.Errorf("rank %d: BatchesPerEpoch() = %d; want 4 (20 samples)", rank, l.BatchesPerEpoch())
		}
		keys := readerKeys(t, l, 0)
		bs := epoch(t, l, 0, -1)
		if len(bs) != 4 || len(keys) != 20 {
			t.Errorf("rank %d: %d batches from a stream of %d; want 4 from 20", rank, len(bs), len(keys))
		}
		distinct := map[string]bool{}
		for _, k := range keys {
			distinct[k] = true
		}
		for k := range distinct {
			var j int
			fmt.Sscan(k, &j)
			seen[j]++
			p := partOf(k)
			if o, ok := owner[p]; ok && o != rank {
				t.Errorf("part %d read by ranks %d and %d", p, o, rank)
			}
			owner[p] = rank
		}
	}
	for j := range 38 {
		if seen[j] != 1 {
			t.Errorf("sample %d on %d ranks; want 1", j, seen[j])
		}
	}
	l := newStreamLoader(t, sized{memSource: src, lie: 1}, Config{Batch: 6, Workers: 2, Transform: streamTransform})
	var last error
	for b, err := range l.Epoch(context.Background(), 0) {
		if b != nil {
			b.Release()
		}
		last = err
	}
	if !errors.Is(last, ErrCorrupt) {
		t.Errorf("a part of 9 samples said to hold 10: %v; want ErrCorrupt", last)
	}
}

// TestStreamErrors: a stream that fails mid-epoch ends the epoch with its error, and an empty
// stream is ErrEmpty.
func TestStreamErrors(t *testing.T) {
	loadertest.NoLeaks(t)
	l := newStreamLoader(t, &memSource{parts: [][]Sample{{}}, info: Info{Name: "empty", Shape: transforms.Shape{C: 1, H: 1, W: 1}}}, Config{Batch: 2,
		Workers: 1})
	for _, err := range l.Epoch(context.Background(), 0) {
		if !errors.Is(err, ErrEmpty) {
			t.Errorf("empty stream: %v; want ErrEmpty", err)
		}
	}
	src := failingSource{pngSource(t, 10)}
	l = newStreamLoader(t, src, Config{Batch: 2, Workers: 2, Transform: streamTransform})
	n := 0
	var last error
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			last = err
			break
		}
		n += b.N
		b.Release()
	}
	if !errors.Is(last, errBroken) || n > 6 || !strings.HasPrefix(last.Error(), "loaders: pngstream: part 0, stream position 6: ") {
		t.Errorf("after %d samples: %v; want the stream's error, naming the stream and the position, after at most 6", n, last)
	}
}

var errBroken = errors.New("connection reset")

// failingSource breaks after 6 samples.
type failingSource struct{ *memSource }

func (f failingSource) Open(ctx context.Context, part int) (SampleStream, error) {
	st, _ := f.memSource.Open(ctx, part)
	return &failingStream{SampleStream: st}, nil
}

type failingStream struct {
	SampleStream
	n int
}

func (f *failingStream) Next(ctx context.Context) (Sample, error) {
	if f.n++; f.n > 6 {
		return Sample{}, errBroken
	}
	return f.SampleStream.Next(ctx)
}

// TestStreamBadSample: a sample of a stream that cannot be decoded is named by its position and
// key (FailFast), or skipped and counted (Skip), as for a dataset.
func TestStreamBadSample(t *testing.T) {
	loadertest.NoLeaks(t)
	src := pngSource(t, 6, 6)
	src.parts[1][2].Input.Encoded = []byte("not a png")
	cfg := Config{Batch: 4, Workers: 2, Transform: streamTransform}
	l := newStreamLoader(t, src, cfg)
	var se *SampleError
	for b, err := range l.Epoch(context.Background(), 0) {
		if b != nil {
			b.Release()
		}
		if err != nil && (!errors.As(err, &se) || se.Index != 8 || se.Key != "8") {
			t.Errorf("bad sample: %v; want a SampleError for stream position 8 (key 8)", err)
		}
	}
	if se == nil {
		t.Error("the bad sample went through")
	}
	cfg.OnError = Skip
	l = newStreamLoader(t, src, cfg)
	n := 0
	for _, b := range epoch(t, l, 0, -1) {
		n += len(b.indices)
	}
	if st := l.Stats(); n != 11 || st.Skipped != 1 {
		t.Errorf("Skip: %d samples, %d skipped; want 11 and 1", n, st.Skipped)
	}
}

// readerKeys reads epoch's samples from a stream loader's reader (this rank's, before shuffling
// into batches) and returns their keys in order.
func readerKeys(t *testing.T, l *Loader, epoch int) []string {
	t.Helper()
	var keys []string
	r := l.newStreamReader(epoch)
	defer r.close()
	for {
		it, _, ok, err := r.advance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return keys
		}
		keys = append(keys, it.s.Key)
	}
}
