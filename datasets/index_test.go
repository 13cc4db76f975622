package datasets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stoke-ml/stoke/internal/loadertest"
	"github.com/stoke-ml/stoke/internal/packdir"
	"github.com/stoke-ml/stoke/internal/remote"
	"github.com/stoke-ml/stoke/internal/remote/remotetest"
	"github.com/stoke-ml/stoke/loaders"
	"github.com/stoke-ml/stoke/transforms"
)

// stripSizes rewrites the index in dir as an older pack wrote it: no sample sizes, no classes.
func stripSizes(t *testing.T, dir string) {
	t.Helper()
	editIndexFile(t, dir, func(ix *shardIndex) {
		for i := range ix.ShardList {
			ix.ShardList[i].Sizes, ix.ShardList[i].Classes, ix.ShardList[i].Frames = nil, 0, nil
		}
	})
}

func editIndexFile(t *testing.T, dir string, edit func(*shardIndex)) {
	t.Helper()
	var ix shardIndex
	b, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	edit(&ix)
	b, _ = json.Marshal(ix)
	writeFile(t, filepath.Join(dir, IndexName), b)
}

// TestIndexFormat: the writer locates each sample's run (they tile the tar up to its end marker)
// and the shard's classes, one line per shard.
func TestIndexFormat(t *testing.T) {
	dir := t.TempDir()
	w := writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 7))
	b, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 7+3 {
		t.Errorf("index of %d lines, want 10 (one per shard):\n%s", lines, b)
	}
	ix, err := parseShardIndex(dir, b)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range ix.ShardList {
		st, _ := os.Stat(w.Shards()[k])
		var sum int64
		for _, n := range e.Sizes {
			sum += n
		}
		// The tar writer ends with the two zero blocks of the marker, padded to its 10 KiB record
		// by none: Go's writer pads nothing more.
		if len(e.Sizes) != e.NSamples || sum+tarEOFMarker != st.Size() {
			t.Errorf("shard %d: sizes %v (sum %d) for %d samples of a %d-byte tar", k, e.Sizes, sum, e.NSamples, st.Size())
		}
	}
	if got := []int{ix.ShardList[0].Classes, ix.ShardList[1].Classes, ix.ShardList[2].Classes}; got[0] != 3 || got[1] != 3 || got[2] != 1 {
		t.Errorf("classes %v, want [3 3 1] (labels i%%3 of samples 0-6)", got)
	}
}

// TestIndexedShardsLocal: an indexed shard is not scanned when opened (a damaged sample fails when
// read, naming it, and the others read), and reads the same samples as a scan of an older index.
func TestIndexedShardsLocal(t *testing.T) {
	for _, suffix := range []string{".tar", ".tar.zst", ".tar.gz"} {
		t.Run(suffix, func(t *testing.T) {
			dir := t.TempDir()
			writeShards(t, filepath.Join(dir, "shard-%06d"+suffix), 3, testSamples(t, 7))
			ds, err := Open("shards:"+dir, "")
			if err != nil {
				t.Fatal(err)
			}
			indexed := digest(t, ds)
			if sh := ds.(*Shards).shards[0]; sh.ends == nil || sh.metas != nil {
				t.Fatalf("shard opened by a scan with the index locating its samples")
			} else if _, ok := sh.file.(localShard); !ok {
				t.Fatalf("local shard read through %T", sh.file)
			}
			ds.(*Shards).Close()
			stripSizes(t, dir)
			old, err := Open("shards:"+dir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer old.(*Shards).Close()
			if old.(*Shards).shards[0].metas == nil {
				t.Fatalf("older index: shard not scanned")
			}
			if scanned := digest(t, old); scanned != indexed {
				t.Fatalf("indexed %s, scanned %s", indexed, scanned)
			}
			if loaders.Describe(old).NumClasses != 3 {
				t.Fatalf("NumClasses %d, want 3", loaders.Describe(old).NumClasses)
			}
		})
	}

	dir := t.TempDir()
	w := writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 7))
	// Damage sample 4 (the second of shard 1): its first header.
	b, _ := os.ReadFile(w.Shards()[1])
	var ix shardIndex
	ib, _ := os.ReadFile(filepath.Join(dir, IndexName))
	json.Unmarshal(ib, &ix)
	off := ix.ShardList[1].Sizes[0]
	copy(b[off:off+100], strings.Repeat("x", 100))
	writeFile(t, w.Shards()[1], b)
	ds, err := Open("shards:"+dir, "")
	if err != nil {
		t.Fatalf("indexed open read the damaged shard: %v", err)
	}
	defer ds.(*Shards).Close()
	if loaders.Describe(ds).NumClasses != 3 || ds.Len() != 7 {
		t.Fatalf("Len %d, NumClasses %d; want 7, 3 from the index", ds.Len(), loaders.Describe(ds).NumClasses)
	}
	for i := range 7 {
		_, err := ds.Sample(context.Background(), i)
		var se *loaders.SampleError
		switch {
		case i != 4 && err != nil:
			t.Errorf("sample %d: %v", i, err)
		case i == 4 && (!errors.As(err, &se) || se.Index != 4 || !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(se.Key, "shard-000001.tar:#1")):
			t.Errorf("damaged sample: %v; want a SampleError naming shard-000001.tar:#1, ErrCorrupt", err)
		}
	}
	stripSizes(t, dir)
	if _, err := Open("shards:"+dir, ""); !errors.Is(err, loaders.ErrCorrupt) {
		t.Fatalf("scan of the damaged shard: %v; want ErrCorrupt", err)
	}
}

