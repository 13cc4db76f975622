package loaders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/gpu"
	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/rng"
	"github.com/stoke-ml/stoke/pinned"
	"github.com/stoke-ml/stoke/transforms"
)

// rawDataset returns n samples of h x w x c pixels; pixel j of sample i is byte(i*7 + j), label i%5.
func rawDataset(n, h, w, c int) *Memory {
	samples := make([]Sample, n)
	for i := range samples {
		samples[i] = Sample{Input: loadertest.RawInput(i, h, w, c), Label: i % 5}
	}
	return NewMemory(Info{Name: "raw", NumClasses: 5, Shape: transforms.Shape{C: c, H: h, W: w}}, samples)
}

// pngDataset returns n PNG images of varied sizes.
func pngDataset(t testing.TB, n int) *Memory {
	samples := make([]Sample, n)
	for i := range samples {
		samples[i] = Sample{Input: transforms.Input{Encoded: loadertest.PNG(t, 12+i%5, 10+i%3, byte(i))}, Label: i % 3}
	}
	return NewMemory(Info{Name: "png", NumClasses: 3}, samples)
}

// slowDataset delays every Sample by a pseudo-random time that depends on the index, so that
// workers finish out of order.
type slowDataset struct{ Dataset }

func (s slowDataset) Info() Info { return Describe(s.Dataset) }

func (s slowDataset) Sample(ctx context.Context, i int) (Sample, error) {
	r := rng.NewSample()
	r.Reset(99, 0, i)
	time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
	return s.Dataset.Sample(ctx, i)
}

// got is one batch copied back to the host.
type got struct {
	images  []byte
	labels  []int32
	indices []int
	seq     int
}

func hostBatch(t testing.TB, b *Batch) got {
	t.Helper()
	img, lab := loadertest.Host(t, b.Images, b.Labels, b.N, b.Shape.Len())
	return got{images: img, labels: lab, indices: slices.Clone(b.Indices), seq: b.Seq}
}

func newLoader(t testing.TB, ds Dataset, cfg Config) *Loader {
	t.Helper()
	if cfg.Allocator == nil {
		cfg.Allocator = pinned.Heap() // keep tests independent of the machine's mlock limit
	}
	return loadertest.CloseAtEnd[*Loader](t)(New(ds, cfg))
}

// cpuStream opens a CPU device and a stream on it, which the test's cleanup closes (after the
// Loaders of cleanups registered later).
func cpuStream(t testing.TB) (gpu.Device, gpu.Stream) {
	t.Helper()
	dev, err := gpu.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return dev, s
}

// epoch collects every batch of one epoch; stopAfter >= 0 breaks after that many batches.
func epoch(t testing.TB, l *Loader, e, stopAfter int) []got {
	t.Helper()
	return loadertest.Epoch(t, l.Epoch(context.Background(), e), stopAfter, hostBatch)
}

func TestLoaderBatches(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(10, 2, 3, 1)
	tests := []struct {
		dropLast bool
		sizes    []int
	}{{false, []int{4, 4, 2}}, {true, []int{4, 4}}}
	for _, tc := range tests {
		t.Run(fmt.Sprint("dropLast=", tc.dropLast), func(t *testing.T) {
			l := newLoader(t, ds, Config{Batch: 4, Workers: 3, DropLast: tc.dropLast})
			if l.Shape() != (transforms.Shape{C: 1, H: 2, W: 3}) || l.BatchesPerEpoch() != len(tc.sizes) {
				t.Fatalf("Shape() = %v, BatchesPerEpoch() = %d; want 1x2x3, %d", l.Shape(), l.BatchesPerEpoch(), len(tc.sizes))
			}
			bs := epoch(t, l, 0, -1)
			if len(bs) != len(tc.sizes) {
				t.Fatalf("%d batches; want %d", len(bs), len(tc.sizes))
			}
			next := 0
			for k, b := range bs {
				if len(b.indices) != tc.sizes[k] || b.seq != k {
					t.Errorf("batch %d: %d samples, seq %d; want %d, %d", k, len(b.indices), b.seq, tc.sizes[k], k)
				}
				for j, i := range b.indices {
					want, _ := ds.Sample(context.Background(), next)
					if i != next || !bytes.Equal(b.images[j*6:(j+1)*6], want.Input.Pixels) || b.labels[j] != int32(want.Label) {
						t.Errorf("batch %d sample %d = index %d label %d pixels %v; want %d, %d, %v", k, j, i, b.labels[j], b.images[j*6:(j+1)*6], next, want.Label,
							want.Input.Pixels)
					}
					next++
				}
			}
			// Copies are accounted once their slots are back; Close waits for that.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			st := l.Stats()
			if st.Batches != int64(len(tc.sizes)) || st.Samples != int64(next) || st.CopyBytes != int64(next*(6+4)) || len(st.Stages) == 0 {
				t.Errorf("Stats() = %+v; want %d batches, %d samples, %d copy bytes, stage stats", st, len(tc.sizes), next, next*10)
			}
		})
	}
}

