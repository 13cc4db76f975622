package datasets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// Tests of the Loader (package loaders) over the datasets of this package.

func TestLoaderBadSamples(t *testing.T) {
	loadertest.NoLeaks(t)
	root := badFolder(t)
	ds, err := NewImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	tf := transforms.Compose(transforms.Resize(8), transforms.CenterCrop(8))

	t.Run("fail fast", func(t *testing.T) {
		l := newLoader(t, ds, loaders.Config{Batch: 3, Workers: 2, Transform: tf})
		err := loadertest.Err(l.Epoch(context.Background(), 0))
		var se *loaders.SampleError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), root) || se.Key == "" {
			t.Fatalf("epoch error = %v; want a SampleError naming a file under %s", err, root)
		}
	})
	t.Run("header bomb", func(t *testing.T) {
		i := slices.IndexFunc(ds.paths, func(p string) bool { return strings.HasSuffix(p, "bomb.png") })
		l := newLoader(t, loaders.NewMemory(loaders.Info{Name: "bomb"}, []loaders.Sample{{Input: transforms.Input{Encoded: loadertest.PNGHeader(50000, 50000)},
			Key: ds.paths[i]}}), loaders.Config{Batch: 1, Transform: tf})
		for _, err := range l.Epoch(context.Background(), 0) {
			if !errors.Is(err, transforms.ErrTooLarge) || !strings.Contains(err.Error(), "bomb.png") {
				t.Errorf("header bomb error = %v; want ErrTooLarge naming bomb.png", err)
			}
		}
	})
	tests := []struct {
		name       string
		maxSkipped int
		wantErr    error
	}{{"skip unbounded", 0, nil}, {"skip up to 4", 4, nil}, {"skip up to 3", 3, loaders.ErrTooManySkipped}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoader(t, ds, loaders.Config{Batch: 3, Workers: 2, Transform: tf, OnError: loaders.Skip, MaxSkipped: tc.maxSkipped})
			n := 0
			var err error
			for b, e := range l.Epoch(context.Background(), 0) {
				if e != nil {
					err = e
					break
				}
				n += b.N
				b.Release()
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("epoch error = %v; want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if st := l.Stats(); n != 6 || st.Skipped != 4 || st.LastSkipped == nil {
				t.Errorf("%d samples, Stats().Skipped = %d (last %v); want 6 samples, 4 skipped", n, st.Skipped, st.LastSkipped)
			}
		})
	}
}

func TestLoaderNormalization(t *testing.T) {
	img, lab := mnistFiles(3, 28, 28)
	m, err := ParseMNIST("mnist", bytes.NewReader(img), bytes.NewReader(lab))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		ds        loaders.Dataset
		tf        *transforms.Chain
		mean, std []float32
	}{
		{"dataset's", m, nil, []float32{0.1307}, []float32{0.3081}},
		{"transform's", m, transforms.Compose(transforms.Normalize([]float32{0.5}, []float32{0.25})), []float32{0.5}, []float32{0.25}},
		{"none", rawDataset(2, 1, 1, 3), nil, []float32{0, 0, 0}, []float32{1, 1, 1}},
	}
	for _, tc := range tests {
		l := newLoader(t, tc.ds, loaders.Config{Batch: 2, Workers: 1, Transform: tc.tf})
		mean, std := l.Normalization()
		if !slices.Equal(mean, tc.mean) || !slices.Equal(std, tc.std) {
			t.Errorf("%s: Normalization() = %v, %v; want %v, %v", tc.name, mean, std, tc.mean, tc.std)
		}
	}
}