// TestIndexSizesHostile: sizes that do not describe the shard are errors naming the shard (when
// opened) or the sample (when read), never a panic or a wrong sample.
func TestIndexSizesHostile(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(e *shardEntry)
		open   string // error when opened
		sample string // else error when sample at of shard 0 is read
		at     int
	}{
		{"fewer sizes", func(e *shardEntry) { e.Sizes = e.Sizes[:2] }, "2 sample sizes for 3 samples", "", 0},
		{"not blocks", func(e *shardEntry) { e.Sizes[1] += 7 }, "sample 1: run of", "", 0},
		{"zero", func(e *shardEntry) { e.Sizes[0] = 0 }, "sample 0: run of 0 bytes", "", 0},
		{"negative", func(e *shardEntry) { e.Sizes[2] = -512 }, "sample 2: run of -512 bytes", "", 0},
		{"no classes", func(e *shardEntry) { e.Classes = 0 }, "classes 0 for 3 samples", "", 0},
		{"past the end", func(e *shardEntry) { e.Sizes[2] += 1 << 20 }, "past the tar's", "", 0},
		// The last sample left out of the index: a dataset quietly smaller than the shard.
		{"short of the end", func(e *shardEntry) { e.Sizes, e.NSamples = e.Sizes[:2], 2 }, "bytes before its end marker that no listed sample covers", "", 0},
		{"overflowing", func(e *shardEntry) { e.Sizes[1], e.Sizes[2] = 1<<62, 1<<62 }, "samples 0-1: runs of more than", "", 0},
		{"classes without sizes", func(e *shardEntry) { e.Sizes = nil }, "classes 3 without sample sizes", "", 0},
		// Runs that straddle samples: sample 0 takes sample 1's first member.
		{"shifted", func(e *shardEntry) { e.Sizes[0] += 1024; e.Sizes[1] -= 1024 }, "", "members of samples", 0},
		{"shifted, the next", func(e *shardEntry) { e.Sizes[0] += 1024; e.Sizes[1] -= 1024 }, "", "no image member", 1},
		{"labels past classes", func(e *shardEntry) { e.Classes = 1 }, "", "label 1", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 3))
			editIndexFile(t, dir, func(ix *shardIndex) { tc.edit(&ix.ShardList[0]) })
			ds, err := Open("shards:"+dir, "")
			if tc.open != "" {
				if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), tc.open) || !strings.Contains(err.Error(), "shard-000000.tar") {
					t.Fatalf("Open: %v; want ErrCorrupt naming the shard and %q", err, tc.open)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ds.(*Shards).Close()
			_, err = ds.Sample(context.Background(), tc.at)
			var se *loaders.SampleError
			if !errors.As(err, &se) || se.Index != tc.at || !strings.Contains(err.Error(), tc.sample) || !strings.Contains(err.Error(), "shard-000000.tar") {
				t.Fatalf("Sample(%d): %v; want a SampleError naming the shard and %q", tc.at, err, tc.sample)
			}
		})
	}
}