// TestLoaderWorkersIdentical: the batches are bit-identical for 1, 2 and 8 workers, with random
// augmentation and samples that finish out of order.
func TestLoaderWorkersIdentical(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := slowDataset{pngDataset(t, 37)}
	tf := transforms.Compose(transforms.RandomResizedCrop(8), transforms.HorizontalFlip(0.5), transforms.ColorJitter(0.3, 0.3, 0.3))
	var ref []got
	for _, workers := range []int{1, 2, 8} {
		l := newLoader(t, ds, Config{Batch: 5, Workers: workers, Shuffle: true, Seed: 42, Transform: tf})
		bs := epoch(t, l, 3, -1)
		if workers == 1 {
			ref = bs
			if len(bs) != 8 || len(bs[0].images) != 5*3*8*8 {
				t.Fatalf("%d batches of %d bytes; want 8 of %d", len(bs), len(bs[0].images), 5*3*8*8)
			}
			continue
		}
		for k := range ref {
			if !bytes.Equal(bs[k].images, ref[k].images) || !slices.Equal(bs[k].labels, ref[k].labels) || !slices.Equal(bs[k].indices, ref[k].indices) {
				t.Errorf("workers=%d: batch %d differs from workers=1", workers, k)
			}
		}
	}
	// Another epoch must give another order and other augmentations.
	l := newLoader(t, ds, Config{Batch: 5, Workers: 2, Shuffle: true, Seed: 42, Transform: tf})
	if bs := epoch(t, l, 4, -1); bytes.Equal(bs[0].images, ref[0].images) {
		t.Error("epochs 3 and 4 begin with the same batch")
	}
}

// TestLoaderResume: a loader restored from a mid-epoch State yields exactly the rest of the
// uninterrupted epoch.
func TestLoaderResume(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := pngDataset(t, 23)
	cfg := Config{Batch: 4, Workers: 3, Shuffle: true, Seed: 5, Transform: transforms.Compose(transforms.RandomResizedCrop(6), transforms.HorizontalFlip(0.5))}
	full := epoch(t, newLoader(t, ds, cfg), 2, -1)

	first := newLoader(t, ds, cfg)
	head := epoch(t, first, 2, 2)
	st := first.State()
	if st.Epoch != 2 || st.Batch != 2 {
		t.Fatalf("State() after 2 batches = %+v; want epoch 2 batch 2", st)
	}
	second := newLoader(t, ds, cfg)
	if err := second.Restore(st); err != nil {
		t.Fatal(err)
	}
	tail := epoch(t, second, 2, -1)
	resumed := append(head, tail...)
	if len(resumed) != len(full) {
		t.Fatalf("resumed epoch has %d batches; want %d", len(resumed), len(full))
	}
	for k := range full {
		if !bytes.Equal(resumed[k].images, full[k].images) || !slices.Equal(resumed[k].indices, full[k].indices) || resumed[k].seq != full[k].seq {
			t.Errorf("resumed batch %d differs from the uninterrupted one", k)
		}
	}
	if got := second.State(); got.Epoch != 3 || got.Batch != 0 {
		t.Errorf("State() after the epoch = %+v; want epoch 3 batch 0", got)
	}
	bad := []State{st, st, st}
	bad[0].Seed++
	bad[1].Batch = 99
	bad[2].Len--
	for _, s := range bad {
		if err := second.Restore(s); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("Restore(%+v) = %v; want ErrStateMismatch", s, err)
		}
	}
}