// TestLoaderFormats runs one epoch of every dataset format through the Loader.
func TestLoaderFormats(t *testing.T) {
	loadertest.NoLeaks(t)
	dir := t.TempDir()
	img, lab := mnistFiles(9, 28, 28)
	mn, err := ParseMNIST("mnist", bytes.NewReader(img), bytes.NewReader(lab))
	if err != nil {
		t.Fatal(err)
	}
	c10, err := ParseCIFAR("cifar10", 10, bytes.NewReader(cifarRecords(7, 1, func(i int) byte { return byte(i) })))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		writeFile(t, filepath.Join(dir, "folder", fmt.Sprint("class", i%2), fmt.Sprint(i, ".png")), loadertest.PNG(t, 9+i, 7, byte(i)))
	}
	folder, err := NewImageFolder(filepath.Join(dir, "folder"))
	if err != nil {
		t.Fatal(err)
	}
	w := writeShards(t, filepath.Join(dir, "shards", "s-%02d.tar.zst"), 3, testSamples(t, 8))
	shards, err := OpenShards("shards", w.Shards())
	if err != nil {
		t.Fatal(err)
	}
	defer shards.Close()
	tf := transforms.Compose(transforms.RandomResizedCrop(6))
	tests := []struct {
		name  string
		ds    loaders.Dataset
		tf    *transforms.Chain
		shape transforms.Shape
	}{
		{"mnist", mn, nil, transforms.Shape{C: 1, H: 28, W: 28}},
		{"cifar10", c10, tf, transforms.Shape{C: 3, H: 6, W: 6}},
		{"folder", folder, tf, transforms.Shape{C: 3, H: 6, W: 6}},
		{"shards", shards, tf, transforms.Shape{C: 3, H: 6, W: 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoader(t, tc.ds, loaders.Config{Batch: 4, Workers: 2, Shuffle: true, Transform: tc.tf})
			n := 0
			for _, b := range epoch(t, l, 0, -1) {
				n += len(b.indices)
				if len(b.images) != len(b.indices)*tc.shape.Len() {
					t.Errorf("batch of %d samples has %d image bytes; want %d of %v", len(b.indices), len(b.images), len(b.indices)*tc.shape.Len(), tc.shape)
				}
			}
			if l.Shape() != tc.shape || n != tc.ds.Len() {
				t.Errorf("Shape() = %v, %d samples; want %v, %d", l.Shape(), n, tc.shape, tc.ds.Len())
			}
		})
	}
}

// TestStreamShards reads packed shards both ways: the stream loader (DropLast) yields batches of
// the same samples as the random-access loader, without the short last batch.
func TestStreamShards(t *testing.T) {
	loadertest.NoLeaks(t)
	ds := rawDataset(23, 2, 2, 1)
	dir := t.TempDir()
	writeShards(t, filepath.Join(dir, "s-%04d.tar"), 5, readAll(t, ds))
	src, err := OpenStream("shards:"+filepath.Join(dir, "s-*.tar"), "")
	if err != nil {
		t.Fatal(err)
	}
	if src.Parts() != 5 {
		t.Fatalf("%d parts; want 5 shards", src.Parts())
	}
	sl := newStreamLoader(t, src, loaders.Config{Batch: 4, Workers: 2, Shuffle: true, Seed: 3, DropLast: true,
		Transform: transforms.Compose(transforms.CenterCrop(2))})
	var streamed [][]byte
	if sl.Shape() != (transforms.Shape{C: 3, H: 2, W: 2}) {
		t.Fatalf("Shape() = %v; want 3x2x2 (shards of unknown shape give RGB)", sl.Shape())
	}
	for _, b := range epoch(t, sl, 0, -1) {
		if len(b.indices) != 4 {
			t.Errorf("a batch of %d with DropLast; want 4", len(b.indices))
		}
		for k := range b.indices {
			// Gray pixels come out as three equal channels: keep the first.
			streamed = append(streamed, append(b.images[12*k:12*k+4:12*k+4], byte(b.labels[k])))
		}
	}
	if len(streamed) != 20 {
		t.Fatalf("%d samples streamed; want 20 (23 less the short batch)", len(streamed))
	}
	var all [][]byte
	for i := range ds.Len() {
		s, _ := ds.Sample(context.Background(), i)
		all = append(all, append(slices.Clone(s.Input.Pixels), byte(s.Label)))
	}
	for _, s := range streamed {
		if !slices.ContainsFunc(all, func(a []byte) bool { return bytes.Equal(a, s) }) {
			t.Errorf("streamed sample %v is not in the dataset", s)
		}
	}
	if _, err := OpenStream("mnist", ""); !errors.Is(err, ErrSpec) {
		t.Errorf("OpenStream(mnist) = %v; want ErrSpec", err)
	}
	if _, err := loaders.NewStream(src, loaders.Config{Sampler: loaders.Sequential(3)}); !errors.Is(err, loaders.ErrConfig) {
		t.Errorf("NewStream with a Sampler = %v; want ErrConfig", err)
	}
}