// TestIndexedShardsRemote proves that a remote indexed shard is not scanned: opening it through its
// index costs no request of the shards, and reading K samples costs K ranged GETs of their runs'
// bytes; through an older index, opening reads every shard whole first. The samples are the same.
func TestIndexedShardsRemote(t *testing.T) {
	dir, h, base := serveShards(t, 11, nil)
	shards := []string{"plain/shard-000000.tar", "plain/shard-000001.tar", "plain/shard-000002.tar"}
	var ix shardIndex
	b, _ := os.ReadFile(filepath.Join(dir, "plain", IndexName))
	json.Unmarshal(b, &ix)
	stats := func() (reqs int, bytes int64) {
		for _, s := range shards {
			reqs += h.Requests(s)
			bytes += h.Bytes(s)
		}
		return reqs, bytes
	}
	read := []int{9, 2, 5} // shards 2, 0, 1: the second samples of each
	var want []loaders.Sample
	var runs int64
	for _, i := range read {
		e := ix.ShardList[i/4]
		runs += e.Sizes[i%4]
	}
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older index %v", older), func(t *testing.T) {
			if older {
				stripSizes(t, filepath.Join(dir, "plain"))
				b, _ := os.ReadFile(filepath.Join(dir, "plain", IndexName))
				h.Files["plain/"+IndexName] = b
			}
			r0, b0 := stats()
			ds, err := Open("shards:"+base+"/plain/"+IndexName, "")
			if err != nil {
				t.Fatal(err)
			}
			defer ds.(*Shards).Close()
			r1, b1 := stats()
			var got []loaders.Sample
			for _, i := range read {
				s, err := ds.Sample(context.Background(), i)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			r2, b2 := stats()
			// The server counts a write once it returned, which may be after the client has read it.
			for deadline := time.Now().Add(2 * time.Second); !older && b2-b1 < runs && time.Now().Before(deadline); r2, b2 = stats() {
				time.Sleep(time.Millisecond)
			}
			t.Logf("open: %d GETs, %d bytes; %d samples: %d GETs, %d bytes", r1-r0, b1-b0, len(read), r2-r1, b2-b1)
			if !older {
				if r1 != r0 || r2-r1 != len(read) || b2-b1 != runs {
					t.Fatalf("open: %d GETs; %d samples: %d GETs of %d bytes; want 0, then %d of %d bytes (their runs)", r1-r0, len(read), r2-r1, b2-b1, len(read),
						runs)
				}
				want = got
				return
			}
			// (How much of each body the server sent before the scan closed it varies.)
			if r1-r0 != len(shards) || b1-b0 < sumFileSizes(ix)/2 {
				t.Fatalf("older index: open took %d GETs of %d bytes; want one GET of each whole shard (%d bytes)", r1-r0, b1-b0, sumFileSizes(ix))
			}
			for k := range got {
				if !sameSample(got[k], want[k]) || got[k].Key != want[k].Key {
					t.Fatalf("sample %d: %q through the older index, %q through sizes", read[k], got[k].Key, want[k].Key)
				}
			}
		})
	}
}

func sumFileSizes(ix shardIndex) int64 {
	var n int64
	for _, e := range ix.ShardList {
		n += e.FileSize
	}
	return n
}

// TestStreamSizedLocal: OpenStream over local shards that stoke pack wrote (named by their folder or
// by a glob) knows their sizes from the index, so that ranks split whole shards.
func TestStreamSizedLocal(t *testing.T) {
	loadertest.NoLeaks(t)
	dir := t.TempDir()
	ds := rawDataset(23, 2, 2, 1)
	writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 5, readAll(t, ds))
	for _, spec := range []string{"shards:" + dir, "shards:" + filepath.Join(dir, "shard-*.tar")} {
		src, err := OpenStream(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		sized, ok := src.(loaders.SizedSource)
		if !ok || !slices.Equal(sized.PartLens(), []int{5, 5, 5, 5, 3}) {
			t.Fatalf("%s: part lengths %v, want [5 5 5 5 3] from the index", spec, sized.PartLens())
		}
		owner := map[int]int{} // shard -> rank
		for rank := range 2 {
			rec := &recordingSource{SizedSource: sized}
			l := newStreamLoader(t, rec, loaders.Config{Batch: 4, Workers: 1, Shuffle: true, Seed: 5, Transform: transforms.Compose(transforms.CenterCrop(2)),
				Rank: rank, WorldSize: 2})
			epoch(t, l, 0, -1)
			for _, part := range rec.opened {
				if o, seen := owner[part]; seen && o != rank {
					t.Fatalf("%s: shard %d read by ranks %d and %d; want whole shards split between them", spec, part, o, rank)
				}
				owner[part] = rank
			}
		}
		if len(owner) != 5 {
			t.Fatalf("%s: %d shards read over both ranks, want 5", spec, len(owner))
		}
	}
	writeFile(t, filepath.Join(dir, packdir.LockName), nil)
	if _, err := OpenStream("shards:"+filepath.Join(dir, "shard-*.tar"), ""); !errors.Is(err, loaders.ErrCorrupt) {
		t.Fatalf("OpenStream of an unfinished pack: %v; want ErrCorrupt", err)
	}
}