// TestLoaderDistributed: ranks get disjoint shares (apart from padding) covering the dataset, in
// the same number of batches.
func TestLoaderDistributed(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(22, 1, 1, 1)
	const world = 3
	seen := map[int]int{}
	var nBatches []int
	for rank := range world {
		l := newLoader(t, ds, Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 1, Rank: rank, WorldSize: world})
		bs := epoch(t, l, 0, -1)
		nBatches = append(nBatches, len(bs))
		for _, b := range bs {
			for _, i := range b.indices {
				seen[i]++
			}
		}
	}
	if nBatches[0] != 2 || nBatches[1] != 2 || nBatches[2] != 2 {
		t.Errorf("batches per rank = %v; want [2 2 2] (8 samples each)", nBatches)
	}
	total := 0
	for i := range 22 {
		if seen[i] == 0 {
			t.Errorf("index %d on no rank", i)
		}
		total += seen[i]
	}
	if total != 24 {
		t.Errorf("%d samples over all ranks; want 24 (22 + 2 padding)", total)
	}
}

func TestLoaderLabelOutOfRange(t *testing.T) {
	loadertest.NoLeaks(t)
	// A user dataset that does not check its labels: the Loader does.
	ds := labelled{rawDataset(4, 1, 1, 1)}
	l := newLoader(t, ds, Config{Batch: 2})
	err := loadertest.Err(l.Epoch(context.Background(), 0))
	var se *SampleError
	if !errors.Is(err, ErrLabel) || !errors.As(err, &se) || se.Index != 3 {
		t.Errorf("epoch error = %v; want ErrLabel about sample 3", err)
	}
}

// labelled gives sample 3 label 7 of 5 classes without checking.
type labelled struct{ m *Memory }

func (d labelled) Len() int   { return d.m.Len() }
func (d labelled) Info() Info { return d.m.Info() }
func (d labelled) Sample(_ context.Context, i int) (Sample, error) {
	s := d.m.samples[i]
	if i == 3 {
		s.Label = 7
	}
	return s, nil
}