// TestLoaderShardRanks: shards that balance are split across ranks by whole shards (each rank reads
// only its own files), with equal batches and every sample on exactly one rank; a sampler keeps
// the sample split.
func TestLoaderShardRanks(t *testing.T) {
	loadertest.NoLeaks(t)
	sh, err := OpenShards("s", writeShards(t, filepath.Join(t.TempDir(), "s-%04d.tar"), 5, readAll(t, rawDataset(20, 1, 1, 1))).Shards())
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if got := sh.ShardStarts(); !slices.Equal(got, []int{0, 5, 10, 15}) {
		t.Fatalf("ShardStarts() = %v; want [0 5 10 15]", got)
	}
	seen := map[int]int{}
	shardOf := map[int]int{} // shard -> rank
	for rank := range 2 {
		l := newLoader(t, sh, loaders.Config{Batch: 3, Workers: 2, Shuffle: true, Seed: 2, Rank: rank, WorldSize: 2, Transform: crop1})
		if l.BatchesPerEpoch() != 4 {
			t.Errorf("rank %d: %d batches; want 4 (10 samples)", rank, l.BatchesPerEpoch())
		}
		for _, b := range epoch(t, l, 1, -1) {
			for _, i := range b.indices {
				seen[i]++
				if r, ok := shardOf[i/5]; ok && r != rank {
					t.Errorf("shard %d read by ranks %d and %d", i/5, r, rank)
				}
				shardOf[i/5] = rank
			}
		}
	}
	for i := range 20 {
		if seen[i] != 1 {
			t.Errorf("sample %d on %d ranks; want 1", i, seen[i])
		}
	}
	s, _ := loaders.Weighted(slices.Repeat([]float64{1}, 20), 20)
	l := newLoader(t, sh, loaders.Config{Batch: 3, Workers: 2, Seed: 2, Rank: 1, WorldSize: 2, Sampler: s, Transform: crop1})
	var got []int
	for _, b := range epoch(t, l, 0, -1) {
		got = append(got, b.indices...)
	}
	var want []int // every second index of the sampler's order, from position 1
	for k, i := range s.Indices(2, 0) {
		if k%2 == 1 {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("rank 1 with a Sampler read %v; want the sampler's order split by samples, %v", got, want)
	}
}

// badFolder makes an image folder of 6 good images and 4 bad ones (truncated, garbage, empty,
// header bomb), returning its root.
func badFolder(t testing.TB) string {
	root := t.TempDir()
	for i := range 6 {
		writeFile(t, filepath.Join(root, fmt.Sprint("c", i%2), fmt.Sprintf("good%d.png", i)), loadertest.PNG(t, 10, 10, byte(i)))
	}
	good := loadertest.PNG(t, 30, 30, 1)
	writeFile(t, filepath.Join(root, "c0", "truncated.png"), good[:len(good)/2])
	writeFile(t, filepath.Join(root, "c0", "garbage.jpg"), bytes.Repeat([]byte("not a jpeg "), 20))
	writeFile(t, filepath.Join(root, "c1", "empty.png"), nil)
	writeFile(t, filepath.Join(root, "c1", "bomb.png"), loadertest.PNGHeader(50000, 50000))
	return root
}