// TestStreamPrefetch: a stream over remote shards with a cache downloads the next shards of the
// epoch's (shuffled) order while the current one is read, and reads the same samples.
func TestStreamPrefetch(t *testing.T) {
	loadertest.NoLeaks(t)
	dir, h, base := serveShards(t, 12, nil)
	src, err := Opener{CacheDir: t.TempDir()}.OpenStream("shards:"+base+"/zst/"+IndexName, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.(io.Closer).Close()
	name := func(part int) string { return fmt.Sprintf("zst/shard-%06d.tar.zst", part) }
	rec := &recordingSource{SizedSource: src.(loaders.SizedSource)}
	var during error // what the first part's first read saw of the downloads ahead
	rec.onFirst = func(first int, next []int) {
		// Part first is still being read: its other samples are in the stream, not yet consumed.
		if len(next) != 2 {
			during = fmt.Errorf("prefetch of parts %v while part %d is read; want the 2 others", next, first)
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, part := range next {
			for h.Requests(name(part)) == 0 {
				if time.Now().After(deadline) {
					during = fmt.Errorf("part %d not requested while part %d is read", part, first)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	l := newStreamLoader(t, rec, loaders.Config{Batch: 4, Workers: 1, Shuffle: true, Seed: 2, Transform: transforms.Compose(transforms.CenterCrop(2))})
	epoch(t, l, 0, -1)
	if during != nil {
		t.Fatal(during)
	}
	local, err := Open("shards:"+filepath.Join(dir, "zst"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer local.(*Shards).Close()
	if len(rec.opened) != 3 {
		t.Fatalf("parts opened %v; want each of the 3 once", rec.opened)
	}
	for _, part := range rec.opened {
		got := rec.samples[part]
		if len(got) != 4 {
			t.Fatalf("part %d: %d samples streamed; want 4", part, len(got))
		}
		for j := range 4 {
			want, _ := local.Sample(context.Background(), 4*part+j)
			if !sameSample(got[j], want) {
				t.Fatalf("part %d sample %d differs", part, j)
			}
		}
		if n := h.Requests(name(part)); n != 1 {
			t.Fatalf("part %d: %d GETs, want 1 (the prefetch, then the cache)", part, n)
		}
	}
}

// noisySamples returns n raw samples of 100x100x3 random pixels (incompressible: each about half a
// frame), labels i%4.
func noisySamples(n int) []loaders.Sample {
	out := make([]loaders.Sample, n)
	x := uint32(1)
	for i := range out {
		px := make([]byte, 100*100*3)
		for j := range px {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			px[j] = byte(x)
		}
		out[i] = loaders.Sample{Input: transforms.Input{Pixels: px, H: 100, W: 100, C: 3}, Label: i % 4}
	}
	return out
}

// TestFramedShardsRemote: a compressed shard listed with its frames is read sample by sample over
// HTTPS: one ranged GET of the frames that hold the sample, not the shard.
func TestFramedShardsRemote(t *testing.T) {
	loadertest.NoLeaks(t) // pooled decoders start no goroutine
	dir := t.TempDir()
	samples := noisySamples(16)
	writeShards(t, filepath.Join(dir, "shard-%06d.tar.zst"), 8, samples)
	files := readFiles(t, dir)
	var ix shardIndex
	if err := json.Unmarshal(files[IndexName], &ix); err != nil {
		t.Fatal(err)
	}
	if n := len(ix.ShardList[0].Frames); n < 3 {
		t.Fatalf("%d frames for 8 samples of 30 KB; want one per 64 KiB", n)
	}
	h, base := serveFiles(t, files)
	ds, err := Open("shards:"+base+"/"+IndexName, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.(*Shards).Close()
	reqs := func() (n int, b int64) {
		for _, e := range ix.ShardList {
			n += h.Requests(e.URL)
			b += h.Bytes(e.URL)
		}
		return n, b
	}
	if n, _ := reqs(); n != 0 {
		t.Fatalf("%d GETs of the shards to open them", n)
	}
	var sent int64
	for k, i := range []int{11, 3, 7} {
		s, err := ds.Sample(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.Input.Pixels, samples[i].Input.Pixels) || s.Label != i%4 {
			t.Fatalf("sample %d differs", i)
		}
		// The frames that hold the run: their bytes, one GET.
		e := ix.ShardList[i/8]
		ft := newFrameTable(e.Frames)
		var start int64
		for _, n := range e.Sizes[:i%8] {
			start += n
		}
		end := start + e.Sizes[i%8]
		var want int64
		for f := range e.Frames {
			if ft.tar[f] < end && ft.tar[f+1] > start {
				want += e.Frames[f][0]
			}
		}
		// The server counts a write once it returned, which may be after the client has read it.
		n, b := reqs()
		for deadline := time.Now().Add(2 * time.Second); b-sent < want && time.Now().Before(deadline); n, b = reqs() {
			time.Sleep(time.Millisecond)
		}
		if n != k+1 || b-sent != want || want >= e.FileSize/2 {
			t.Fatalf("after %d samples: %d GETs, the last of %d bytes; want %d, the last of %d bytes (its frames; shard of %d)", k+1, n, b-sent, k+1, want,
				e.FileSize)
		}
		sent = b
		t.Logf("sample %d: %d bytes of frames, shard of %d", i, want, e.FileSize)
	}
}

// readFiles returns the files of dir by name.
func readFiles(t *testing.T, dir string) map[string][]byte {
	files := map[string][]byte{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

// serveFiles serves files over HTTPS for the package's client, for the test's duration.
func serveFiles(t *testing.T, files map[string][]byte) (*remotetest.Handler, string) {
	h := &remotetest.Handler{Files: files}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	old := client
	client = &remote.Client{HTTP: srv.Client(), Timeout: 5 * time.Second, Backoff: time.Millisecond}
	t.Cleanup(func() { client = old })
	return h, srv.URL
}

// TestFramesHostile: frames that do not make up the shard are errors naming it; frames that do not
// hold the tar bytes the index says are errors naming the sample.
func TestFramesHostile(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(e *shardEntry)
		open   string
		sample string
	}{
		{"frames short of the file", func(e *shardEntry) { e.Frames = e.Frames[1:] }, "frames of", ""},
		{"frame of nothing", func(e *shardEntry) { e.Frames[0][1] = 0 }, "frame 0 of", ""},
		// Runs are allocated as the index says: their frames may not claim more than the file holds.
		{"frames claiming more than the file holds", func(e *shardEntry) {
			e.Frames[0][1] += 200 << 20
			e.Sizes[0] += 100 << 20
			e.Sizes[1] += 100 << 20
		}, "bytes of tar in a file of", ""},
		{"frames without sizes", func(e *shardEntry) { e.Sizes, e.Classes = nil, 0 }, "frames without sample sizes", ""},
		{"sizes short of the frames", func(e *shardEntry) { e.Sizes, e.NSamples = e.Sizes[:7], 7 }, "no listed sample covers", ""},
		{"frame larger than it holds", func(e *shardEntry) { e.Frames[0][1] += 512; e.Frames[1][1] -= 512 }, "", "decompress to another size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeShards(t, filepath.Join(dir, "shard-%06d.tar.zst"), 8, noisySamples(8))
			editIndexFile(t, dir, func(ix *shardIndex) { tc.edit(&ix.ShardList[0]) })
			_, base := serveFiles(t, readFiles(t, dir))
			ds, err := Open("shards:"+base+"/"+IndexName, "")
			if tc.open != "" {
				if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), tc.open) || !strings.Contains(err.Error(), "shard-000000.tar.zst") {
					t.Fatalf("Open: %v; want ErrCorrupt naming the shard and %q", err, tc.open)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ds.(*Shards).Close()
			_, err = ds.Sample(context.Background(), 0)
			var se *loaders.SampleError
			if !errors.As(err, &se) || se.Index != 0 || !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), tc.sample) {
				t.Fatalf("Sample(0): %v; want a SampleError, ErrCorrupt, %q", err, tc.sample)
			}
		})
	}
}

// TestRemoteShardReplaced: a remote shard that is no longer the file its index describes (replaced
// by a longer one after packing) fails when a sample is read, naming the sample, instead of reading
// whatever now lies at the run's bytes.
func TestRemoteShardReplaced(t *testing.T) {
	dir := t.TempDir()
	writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 3))
	files := readFiles(t, dir)
	files["shard-000000.tar"] = append(files["shard-000000.tar"], make([]byte, 4096)...)
	_, base := serveFiles(t, files)
	ds, err := Open("shards:"+base+"/"+IndexName, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.(*Shards).Close()
	_, err = ds.Sample(context.Background(), 1)
	var se *loaders.SampleError
	if !errors.As(err, &se) || se.Index != 1 || !strings.Contains(err.Error(), "shard-000000.tar") || !strings.Contains(err.Error(),
		"changed since it was described") {
		t.Fatalf("Sample(1) of a replaced shard: %v; want a SampleError naming it and the change", err)
	}
}

// TestFramesClaimNoMemory: a frame table that claims far more tar than its frames hold costs no
// memory for the claim: reading a few bytes through a frame of a few hundred compressed bytes that
// says it holds 200 MiB allocates about what the frame really holds, and fails on the size.
func TestFramesClaimNoMemory(t *testing.T) {
	var out bytes.Buffer
	fw, err := newFrameWriter(&out, "zst")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(make([]byte, 4096))
	fw.cut()
	fw.Close()
	claim := int64(200 << 20)
	// (The index check refuses such a claim in a file this small; readAt holds on its own, as for
	// claims within the bound of a large file.)
	ft := newFrameTable([][2]int64{{int64(out.Len()), claim}})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = ft.readAt(bytes.NewReader(out.Bytes()), make([]byte, 100), 1000)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, loaders.ErrCorrupt) || !errors.Is(err, errFrameSize) {
		t.Fatalf("read through a frame claiming %d bytes of its 4096: %v; want ErrCorrupt, the size", claim, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("read 100 bytes through a frame of %d bytes that claims %d: allocated %d bytes", out.Len(), claim, grew)
	}
}

// TestIndexCountsBounded: an older entry (no sizes) that claims more samples than its file can
// hold is refused when the index is read: a stream takes the counts on trust until each shard
// ends, and two entries of math.MaxInt samples made its length overflow (a negative number of
// batches per epoch).
func TestIndexCountsBounded(t *testing.T) {
	for _, n := range []int{100_000_000, math.MaxInt} {
		dir := t.TempDir()
		writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 6))
		stripSizes(t, dir)
		editIndexFile(t, dir, func(ix *shardIndex) {
			ix.ShardList[0].NSamples, ix.ShardList[1].NSamples = n, n
		})
		src, err := OpenStream("shards:"+dir, "")
		if !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "shard-000000.tar") || !strings.Contains(err.Error(), "more than a file of") {
			if err == nil {
				l, _ := loaders.NewStream(src, loaders.Config{Batch: 2, Workers: 1, Transform: transforms.Compose(transforms.CenterCrop(2))})
				t.Fatalf("%d samples claimed: OpenStream took it (%d batches per epoch); want ErrCorrupt naming the shard", n, l.BatchesPerEpoch())
			}
			t.Fatalf("%d samples claimed: %v; want ErrCorrupt naming the shard", n, err)
		}
	}
	dir := t.TempDir()
	writeShards(t, filepath.Join(dir, "shard-%06d.tar"), 3, testSamples(t, 6))
	editIndexFile(t, dir, func(ix *shardIndex) { ix.ShardList[0].Classes = math.MaxInt })
	if _, err := Open("shards:"+dir, ""); !errors.Is(err, loaders.ErrCorrupt) || !strings.Contains(err.Error(), "past the int32 class ids") {
		t.Fatalf("classes %d: %v; want ErrCorrupt", math.MaxInt, err)
	}
}