// TestLoaderCancel: cancelling mid-epoch, or breaking out of the loop, leaks no goroutine, and the
// loader serves a full epoch afterwards (no slot or buffer lost).
func TestLoaderCancel(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := slowDataset{rawDataset(60, 4, 4, 3)}
	l := newLoader(t, ds, Config{Batch: 4, Workers: 4, Prefetch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var err error
	for b, e := range l.Epoch(ctx, 0) {
		if e != nil {
			err = e
			break
		}
		n++
		time.Sleep(time.Millisecond) // a slow consumer: the pipeline is full when it cancels
		if n == 3 {
			cancel()
		}
		b.Release()
	}
	if !errors.Is(err, context.Canceled) && n != 3 {
		t.Errorf("after cancel: %d batches, error %v; want context.Canceled or a stop after 3", n, err)
	}
	if bs := epoch(t, l, 1, 2); len(bs) != 2 {
		t.Fatalf("after cancel: %d batches before break; want 2", len(bs))
	}
	if bs := epoch(t, l, 2, -1); len(bs) != 15 {
		t.Fatalf("after break: %d batches; want 15", len(bs))
	}
	// Close reports slots that never came back to the pool (pinned.ErrLeaked).
	if err := l.Close(); err != nil {
		t.Errorf("Close after the epochs: %v", err)
	}
}

// TestLoaderComputeStream: with a consumer stream, work enqueued on it sees the batch's data, and
// buffers are reused only after that work.
func TestLoaderComputeStream(t *testing.T) {
	loadertest.NoLeaks(t)
	dev, compute := cpuStream(t)
	ds := rawDataset(30, 2, 2, 1)
	l := newLoader(t, ds, Config{Batch: 3, Workers: 2, Device: dev, Stream: compute, Prefetch: 1})
	sums := make([]int, l.BatchesPerEpoch()) // written by the compute stream only
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		n := b.N * b.Shape.Len()
		k := b.Seq
		if err := compute.Host(func() error {
			time.Sleep(200 * time.Microsecond) // a slow step: the loader must not overwrite its input
			img, _ := gpu.HostBytes(b.Images)
			for _, v := range img[:n] {
				sums[k] += int(v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	if err := compute.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k, got := range sums {
		want := 0
		for i := 3 * k; i < 3*k+3; i++ {
			s, _ := ds.Sample(context.Background(), i)
			for _, v := range s.Input.Pixels {
				want += int(v)
			}
		}
		if got != want {
			t.Errorf("batch %d pixel sum seen on the compute stream = %d; want %d", k, got, want)
		}
	}
}

func TestLoaderConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		ds   Dataset
		cfg  Config
		want error
	}{
		{"negative batch", rawDataset(2, 1, 1, 1), Config{Batch: -1}, ErrConfig},
		{"bad rank", rawDataset(2, 1, 1, 1), Config{Rank: 2, WorldSize: 2}, ErrConfig},
		{"bad policy", rawDataset(2, 1, 1, 1), Config{OnError: 5}, ErrConfig},
		{"empty dataset", NewMemory(Info{}, nil), Config{}, ErrEmpty},
		{"varying sizes without fixed transform", pngDataset(t, 2), Config{}, ErrConfig},
	}
	for _, tc := range tests {
		if _, err := New(tc.ds, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("New(%s) error = %v; want %v", tc.name, err, tc.want)
		}
	}
}

func TestParseErrorPolicy(t *testing.T) {
	for _, p := range []ErrorPolicy{FailFast, Skip} {
		if got, err := ParseErrorPolicy(p.String()); got != p || err != nil {
			t.Errorf("ParseErrorPolicy(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	if _, err := ParseErrorPolicy("ignore"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseErrorPolicy(ignore) error = %v; want ErrConfig", err)
	}
}

// TestLoaderLifecycle: Close and a second Epoch are refused while an epoch runs; a batch held past
// Close is freed by its Release; a closed loader refuses epochs.
func TestLoaderLifecycle(t *testing.T) {
	loadertest.NoLeaks(t)
	l, err := New(rawDataset(8, 1, 2, 1), Config{Batch: 2, Workers: 1, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	var held *Batch
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Elapsed <= 0 || len(st.Stages) != 4 || st.Batches != 1 {
			t.Errorf("Stats() during the epoch = %+v; want elapsed time, 4 stages, 1 batch", st)
		}
		if err := l.Close(); !errors.Is(err, ErrBusy) {
			t.Errorf("Close during an epoch = %v; want ErrBusy", err)
		}
		for _, err := range l.Epoch(context.Background(), 1) {
			if !errors.Is(err, ErrBusy) {
				t.Errorf("nested Epoch error = %v; want ErrBusy", err)
			}
		}
		held = b
		break
	}
	if err := l.Close(); err == nil {
		t.Error("Close with a batch held = nil; want an error")
	}
	held.Release()
	held.Release() // a second Release does nothing
	for _, err := range l.Epoch(context.Background(), 1) {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Epoch after Close error = %v; want ErrClosed", err)
		}
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

// TestLoaderSurvivesPanickingConsumer: a panic in the consumer's loop, recovered by the caller,
// leaves the Loader ready for the next epoch and for Close, with every goroutine joined.
func TestLoaderSurvivesPanickingConsumer(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(40, 2, 3, 1)
	l, err := New(ds, Config{Batch: 4, Workers: 3, Allocator: pinned.Heap()})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != "user code" {
				t.Fatalf("recovered %v", r)
			}
		}()
		for b, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			panic("user code")
		}
	}()
	if got := epoch(t, l, 1, -1); len(got) != 10 {
		t.Fatalf("the epoch after a panic: %d batches, want 10", len(got))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after a panic: %v", err)
	}
}
